"""Outputs and option values checked at configure, before any model call (issue 23, item 8).

Every unwritable output path (report, Markdown, recording, JUnit XML, Allure, run folder, response
cache) and every value that cannot work (an output cap of 0, a base URL that is no URL) is one
``ERROR:`` line naming the option, exit 4, and not one request to the endpoint.

The tests run as root here, and root ignores permission bits, so an unwritable path is made the
way that stops root too: a path under a regular file (``<tmp>/file.txt/report.json``), or a folder
under ``/proc``, where no file can be created whoever asks (the write probe's case).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.output_paths import check_file, check_folder
from test_ci_gates import REPO, http, run_suite, suite_cmd, wrong


def _blocked(tmp_path: Path, name: str) -> Path:
    """A path no one can write: its parent is a regular file."""
    (tmp_path / "file.txt").write_text("not a folder")
    return tmp_path / "file.txt" / name


def _one_usage_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == ToolbenchExit.USAGE_ERROR, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, proc.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize(("option", "name", "extra"), [
    ("--toolbench-json", "report.json", []),
    ("--toolbench-md", "summary.md", []),
    ("--record", "record.jsonl", []),
    ("--junitxml", "junit.xml", []),
    ("--runs-dir", "runs", []),
    ("--cache-dir", "cache", []),
    ("--alluredir", "allure-results", []),
    ("--allure-html", "allure-html", ["--alluredir", "ALLURE"]),
])
def test_an_unwritable_output_is_one_line_exit_4_before_any_model_call(tmp_path, option, name,
                                                                       extra):
    path = _blocked(tmp_path, name)
    extra = [str(tmp_path / "allure") if a == "ALLURE" else a for a in extra]
    with FakeOpenAIServer(wrong) as server:
        proc, report = run_suite(tmp_path, *http(server), *extra, option, str(path))
        assert server.requests == []
    _one_usage_error(proc, option, str(path))
    assert report is None


def test_every_unwritable_output_is_its_own_line_and_the_default_folders_say_where_else(tmp_path):
    """A read-only checkout fails both default folders: the run says so at once, one ERROR line
    each, with the options that move them, not one folder per try."""
    runs, cache = _blocked(tmp_path, "runs"), _blocked(tmp_path, "cache")
    with FakeOpenAIServer(wrong) as server:
        proc, report = run_suite(tmp_path, *http(server), "--runs-dir", str(runs),
                                 "--cache-dir", str(cache))
        assert server.requests == []
    assert proc.returncode == ToolbenchExit.USAGE_ERROR and report is None
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:")]
    assert errors == [
        f"ERROR: pytest-toolbench: --runs-dir {runs}: cannot be created, {runs.parent} is not a "
        "folder (--runs-dir or $TOOLBENCH_RUNS_DIR puts the run folders elsewhere)",
        f"ERROR: pytest-toolbench: --cache-dir {cache}: cannot be created, {cache.parent} is not "
        "a folder (--cache-dir puts the response cache elsewhere; --no-cache writes none)"], proc.stderr


def test_check_output_paths_gathers_every_problem(tmp_path):
    from pytest_toolbench.output_paths import OutputPathsError, check_output_paths, problems_of

    bad = _blocked(tmp_path, "r.json")
    check_output_paths([("--toolbench-json", tmp_path / "ok.json"), ("--record", None)],
                       [("--runs-dir", tmp_path / "runs")])  # nothing wrong: nothing raised
    with pytest.raises(OutputPathsError) as raised:
        check_output_paths([("--toolbench-json", bad), ("--toolbench-md", tmp_path / "ok.md")],
                           [("--alluredir", bad.parent / "allure")])
    assert problems_of(raised.value) == (f"--toolbench-json {bad}: {bad.parent} is not a folder",
                                         f"--alluredir {bad.parent / 'allure'}: cannot be "
                                         f"created, {bad.parent} is not a folder")
    assert str(raised.value) == "; ".join(problems_of(raised.value))
    assert problems_of(ValueError("one")) == ("one",)


def test_two_outputs_in_one_file_are_refused(tmp_path, monkeypatch):
    """--toolbench-json and --toolbench-md (or --junitxml) naming one file: the report written
    last was all it held, and the run said nothing."""
    from pytest_toolbench.output_paths import OutputPathsError, check_output_paths, problems_of

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.out").symlink_to(tmp_path / "out")
    with pytest.raises(OutputPathsError) as raised:
        check_output_paths([("--toolbench-json", Path("out")), ("--toolbench-md", Path("sub/../out")),
                            ("--junitxml", tmp_path / "link.out"), ("--record", Path("rec"))], [])
    assert problems_of(raised.value) == (
        "--toolbench-md sub/../out: the file --toolbench-json writes too; give each output its own file",
        f"--junitxml {tmp_path / 'link.out'}: the file --toolbench-json writes too; give each "
        "output its own file")


def test_a_run_folder_that_cannot_take_a_file_is_exit_4_not_a_crash(tmp_path):
    """/proc takes no new file even from root: only the write probe can tell (os.access says yes
    to root); the run used to crash with exit 3 at its first result."""
    if not Path("/proc/self").is_dir():
        pytest.skip("needs Linux /proc")
    with FakeOpenAIServer(wrong) as server:
        proc, _ = run_suite(tmp_path, *http(server), "--runs-dir", "/proc/toolbench-runs")
        assert server.requests == []
    _one_usage_error(proc, "--runs-dir", "/proc/toolbench-runs", "cannot write in /proc")


def test_a_cache_that_is_not_written_needs_no_writable_folder(tmp_path):
    """--no-cache writes no cache: its folder is not checked, and the run goes on."""
    path = _blocked(tmp_path, "cache")
    proc, report = run_suite(tmp_path, "--model", "oracle", "--no-cache", "--limit", "1",
                             "--cache-dir", str(path))
    assert proc.returncode == ToolbenchExit.OK, proc.stdout + proc.stderr
    assert report is not None


@pytest.mark.parametrize(("args", "needle"), [
    (["--sandbox-output-cap", "0"], "--sandbox-output-cap 0: must be at least 1"),
    (["--sandbox-output-cap", "-5"], "--sandbox-output-cap -5: must be at least 1"),
    (["--sandbox-memory-mb", "0"], "--sandbox-memory-mb 0: must be at least 1"),
    (["--base-url", "not-a-url"], "--base-url 'not-a-url': not an http(s) URL"),
    (["--base-url", "ftp://host/v1"], "--base-url 'ftp://host/v1': not an http(s) URL"),
    (["--base-url", "http://localhost:99999/v1"], "--base-url 'http://localhost:99999/v1'"),
    (["--base-url", "http:///v1"], "--base-url 'http:///v1'"),
])
def test_a_bad_option_value_is_one_line_exit_4_before_any_model_call(tmp_path, args, needle):
    with FakeOpenAIServer(wrong) as server:
        proc, report = run_suite(tmp_path, *http(server, "--no-cache"), *args)
        assert server.requests == []
    _one_usage_error(proc, needle)
    assert report is None


def test_a_bad_openai_base_url_variable_is_exit_4_at_configure(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["OPENAI_BASE_URL"] = "not-a-url"
    proc = subprocess.run(suite_cmd(tmp_path, "--model", "m", "--api-key", "t", "--no-cache"),
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    _one_usage_error(proc, "$OPENAI_BASE_URL 'not-a-url'")


def test_gates_summary_prints_the_status_the_run_exits_with(tmp_path):
    """No case ran: the run exits 5 (NO_CASES), and the gate line says 5, not the gates' 10."""
    proc, _ = run_suite(tmp_path, "--model", "oracle", "-k", "no_such_case",
                        "--gate", "toolhop.direct.accuracy>=0")
    assert proc.returncode == ToolbenchExit.NO_CASES, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("gates FAILED (exit status 5 NO_CASES)"), last
    assert "exit status 10" not in proc.stdout


def test_junitxml_is_checked_where_pytest_writes_it_after_expanding_variables(tmp_path, monkeypatch):
    """pytest expands ``$VAR`` in ``--junitxml`` (LogXML); the check reads the same path, so an
    unwritable one is exit 4 at configure, not a failed write after every model call."""
    blocked = _blocked(tmp_path, "out")
    monkeypatch.setenv("TB_JUNIT_DIR", str(blocked))
    with FakeOpenAIServer(wrong) as server:
        proc, report = run_suite(tmp_path, *http(server), "--junitxml", "$TB_JUNIT_DIR/junit.xml")
        assert server.requests == []
    _one_usage_error(proc, "--junitxml", f"{blocked}/junit.xml")
    assert report is None


# --------------------------------------------------------------------------- the checks alone
def test_check_folder_accepts_a_folder_to_be_created_and_leaves_no_probe(tmp_path):
    check_folder(tmp_path / "a" / "b", "--runs-dir")
    assert not (tmp_path / "a").exists() and list(tmp_path.iterdir()) == []


def test_check_file_rejects_a_folder_and_a_path_under_a_file(tmp_path):
    with pytest.raises(ValueError, match="is a folder, not a file"):
        check_file(tmp_path, "--toolbench-json")
    with pytest.raises(ValueError, match="file.txt is not a folder"):
        check_file(_blocked(tmp_path, "r.json"), "--toolbench-json")


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0,
                    reason="root ignores permission bits")
def test_check_folder_rejects_a_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        # The words every account reads (output_paths.py, c8fd0cc): root fails the write probe,
        # an ordinary user os.access; both say where and why.
        with pytest.raises(ValueError, match=re.escape(f"--runs-dir {ro}/runs: cannot write in {ro}: Permission denied") + "$"):
            check_folder(ro / "runs", "--runs-dir")
    finally:
        ro.chmod(0o755)


def test_check_folder_rejects_a_disk_without_space(tmp_path, monkeypatch):
    import shutil

    from pytest_toolbench import output_paths

    monkeypatch.setattr(output_paths.shutil, "disk_usage",
                        lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 4096, 4096))
    with pytest.raises(ValueError, match=r"--runs-dir .*: only 4 KiB free in .*MiB needed"):
        check_folder(tmp_path / "runs", "--runs-dir")
    assert list(tmp_path.iterdir()) == []  # the probe is gone


def test_outputs_of_other_plugins_are_resolved_as_their_writers_do(tmp_path, monkeypatch):
    """allure-pytest writes ``--alluredir=~/x`` (no shell expands it) to ``./~/x``; pytest's
    JUnit writer expands ``~`` and ``$VAR``; our own options take ``~``."""
    from pytest_toolbench.output_paths import as_written

    home, base = tmp_path / "home", tmp_path / "cwd"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TB_OUT", str(tmp_path / "out"))
    assert as_written("--alluredir", "~/x", base) == base / "~" / "x"
    assert as_written("--alluredir", "$TB_OUT/x", base) == base / "$TB_OUT" / "x"
    assert as_written("--alluredir", str(tmp_path / "abs"), base) == tmp_path / "abs"
    assert as_written("--junitxml", "~/j.xml", base) == home / "j.xml"
    assert as_written("--junitxml", "$TB_OUT/j.xml", base) == tmp_path / "out" / "j.xml"
    assert as_written("--allure-html", "~/h", base) == home / "h"


def test_alluredir_is_checked_where_allure_pytest_writes_it(tmp_path):
    """``--alluredir=~/x`` from the folder pytest was started in: a ``$HOME/x`` that cannot be
    made does not stop the run (allure-pytest never writes there); a ``./~`` that is a file does,
    exit 4 naming ``./~/x``, where allure-pytest's own configure would crash on it."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}, "HOME": str(home)}

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pytest", str(REPO / "suites" / "toolhop"), "-q", "-p", "no:randomly",
             "-p", "no:cacheprovider", "--model", "oracle", "--data", "sample",
             "--runs-dir", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"),
             "-k", "toolhop-9001-direct", "--alluredir=~/x"],
            cwd=cwd, capture_output=True, text=True, timeout=300, env=env)

    (home / "x").write_text("a file where $HOME/x would be a folder")
    proc = run()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert list((cwd / "~" / "x").glob("*-result.json")), "allure-pytest wrote elsewhere"

    shutil.rmtree(cwd / "~")
    (cwd / "~").write_text("a file where ./~ would be a folder")
    (home / "x").unlink()
    _one_usage_error(run(), f"--alluredir {cwd}/~/x: ")
