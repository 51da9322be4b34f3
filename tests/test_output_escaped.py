"""Text from a tool, the model or a dataset is shown escaped, in every output.

A dataset's question, a tool's exception or a model's reply may hold terminal control sequences
(cursor up, erase line, a window title) or bidi overrides. The unit tests pin the escaper
(results/safe_text.py); the end-to-end test runs ``pytest suites/toolhop`` in a subprocess on a
hostile record against a local endpoint and reads every output a person or a CI system reads:
stdout, the JUnit XML, the Markdown summary, the Allure results and the JSON reports.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, completion, tool_call
from pytest_toolbench.report.markdown_report import cell
from pytest_toolbench.text_table import TextTable, render_table
from pytest_toolbench.results.safe_text import safe_data, safe_json, safe_json_bytes, safe_text
from shared_data import BUNDLED_TOOLHOP as BUNDLED

REPO = Path(__file__).resolve().parents[1]

#: Cursor up, erase line, a window-title OSC ended by BEL, then a right-to-left override.
HOSTILE = "\x1b[1A\x1b[2K\x1b]0;pwned\x07\u202e"
ESCAPED = "\\x1b[1A\\x1b[2K\\x1b]0;pwned\\x07\\u202e"
#: Any raw character the outputs must never hold (newline, tab and CR excepted: files have lines).
RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


# --------------------------------------------------------------------------- the escaper
def test_control_and_bidi_characters_are_escaped_as_python_writes_them():
    assert safe_text(HOSTILE) == ESCAPED
    assert safe_text("a\x7fb\x9bc\u2067d\u200fe\u061cf") == "a\\x7fb\\x9bc\\u2067d\\u200fe\\u061cf"
    assert safe_text("one\ntwo\tthree\r") == "one\\ntwo\\tthree\\r"
    assert safe_text("one\ntwo\tthree\r", multiline=True) == "one\ntwo\tthree\\r"
    assert safe_text("\ud800") == "\\ud800"  # a lone surrogate could not even be printed


def test_ordinary_text_comes_back_unchanged():
    for text in ("How many letters?", "导演的名字有几个字母？", "emoji 🎬 and accents: café",
                 "a backslash \\x1b typed as text", ""):
        assert safe_text(text) is text
        assert safe_text(text, multiline=True) is text
        assert safe_json(json.dumps(text, ensure_ascii=False)) == json.dumps(text, ensure_ascii=False)


def test_json_escapes_are_lossless_and_keep_other_non_ascii_text_readable():
    value = {"question": "谁" + HOSTILE + "\x9b\x7f\u2066?", "k\u202e": ["\u200e"]}
    encoded = json.dumps(value, ensure_ascii=False)
    for text in (safe_json(encoded), safe_json_bytes(encoded.encode()).decode()):
        assert not RAW.search(text)
        assert json.loads(text) == value
        assert "谁" in text and "\\u202e" in text
    plain = "导演".encode()
    assert safe_json_bytes(plain) is plain


def test_ascii_json_is_passed_without_a_regex_scan_and_del_is_still_escaped(monkeypatch):
    from pytest_toolbench.results import safe_text as module

    class NoScan:
        def search(self, _):
            raise AssertionError("scanned ASCII JSON (every journal line pays for it)")

    line = b'{"question":"How many letters?","x":"\\u202e \\x1b"}\n'
    with monkeypatch.context() as patched:
        patched.setattr(module, "_JSON_BYTES", NoScan())
        patched.setattr(module, "_JSON_TEXT", NoScan())
        assert safe_json_bytes(line) is line
        assert safe_json(line.decode()) == line.decode()
    assert safe_json_bytes(b'{"a":"\x7f"}') == b'{"a":"\\u007f"}'  # DEL is ASCII: still escaped
    assert safe_json('{"a":"\x7f"}') == '{"a":"\\u007f"}'


def test_safe_data_escapes_every_string_of_a_record():
    assert safe_data({"k" + HOSTILE: [HOSTILE, 1, ("\u202e",)]}) == {
        "k" + ESCAPED: [ESCAPED, 1, ("\\u202e",)]}


def test_table_cells_are_escaped_before_their_width_is_measured():
    lines = render_table(TextTable(["group", "n"], [["Film" + HOSTILE, "1"], ["TV", "2"]]), 80)
    assert not any(RAW.search(line) for line in lines)
    assert len({len(line) for line in lines}) == 1  # the escape did not shift a column
    assert cell("a" + HOSTILE + "|b") == "a" + ESCAPED.replace("\\", "\\\\") + "\\|b"


# --------------------------------------------------------------------------- end to end
def hostile_data(folder: Path) -> tuple[Path, str]:
    """The first bundled record with escape sequences in its question and its domain, and a
    first tool that raises with them; returns (the --data-dir, the tool's name)."""
    record = json.loads(BUNDLED.read_text(encoding="utf-8"))[0]
    record["question"] = "Q" + HOSTILE + " How many letters?"
    record["domain"] = "Film" + HOSTILE
    name = record["tools"][next(iter(record["tools"]))]["name"]
    record["functions"][0] = (f"def {name}(film_title, release_year=None, "
                              f"include_co_directors=False):\n"
                              f"    raise ValueError({('boom' + HOSTILE)!r})\n")
    data_dir = folder / ("data" + HOSTILE)  # the data's path is shown too (the data note)
    (data_dir / "toolhop").mkdir(parents=True)
    (data_dir / "toolhop" / "ToolHop.json").write_text(json.dumps([record], ensure_ascii=False),
                                                       encoding="utf-8")
    return data_dir, name


def echoing_agent(tool: str):
    """Calls the hostile tool once, then answers with what it got back (the tool's error text);
    without tools it answers with escape sequences of its own."""

    def handler(body: dict, index: int):
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if body.get("tools") and not results:
            return 200, {}, completion(None, [tool_call(tool, {"film_title": "Jaws"})])
        text = results[-1] if results else "A" + HOSTILE
        return 200, {}, completion(f"<answer>{text}</answer>")

    return handler


def raw_in(text: str) -> list[str]:
    return sorted(set(RAW.findall(text)))


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_hostile_record_tool_and_reply_reach_every_output_escaped(tmp_path, workers):
    data_dir, tool = hostile_data(tmp_path)
    out = tmp_path / "out"
    with FakeOpenAIServer(echoing_agent(tool)) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider",
             "-p", "no:randomly", "-n", workers, "--data-dir", str(data_dir),
             "--base-url", server.base_url, "--api-key", "t", "--model", "m", "--no-cache",
             "--runs-dir", str(out / "runs"), "--toolbench-json", str(out / "report.json"),
             "--junitxml", str(out / "junit.xml"), "--toolbench-md", str(out / "summary.md"),
             "--alluredir", str(out / "allure")],
            cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 1, shown[-3000:]  # three wrong answers
    assert not raw_in(shown), shown[-3000:]
    # pytest's failure sections and its FAILED lines: the question and the tool's error
    assert f"question: Q{ESCAPED} How many letters?" in proc.stdout
    assert f"an error occured when call {tool}: boom{ESCAPED}" in proc.stdout
    assert "FAILED suites/toolhop/test_toolhop.py::test_toolhop[toolhop-9001-direct]" in proc.stdout
    assert f"data{ESCAPED}/toolhop/ToolHop.json" in proc.stdout  # the summary's data note

    junit = (out / "junit.xml").read_text(encoding="utf-8")
    assert not raw_in(junit)
    assert f"boom{ESCAPED}" in junit and f"question: Q{ESCAPED}" in junit

    markdown = (out / "summary.md").read_text(encoding="utf-8")
    assert not raw_in(markdown) and f"data{ESCAPED}/toolhop" in markdown

    allure_files = [p for p in (out / "allure").rglob("*") if p.is_file()]
    allure_text = {p: p.read_text(encoding="utf-8") for p in allure_files if p.suffix != ".png"}
    assert {p.name: raw_in(t) for p, t in allure_text.items() if raw_in(t)} == {}
    results = [json.loads(t) for p, t in allure_text.items() if p.name.endswith("-result.json")]
    assert len(results) == 3
    for result in results:  # what the viewer shows, decoded: the title, message, steps
        assert not raw_in(json.dumps(result, ensure_ascii=False))
        assert f"Q{ESCAPED}" in result["name"]
        assert ESCAPED in result["statusDetails"]["message"]
    assert any(f"boom{ESCAPED}" in t for p, t in allure_text.items() if p.suffix == ".txt")

    for path in (out / "report.json", *(out / "runs").rglob("*.json*")):
        # the run's journal as a reader gets it: compacted (gzip, texts interned) or plain
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            from pytest_toolbench.results.journal import journal_lines

            journal = path.with_name(path.name[:-len(".gz")])
            data = b"\n".join(line for _, _, line in journal_lines(journal))
        text = data.decode("utf-8")
        assert not raw_in(text), path
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    questions = {c["details"]["question"] for c in report["cases"]}
    assert questions == {"Q" + HOSTILE + " How many letters?"}  # the JSON escapes lose nothing
