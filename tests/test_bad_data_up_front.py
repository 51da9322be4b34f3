"""Issue 23 item 7: every bad data file is refused in one line, exit 4, before any model call.

Unit tests on the loaders (KG syntax, encodings, nesting, empty files, duplicate ids, the
distractor pool), then suite runs on a tmp copy of the bundled data with one bad file each: the
run stops at start (exit 4, one line naming the file) and the endpoint sees no request.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_openai_server import FakeOpenAIServer, completion

from pytest_toolbench.benchmarks.dataset_errors import DatasetError
from pytest_toolbench.benchmarks.familytool.benchmark import FAMILYTOOL
from pytest_toolbench.benchmarks.familytool.kg import load_triples
from pytest_toolbench.benchmarks.familytool.options import FamilyToolOptions
from pytest_toolbench.benchmarks.familytool.schema import load_records
from pytest_toolbench.benchmarks.metabench.benchmark import METABENCH
from pytest_toolbench.benchmarks.metabench.options import MetaBenchOptions
from pytest_toolbench.benchmarks.metabench.pool import load_distractors
from pytest_toolbench.benchmarks.metabench.schema import load_dialogues
from pytest_toolbench.benchmarks.toolbehonest.schema import load_toolbehonest_file
from pytest_toolbench.benchmarks.toolhop.schema import load_toolhop_file

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
BAD_UTF8 = b"\xff\xfe not utf-8\n"


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text, text
    return text


# --- FamilyTool -----------------------------------------------------------------------------

def test_familytool_non_utf8_record_line_names_file_and_line(tmp_path):
    path = tmp_path / "familytool-b.jsonl"
    good = (DATA / "familytool" / "familytool-b.jsonl").read_bytes().splitlines(keepends=True)
    path.write_bytes(good[0] + b'["caf\xe9"]\n')
    with pytest.raises(DatasetError) as err:
        load_records(path, "b")
    assert one_line(err.value).startswith(f"{path} line 2: not UTF-8 text")


def test_familytool_non_utf8_kg_line_names_file_and_line(tmp_path):
    path = tmp_path / "familykg-b.txt"
    path.write_bytes(b"['Bob', 'father', 'Jack']\n['Bob', 'wife', 'Ren\xe9e']\n")
    with pytest.raises(DatasetError) as err:
        load_triples(path)
    assert one_line(err.value).startswith(f"{path} line 2: not UTF-8 text")


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_familytool_empty_data_and_kg_files_are_refused(tmp_path, content):
    data, kg = tmp_path / "familytool-b.jsonl", tmp_path / "familykg-b.txt"
    data.write_text(content)
    kg.write_text(content)
    with pytest.raises(DatasetError, match="no records") as err:
        load_records(data, "b")
    assert one_line(err.value).startswith(str(data))
    with pytest.raises(DatasetError, match="no triples") as err:
        load_triples(kg)
    assert one_line(err.value).startswith(str(kg))


def test_familytool_duplicate_id_names_both_lines(tmp_path):
    lines = (DATA / "familytool" / "familytool-b.jsonl").read_text().splitlines()
    dup = json.loads(lines[2])
    dup[0]["content"] = json.loads(lines[0])[0]["content"]  # KGMTUbench_0 again, on line 3
    path = tmp_path / "familytool-b.jsonl"
    path.write_text("\n".join([lines[0], lines[1], json.dumps(dup)]) + "\n")
    with pytest.raises(DatasetError) as err:
        load_records(path, "b")
    text = one_line(err.value)
    assert text.startswith(f"{path} record #2 (id=KGMTUbench_0) line 3: duplicate id (also line 1)")


def _settings(data_dir: Path | None, **options) -> SimpleNamespace:
    def options_for(name, model):
        return model(**options)
    return SimpleNamespace(data_dir=data_dir, options_for=options_for)


def test_familytool_check_data_reads_each_selected_kg(tmp_path):
    shutil.copytree(DATA / "familytool", tmp_path / "familytool")
    kg_b = tmp_path / "familytool" / "familykg-b.txt"
    kg_b.write_text(kg_b.read_text() + "['Bob', 'father'\n")
    bad_line = len(kg_b.read_text().splitlines())
    with pytest.raises(DatasetError) as err:
        FAMILYTOOL.check_data(_settings(tmp_path))
    assert one_line(err.value).startswith(f"{kg_b} line {bad_line}: not a triple literal")
    FAMILYTOOL.check_data(_settings(tmp_path, split=["e"]))  # split e does not read KG b
    other = tmp_path / "inductive.txt"
    other.write_text("oops\n")
    with pytest.raises(DatasetError, match=f"{other} line 1"):  # --familytool-kg-file replaces both
        FAMILYTOOL.check_data(_settings(tmp_path, split=["e"], kg_file=str(other)))
    FAMILYTOOL.check_data(_settings(None))  # the bundled sample is fine
    assert FamilyToolOptions().kg_file is None


# --- ToolHop ----------------------------------------------------------------------------------

def test_toolhop_deeply_nested_array_is_one_line(tmp_path):
    path = tmp_path / "ToolHop.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DatasetError) as err:
        load_toolhop_file(path)
    assert one_line(err.value) == f"{path}: invalid JSON: nested too deeply"


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_toolhop_non_utf8_byte_names_line_and_byte_in_it(tmp_path, newline):
    # ToolHop is one JSON document; a user opens it at a line, not at a byte offset into megabytes
    path = tmp_path / "ToolHop.json"
    path.write_bytes(newline.join([b"[", b'  {"question": "x",', b'   "answer": "Ren\xe9e"}', b"]"]))
    with pytest.raises(DatasetError) as err:
        load_toolhop_file(path)
    assert one_line(err.value).startswith(f"{path} line 3: not UTF-8 text (")
    assert one_line(err.value).endswith(" at byte 17 of the line)")


@pytest.mark.parametrize("content,line,byte", [
    (b"\xff[]", 1, 0), (b"[\n\xff]", 2, 0), (b"[\r\n\r\n \xff]", 3, 1),
])
def test_non_utf8_byte_at_a_line_start(tmp_path, content, line, byte):
    path = tmp_path / "ToolHop.json"
    path.write_bytes(content)
    with pytest.raises(DatasetError) as err:
        load_toolhop_file(path)
    assert one_line(err.value).startswith(f"{path} line {line}: not UTF-8 text (")
    assert f" at byte {byte} of the line)" in str(err.value)


@pytest.mark.parametrize("content", ["", " \n", "[]", "[\n]\n"])
def test_toolhop_empty_file_names_the_file(tmp_path, content):
    path = tmp_path / "ToolHop.json"
    path.write_text(content)
    with pytest.raises(DatasetError) as err:
        load_toolhop_file(path)
    assert one_line(err.value).startswith(f"{path}: ")
    assert "no records" in str(err.value)


# --- ToolBeHonest ----------------------------------------------------------------------------

@pytest.mark.parametrize("content,message", [("", "no records"), ("[]", "no records"),
                                             ("[" * 100_000 + "]" * 100_000, "nested too deeply")])
def test_toolbehonest_empty_or_deep_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "test_en.json"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message) as err:
        load_toolbehonest_file(path)
    assert one_line(err.value).startswith(f"{path}: ")


# --- Meta-Bench -------------------------------------------------------------------------------

def test_metabench_non_utf8_jsonl_names_file_and_line(tmp_path):
    good = (DATA / "metabench" / "sample.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "sample.jsonl"
    path.write_bytes(good[0] + BAD_UTF8)
    with pytest.raises(DatasetError) as err:
        load_dialogues(tmp_path)
    assert one_line(err.value).startswith(f"{path} line 2: not UTF-8 text")


@pytest.mark.parametrize("name,content", [("a.jsonl", ""), ("a.jsonl", "\n\n"), ("a.json", ""),
                                          ("a.json", "[]")])
def test_metabench_empty_file_names_the_file(tmp_path, name, content):
    shutil.copy(DATA / "metabench" / "sample.jsonl", tmp_path / "sample.jsonl")
    (tmp_path / name).write_text(content)
    with pytest.raises(DatasetError) as err:
        load_dialogues(tmp_path)
    assert one_line(err.value).startswith(f"{tmp_path / name}: ")
    assert "no dialogues" in str(err.value)


def test_metabench_deeply_nested_line_is_one_line(tmp_path):
    path = tmp_path / "sample.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(DatasetError) as err:
        load_dialogues(tmp_path)
    assert one_line(err.value) == f"{path} line 1: invalid JSON: nested too deeply"


@pytest.mark.parametrize("content,message", [
    (BAD_UTF8, "not UTF-8 text"),
    (b"", "is empty"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'[{"name": "a"}, {"nam', "invalid JSON"),
])
def test_corrupt_distractor_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "d.json"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=message) as err:
        load_distractors(path)
    assert one_line(err.value).startswith(str(path))
    with pytest.raises(DatasetError, match=message):  # and the run reads it up front
        METABENCH.check_data(_settings(None, distractors=str(path)))


def test_distractor_folder_is_one_line(tmp_path):
    with pytest.raises(DatasetError, match="cannot read"):
        load_distractors(tmp_path)


def test_bundled_distractors_pass_the_check():
    METABENCH.check_data(_settings(None))
    assert MetaBenchOptions().distractors is None


# --- whole runs: exit 4, one line, no request -----------------------------------------------

def run_suite(tmp_path: Path, suite: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", f"suites/{suite}", "-p", "no:cacheprovider", "-q",
           "-p", "no:randomly", "-n", "0", "--no-cache", "--runs-dir", str(tmp_path / "runs"), *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


def assert_refused(proc: subprocess.CompletedProcess, bad: Path, where: str = "") -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out[-3000:]
    errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, out[-3000:]
    assert f"{bad}{where}" in errors[0], errors
    assert "Traceback" not in out and "passed" not in out and "failed" not in out


def test_run_with_bad_kg_line_stops_before_any_model_call(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DATA / "familytool", data / "familytool")
    kg = data / "familytool" / "familykg-e.txt"
    kg.write_text(kg.read_text() + "['Bob', 'father', 'Jack'\n")
    bad_line = len(kg.read_text().splitlines())
    with FakeOpenAIServer(lambda body, i: (200, {}, completion(content="x"))) as server:
        proc = run_suite(tmp_path, "familytool", "--data-dir", str(data), "--base-url", server.base_url,
                         "--api-key", "t", "--model", "m")
        assert server.requests == []
    assert_refused(proc, kg, f" line {bad_line}: not a triple literal")


def test_run_with_corrupt_distractors_stops_at_start(tmp_path):
    bad = tmp_path / "distractors.json"
    bad.write_text('[{"name": "a"},')
    with FakeOpenAIServer(lambda body, i: (200, {}, completion(content="x"))) as server:
        proc = run_suite(tmp_path, "metabench", "--metabench-distractors", str(bad),
                         "--base-url", server.base_url, "--api-key", "t", "--model", "m")
        assert server.requests == []
    assert_refused(proc, bad, " line 1 column 16: invalid JSON")


def test_run_with_empty_metabench_file_names_it(tmp_path):
    data = tmp_path / "data"
    (data / "metabench").mkdir(parents=True)
    empty = data / "metabench" / "sample.jsonl"
    empty.write_text("")
    proc = run_suite(tmp_path, "metabench", "--data-dir", str(data), "--model", "oracle")
    assert_refused(proc, empty, ": the file is empty")
