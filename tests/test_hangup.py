"""A run whose terminal hangs up (an SSH session dropped, a terminal window closed): SIGHUP.

It ends as a SIGTERM does (reports written, marked partial, exit status 2), though its terminal
now fails every write. The end-to-end tests run ``pytest suites/toolhop`` on a pseudo-terminal
against a slow local endpoint and close the terminal after the third request: the run leads its
session, so the kernel sends it SIGHUP; most also send SIGHUP to the run's process group, as a
login shell passes a hang-up on to its jobs.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, delayed, reply
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.results import case_store
from pytest_toolbench.results.journal import read_journal
from pytest_toolbench.session.signals import Interrupts, detach_hung_up_terminal
from shared_data import BUNDLED_TOOLHOP

REPO = Path(__file__).resolve().parents[1]
SELECTED = 3 * len(json.loads(BUNDLED_TOOLHOP.read_text()))


# --------------------------------------------------------------------------- the handler
@pytest.fixture
def sighup_restored():
    previous = signal.getsignal(signal.SIGHUP)
    yield
    signal.signal(signal.SIGHUP, previous)


class _Config:
    def __init__(self) -> None:
        self.stash: dict = {}


def test_a_run_started_under_nohup_keeps_ignoring_a_hang_up(sighup_restored):
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    interrupts = Interrupts(_Config())  # type: ignore[arg-type]
    interrupts.install()
    try:
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == interrupts.handle
    finally:
        interrupts.restore()


def test_a_hang_up_ends_the_run_as_sigterm_does(sighup_restored):
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    interrupts = Interrupts(_Config())  # type: ignore[arg-type]
    interrupts.install()
    try:
        assert signal.getsignal(signal.SIGHUP) == interrupts.handle
        with pytest.raises(KeyboardInterrupt, match="SIGHUP"):
            interrupts.handle(signal.SIGHUP, None)
    finally:
        interrupts.restore()
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL


def test_every_descriptor_on_a_hung_up_terminal_writes_to_dev_null_and_a_live_one_is_kept():
    hung_master, hung = os.openpty()
    live_master, live = os.openpty()
    copy = os.dup(hung)  # as pytest's capture keeps a copy of stdout to restore it
    try:
        terminals = frozenset(os.fstat(fd).st_rdev for fd in (hung, live))
        os.close(hung_master)  # the terminal hangs up
        with pytest.raises(OSError):
            os.write(hung, b"x")
        detach_hung_up_terminal(terminals)
        assert os.write(hung, b"lost\n") == 5 and os.write(copy, b"lost\n") == 5
        assert os.path.samestat(os.fstat(hung), os.stat(os.devnull))
        assert not os.get_inheritable(copy)  # os.dup's copy stays uninheritable
        assert os.isatty(live) and os.write(live, b"seen\n") == 5
        assert os.read(live_master, 100).startswith(b"seen")
    finally:
        for fd in (hung, copy, live, live_master):
            os.close(fd)


# --------------------------------------------------------------------------- end to end
def _hung_up_mid_run(tmp_path: Path, workers: str, shell: bool) -> tuple[int, str, int]:
    """Run on a pseudo-terminal; after the third request hang it up (the run, leading its
    session, gets SIGHUP from the kernel), and with ``shell`` SIGHUP the run's group as a login
    shell passes a hang-up on to its jobs. Return the exit status, what the terminal showed
    before, and the run's session id."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PYTEST_XDIST_"))}
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly",
           "-p", "no:cacheprovider", "--runs-dir", str(tmp_path / "runs"),
           "--toolbench-json", str(tmp_path / "report.json"),
           "--junitxml", str(tmp_path / "junit.xml"), "--model", "m", "--api-key", "t",
           "--no-cache", "--concurrency", "1", "-n", workers,
           "--gate", "toolhop.direct.accuracy>=0"]
    with FakeOpenAIServer(delayed(0.5, reply("<answer>x</answer>"))) as server:
        pid, master = pty.fork()
        if pid == 0:  # the run: a session of its own, with the terminal as its controlling one
            try:
                # as a login shell starts its jobs; this test itself may run under nohup, whose
                # ignored SIGHUP the run would inherit (and rightly keep: it would not end)
                signal.signal(signal.SIGHUP, signal.SIG_DFL)
                os.chdir(REPO)
                os.execve(sys.executable, [*cmd, "--base-url", server.base_url], env)
            finally:
                os._exit(127)
        shown = b""
        deadline = time.monotonic() + 120
        try:
            # the third request, and a result the run journalled (a run stopped before its
            # first result has no metrics, so no JSON report: on a loaded machine that came first)
            while len(server.requests) < 3 or not _journalled(tmp_path / "runs"):
                assert time.monotonic() < deadline, f"no result within 120 s: {shown!r}"
                if select.select([master], [], [], 0.05)[0]:
                    shown += os.read(master, 65536)
            running = _processes_of_session(pid)
        finally:
            os.close(master)  # the hang-up
            if shell:
                os.killpg(pid, signal.SIGHUP)
        # the pytest process, the SDK process and the workers: what must be gone at the end
        assert len(running) >= 2 + int(workers), running
        deadline = time.monotonic() + 120
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.killpg(pid, signal.SIGKILL)
                pytest.fail("the run did not end within 120 s of its hang-up")
            time.sleep(0.05)
    return os.waitstatus_to_exitcode(done[1]), shown.decode(errors="replace"), pid


@pytest.mark.parametrize(("workers", "shell"), [("0", True), ("2", True), ("2", False)],
                         ids=["-n 0", "-n 2", "-n 2, no shell"])
def test_a_run_whose_terminal_hangs_up_writes_every_report_marked_partial(tmp_path, workers,
                                                                           shell):
    status, shown, session = _hung_up_mid_run(tmp_path, workers, shell)
    # (before: killed by the signal, -1, with no report, no JUnit file, results only in the journal)
    assert status == ToolbenchExit.INTERRUPTED, shown[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["partial"] and report["run"]["interrupted_by"] == "SIGHUP"
    assert report["run"]["exit_status"] == ToolbenchExit.INTERRUPTED
    missing = report["missing_cases"]
    assert report["cases"] and missing and len(report["cases"]) + len(missing) == SELECTED
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("errors", "0")) == len(missing)
    messages = {e.get("message") for e in suite.iter("error")}
    assert messages == {"not run: the run was interrupted (SIGHUP)"}
    (folder,) = (tmp_path / "runs").iterdir()
    assert (folder / "report.json").exists()
    # the workers stopped with the run: none journalled a result the report names as missing
    journalled = {r.case_id for path in case_store.worker_journal_paths(folder)
                  for r in read_journal(path)}
    assert journalled <= {c["case_id"] for c in report["cases"]}
    # nothing of the run is left in its session: no worker, no SDK process (it ignores the
    # hang-up and follows its parent)
    time.sleep(0.5)
    assert _processes_of_session(session) == []


def _journalled(runs: Path) -> bool:
    return any(path.stat().st_size for path in runs.glob("*/results.jsonl"))


def _processes_of_session(sid: int) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getsid(int(proc.name)) == sid:
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:  # gone meanwhile
            continue
    return found
