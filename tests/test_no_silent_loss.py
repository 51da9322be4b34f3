"""No silent loss: every selected case ends in the report (scored, wrong, an infrastructure error
with its cause, or named missing), and an output the run cannot write stops it.

The end-to-end tests run ``pytest suites/toolhop --model oracle`` in a subprocess, with a small
test plugin loaded through ``PYTEST_PLUGINS`` (so xdist workers load it too) that kills a worker
mid-case, drops a result in transport, or fills the run folder's disk mid-run.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.models.base import CallContext, ChatRequest, ChatResponse
from pytest_toolbench.models.cache import CachedModel
from pytest_toolbench.results import journal as journal_module
from pytest_toolbench import output_errors
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.partial_run import (
    maxfail_stop,
    missing_note,
    missing_text,
    not_run_message,
)
from pytest_toolbench.results.journal import JournalWriteError, ResultJournal, read_journal
from plugin_env import plugin_env
from shared_data import BUNDLED_TOOLHOP

REPO = Path(__file__).resolve().parents[1]
RECORDS = json.loads(BUNDLED_TOOLHOP.read_text())
N = len(RECORDS)


def result(i: int) -> CaseResult:
    return CaseResult(case_id=f"c{i}", benchmark="toolhop", scenario="direct", outcome=Outcome.PASSED,
                      failure_message="x" * 300)


# --------------------------------------------------------------------------- journal: short writes
def _short_then_enospc(real_write, fail_from: int):
    """``os.write`` that, from call ``fail_from`` on, writes half its buffer and then fails with
    ENOSPC: a disk filling in the middle of a line."""
    calls = {"n": 0}

    def write(fd, data):
        calls["n"] += 1
        if calls["n"] < fail_from:
            return real_write(fd, data)
        if calls["n"] == fail_from:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return write


def test_a_short_write_on_a_full_disk_is_rolled_back_and_names_the_journal(tmp_path, monkeypatch):
    path = tmp_path / "results.jsonl"
    journal = ResultJournal(path)
    journal.append(result(0))
    size = path.stat().st_size
    monkeypatch.setattr(journal_module.os, "write", _short_then_enospc(os.write, 1))
    with pytest.raises(JournalWriteError) as info:
        journal.append(result(1))
    monkeypatch.undo()
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(path)
    assert path.stat().st_size == size  # the half line is gone: no torn record left behind
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a truncated-tail warning would fail here
        assert [r.case_id for r in read_journal(path)] == ["c0"]
    journal.append(result(2))  # once space is back, the next record starts on its own line
    journal.close()
    assert [r.case_id for r in read_journal(path)] == ["c0", "c2"]


def test_when_the_rollback_fails_too_the_next_append_cuts_the_torn_tail(tmp_path, monkeypatch):
    path = tmp_path / "results.jsonl"
    journal = ResultJournal(path)
    journal.append(result(0))
    monkeypatch.setattr(journal_module.os, "write", _short_then_enospc(os.write, 1))

    def no_truncate(fd, size):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(journal_module.os, "ftruncate", no_truncate)
    with pytest.raises(JournalWriteError):
        journal.append(result(1))
    monkeypatch.undo()
    assert not path.read_bytes().endswith(b"\n")  # torn, as the reader must then expect
    with pytest.warns(UserWarning, match="truncated last journal line"):
        assert [r.case_id for r in read_journal(path)] == ["c0"]
    journal.append(result(2))
    journal.close()
    assert [r.case_id for r in read_journal(path)] == ["c0", "c2"]


# --------------------------------------------------------------------------- response cache
class _Answer:
    name = "m"

    async def complete(self, request, ctx):
        return ChatResponse(message={"role": "assistant", "content": "hi"})

    def describe(self):
        return {"base_url": "http://x"}

    async def aclose(self):
        pass


def test_a_cache_write_error_is_recorded_for_the_controller_and_the_answer_kept(tmp_path, monkeypatch):
    import asyncio

    output_errors.take()
    model = CachedModel(_Answer(), tmp_path / "cache")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(model.store, "save", full)
    request = ChatRequest(messages=[{"role": "user", "content": "q"}])
    response = asyncio.run(model.complete(request, CallContext(case_id="toolhop-1-direct", turn=0)))
    assert response.message["content"] == "hi"
    (failure,) = output_errors.take()
    assert failure.what == "response cache entry"
    assert failure.path == str(model.store.pack_path)
    assert "ENOSPC" in failure.error and "No space left on device" in failure.error
    assert failure.message().startswith("pytest-toolbench: cannot write the response cache entry ")


def test_missing_text_names_at_most_ten_then_and_k_more():
    ids = [f"toolhop-{i}-direct" for i in range(13)]
    text = missing_text(ids, 40)
    assert text.startswith("13 of 40 selected cases have no result: toolhop-0-direct, ")
    assert text.endswith("toolhop-9-direct and 3 more") and "toolhop-10-direct" not in text
    assert missing_text(ids[:1], 40) == "1 of 40 selected cases has no result: toolhop-0-direct"



def test_a_maxfail_stop_is_named_from_pytest_s_words_and_only_from_them():
    """pytest's and xdist's "stopping after N failures" become the option that stopped the run
    (no count: under xdist another worker's failure can follow xdist's); any other stop (a
    keyboard interrupt xdist relays, stepwise's text) is not taken for -x."""
    assert maxfail_stop("stopping after 1 failures", 1) == "-x/--maxfail=1 stopped the run"
    assert maxfail_stop("stopping after 4 failures", 3) == "--maxfail=3 stopped the run"
    assert maxfail_stop("gw0 received keyboard-interrupt", 1) is None
    assert maxfail_stop("Test failed, continuing from this test next run.", 1) is None
    assert maxfail_stop("not stopping after 1 failures", 1) is None
    note = missing_note(["a"], 2, pytest_stop="-x/--maxfail=1 stopped the run")
    assert "(not run: -x/--maxfail=1 stopped the run)" in note and "worker lost" not in note
    assert "worker lost" in missing_note(["a"], 2)
    assert not_run_message(None, "--maxfail=3 stopped the run") == (
        "not run: --maxfail=3 stopped the run")
    assert not_run_message("SIGTERM", "--maxfail=3 stopped the run") == (
        "not run: the run was interrupted (SIGTERM)")


# --------------------------------------------------------------------------- end to end
def _run(tmp_path: Path, env: dict[str, str], *args: str, runs_dir: Path | None = None):
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly",
           "-p", "no:cacheprovider", "--model", "oracle", "--scenario", "direct",
           "--runs-dir", str(runs_dir or tmp_path / "runs"), "--toolbench-json", str(report), *args]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return proc, json.loads(report.read_text()) if report.exists() else None


def _case_id(record: dict) -> str:
    return f"toolhop-{record['id']}-direct"


#: Plugin code (each plugin below starts with it): ``killed_once(marker)`` SIGKILLs the first
#: xdist worker to call it, as if the OOM killer took it (the marker file says it happened).
KILLED_ONCE = """
    import os, signal
    import pytest

    def killed_once(marker):
        if not os.environ.get("PYTEST_XDIST_WORKER"):
            return
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)
"""

CRASH_PLUGIN = KILLED_ONCE + """
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(item):
        # while the case waited on its model (before the case fixture journalled a result)
        if item.nodeid.endswith("[%s]"):
            killed_once(%r)
"""


def test_a_worker_killed_mid_case_is_an_infrastructure_error_that_fails_the_gates(tmp_path):
    victim = _case_id(RECORDS[1])
    env = plugin_env(tmp_path, CRASH_PLUGIN % (victim, str(tmp_path / "killed-once")))
    proc, report = _run(tmp_path, env, "-n", "2", "--gate", "toolhop.direct.accuracy>=0")
    out = proc.stdout + proc.stderr
    assert (tmp_path / "killed-once").exists(), out[-3000:]
    assert proc.returncode == ToolbenchExit.INFRA_ERRORS, out[-3000:]
    cases = {c["case_id"]: c for c in report["cases"]}
    assert len(cases) == N  # nothing silently dropped
    crashed = cases[victim]
    assert crashed["outcome"] == "error" and crashed["error"]["kind"] == "worker_crashed"
    assert "crashed while running" in crashed["error"]["message"]
    assert report["missing_cases"] == []
    assert "worker_crashed x1" in proc.stdout and "gates PASSED" not in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("gates FAILED (exit status 11 INFRA_ERRORS)")


KILLED_AFTER_JOURNAL = KILLED_ONCE + """
    from pytest_toolbench.results.journal import ResultJournal

    _append, _append_json = ResultJournal.append, ResultJournal.append_json

    def _then_killed(write):
        def append(self, value):
            write(self, value)
            # before allure-pytest writes the case's result file (as a signal can leave it)
            if %r in str(getattr(value, "case_id", value)):
                killed_once(%r)
        return append

    ResultJournal.append = _then_killed(_append)
    ResultJournal.append_json = _then_killed(_append_json)
"""


KILLED_AFTER_REPORT = KILLED_ONCE + """
    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(report):
        # the case's result sent, before allure-pytest writes its result file (after teardown)
        if report.when == "call" and report.nodeid.endswith("[%s]"):
            killed_once(%r)
"""


@pytest.mark.parametrize("when", ["after its report", "after its journal line",
                                  "before its journal line"])
def test_a_case_whose_worker_died_has_its_one_allure_result(tmp_path, when):
    """A case whose worker died after its result reached the controller, or with its result
    journalled (the run counts it as run, from the journal), or before (an infrastructure error
    stands in) had no Allure result: its worker never wrote one, and the controller only wrote
    those of cases never run. The run's end writes it from the case's result, once."""
    victim = _case_id(RECORDS[1])
    plugin = {"after its report": KILLED_AFTER_REPORT, "after its journal line":
              KILLED_AFTER_JOURNAL, "before its journal line": CRASH_PLUGIN}[when]
    journalled = when != "before its journal line"
    env = plugin_env(tmp_path, plugin % (victim, str(tmp_path / "killed-once")))
    alluredir = tmp_path / "allure"
    proc, report = _run(tmp_path, env, "-n", "2", "--alluredir", str(alluredir))
    out = proc.stdout + proc.stderr
    assert (tmp_path / "killed-once").exists(), out[-3000:]
    assert report is not None and report["missing_cases"] == [], out[-3000:]
    outcome = {c["case_id"]: c["outcome"] for c in report["cases"]}[victim]
    assert outcome == ("passed" if journalled else "error")
    results: dict[str, list[dict]] = {}
    for path in alluredir.glob("*-result.json"):
        doc = json.loads(path.read_text())
        case = next(p["value"].strip("'") for p in doc["parameters"] if p["name"] == "case")
        results.setdefault(case, []).append(doc)
    assert sorted(results) == sorted(_case_id(r) for r in RECORDS), out[-3000:]
    assert all(len(found) == 1 for found in results.values())
    (written,) = results[victim]
    assert written["status"] == ("passed" if journalled else "failed")
    run = {x["value"] for found in results.values() for x in found[0]["labels"]
           if x["name"] == "toolbench_run"}
    assert run == {report["run"]["run_id"]}


def test_a_lost_worker_leaves_its_remaining_cases_named_missing_and_the_run_incomplete(tmp_path):
    victim = _case_id(RECORDS[1])
    env = plugin_env(tmp_path, CRASH_PLUGIN % (victim, str(tmp_path / "killed-once")))
    proc, report = _run(tmp_path, env, "-n", "1", "--max-worker-restart", "0",
                        "--gate", "toolhop.direct.accuracy>=0")
    out = proc.stdout + proc.stderr
    assert proc.returncode == ToolbenchExit.INCOMPLETE, out[-3000:]
    never_ran = [_case_id(r) for r in RECORDS[2:]]
    assert report["partial"] is True and report["missing_cases"] == never_ran
    outcomes = {c["case_id"]: c["outcome"] for c in report["cases"]}
    assert outcomes == {_case_id(RECORDS[0]): "passed", victim: "error"}
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith(f"gates FAILED (exit status 12 INCOMPLETE): {len(never_ran)} of {N} "
                           f"selected cases have no result: {never_ran[0]}"), last


def test_the_tracker_maps_xdist_node_ids_to_cases_and_names_what_never_reported():
    from types import SimpleNamespace

    from pytest_toolbench.benchmarks.base import Case
    from pytest_toolbench.session.case_tracker import CaseTracker, cases_by_id, param_id

    cases = {"toolhop": [Case(id=f"toolhop-{i}-direct", benchmark="toolhop", scenario="direct",
                              sample_id=str(i)) for i in range(3)]}
    by_id = cases_by_id(cases, repeats=2)
    assert sorted(by_id) == sorted(f"toolhop-{i}-direct-r{r}" for i in range(3) for r in (1, 2))
    assert param_id("suites/t.py::test_x[toolhop-1-direct-r2]") == "toolhop-1-direct-r2"
    assert param_id("tests/t.py::test_plain") is None
    tracker = CaseTracker()
    ids = [f"suites/t.py::test_x[{i}]" for i in by_id] + ["suites/t.py::test_plain"]
    tracker.expect_node_ids(ids, by_id)
    tracker.expect_node_ids(ids, by_id)  # a second worker collects the same nodes
    results = {i: CaseResult(case_id=i, benchmark="toolhop", scenario="direct", outcome=Outcome.PASSED)
               for i in list(by_id)[1:]}
    assert tracker.missing(results) == [list(by_id)[0], "suites/t.py::test_plain"]
    tracker.saw_report(SimpleNamespace(nodeid="suites/t.py::test_plain", when="teardown",
                                       failed=False), with_result=False)
    assert tracker.missing(results) == [list(by_id)[0]]


DROP_PLUGIN = """
    import pytest

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(item, call):
        # the result of one case is lost on its way to the controller
        report = yield
        if item.nodeid.endswith("[%s]"):
            report.user_properties = [p for p in report.user_properties
                                      if p[0] != "toolbench_result"]
        return report
"""


@pytest.mark.parametrize("gated", [True, False])
def test_a_result_lost_in_transport_makes_the_run_incomplete_and_names_the_case(tmp_path, gated):
    victim = _case_id(RECORDS[2])
    env = plugin_env(tmp_path, DROP_PLUGIN % victim)
    gates = ["--gate", "toolhop.direct.accuracy>=0"] if gated else []
    proc, report = _run(tmp_path, env, "-n", "0", *gates)
    out = proc.stdout + proc.stderr
    assert proc.returncode == ToolbenchExit.INCOMPLETE, out[-3000:]
    assert report["partial"] is True and report["missing_cases"] == [victim]
    assert report["run"]["exit_status"] == ToolbenchExit.INCOMPLETE
    assert len(report["cases"]) == N - 1
    assert f"1 of {N} selected cases has no result: {victim}" in " ".join(proc.stdout.split())
    assert "gates PASSED" not in proc.stdout
    if gated:
        last = proc.stdout.strip().splitlines()[-1]
        assert last.startswith("gates FAILED (exit status 12 INCOMPLETE)"), last
        assert any(g["kind"] == "completeness" and not g["passed"] for g in report["gates"])
    (folder,) = (tmp_path / "runs").iterdir()
    assert json.loads((folder / "run.json").read_text())["status"] == "incomplete"


FILL_PLUGIN = """
    import os

    seen = 0

    def pytest_runtest_logreport(report):
        # after the third case's result is journalled, the run folder's disk fills up
        global seen
        if report.when != "call":
            return
        seen += 1
        if seen == 3:
            with open(os.path.join(%r, "filler"), "wb") as fh:
                try:
                    while True:
                        fh.write(b"\\0" * 65536)
                        fh.flush()
                except OSError:
                    pass
"""


@pytest.fixture
def small_disk(tmp_path):
    """A 17 MiB tmpfs (the output checks want 16 MiB free at start), unmounted afterwards."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=17m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_disk_that_fills_mid_run_stops_it_with_one_line_and_leaves_no_torn_journal(tmp_path, small_disk):
    env = plugin_env(tmp_path, FILL_PLUGIN % str(small_disk))
    runs = small_disk / "runs"
    # tmpfs allocates whole pages, so the journal's last page keeps up to 4 KiB of room after the
    # fill: six direct results (~1 KB each) may all fit there and nothing fail. The mandatory
    # cases after them (3-4 KB each) cannot: an append meets ENOSPC before the last case.
    proc, report = _run(tmp_path, env, "-n", "0", "--no-cache", "--scenario", "mandatory",
                        "--gate", "toolhop.direct.accuracy>=0", runs_dir=runs)
    out = proc.stdout + proc.stderr
    assert proc.returncode == ToolbenchExit.OUTPUT_ERROR, out[-3000:]
    (folder,) = runs.iterdir()
    journal = folder / "results.jsonl"
    # one line says it all: which file, what error, that the run stopped and its exit status
    line = next(ln for ln in out.splitlines() if "Exit: pytest-toolbench: cannot write" in ln)
    assert f"cannot write the results journal {journal}: [Errno 28]" in line and "(ENOSPC)" in line
    assert "the run stopped (exit status 13 OUTPUT_ERROR)" in line
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert "gates PASSED" not in out
    assert proc.stdout.strip().splitlines()[-1].startswith("gates FAILED (exit status 13 OUTPUT_ERROR)")
    # The JSON (on another disk) says what happened; the cases that never ran are named.
    assert report["partial"] is True and report["run"]["exit_status"] == ToolbenchExit.OUTPUT_ERROR
    assert any(str(journal) in e and "ENOSPC" in e for e in report["run"]["output_errors"])
    assert len(report["cases"]) + len(report["missing_cases"]) == 2 * N and report["missing_cases"]
    # Whole, transcripts included: those the controller held were read back from the journal.
    assert all(c["transcript"] for c in report["cases"])
    # The journal ends on a whole line, holds only results the report has, and takes new ones
    # once space is back (what a later run reading it relies on).
    raw = journal.read_bytes()
    assert raw.endswith(b"\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kept = read_journal(journal)
    assert 3 <= len(kept) < 2 * N and {r.case_id for r in kept} <= {c["case_id"] for c in report["cases"]}
    (small_disk / "filler").unlink()
    with ResultJournal(journal) as again:
        again.append(result(99))
    assert [r.case_id for r in read_journal(journal)] == [r.case_id for r in kept] + ["c99"]


def test_a_response_cache_that_fills_mid_run_stops_it_naming_the_entry(tmp_path, small_disk):
    from fake_openai_server import FakeOpenAIServer, completion

    def fill_on_third(body: dict, index: int):
        if index == 2:  # the third request: the cache's disk is full from now on
            with open(small_disk / "filler", "wb") as fh:
                try:
                    while True:
                        fh.write(b"\0" * 65536)
                        fh.flush()
                except OSError:
                    pass
        # 8 KB a reply: each cache entry needs pages of its own, not room left in the last one's.
        return 200, {}, completion("<answer>x</answer>" + " " * 8192)

    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    with FakeOpenAIServer(fill_on_third) as server:
        proc, report = _run(tmp_path, env, "-n", "0", "--base-url", server.base_url,
                            "--api-key", "t", "--model", "m", "--cache-dir", str(small_disk / "cache"),
                            "--concurrency", "1")
    out = proc.stdout + proc.stderr
    assert proc.returncode == ToolbenchExit.OUTPUT_ERROR, out[-3000:]
    line = next(ln for ln in out.splitlines() if "Exit: pytest-toolbench: cannot write" in ln)
    assert f"cannot write the response cache entry {small_disk / 'cache'}/" in line
    assert "[Errno 28] No space left on device (ENOSPC)" in line
    assert "gates PASSED" not in out and "Traceback" not in out
    assert report is not None, out[-3000:]
    assert report["partial"] is True and report["run"]["exit_status"] == ToolbenchExit.OUTPUT_ERROR
    assert len(report["cases"]) < N and report["missing_cases"]
