"""Faults on the sandbox's own side are named as such: a zygote killed or stopped from outside
is an ``unavailable`` outcome (an infrastructure error of the case), never a tool error; two
runs starting together never delete each other's folders; a start failure is one line."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time

import pytest

from pytest_toolbench import owned_folders
from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import SandboxStartError, ToolSandbox, cleanup
from pytest_toolbench.sandbox.pool import FOLDER_PREFIX

SOURCE = "pytest_toolbench.sandbox.jobs:run_source"


def run_later(sb: ToolSandbox, source: str, timeout_s: float) -> dict:
    box: dict = {}

    def target() -> None:
        box["out"] = sb.run(SOURCE, {"source": source, "entry": "f"}, timeout_s)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    box["thread"] = thread
    return box


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP])
def test_zygote_killed_or_stopped_from_outside_is_unavailable_not_a_tool_error(sig):
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        sb.describe()
        (zygote,) = sb.worker_pids()
        box = run_later(sb, "import time\ndef f():\n    time.sleep(3)\n    return 1", timeout_s=2.0)
        time.sleep(0.5)
        os.kill(zygote, sig)
        box["thread"].join(30)
        out = box["out"]
        assert out.status == "unavailable", out
        assert ("died" in out.detail) if sig == signal.SIGKILL else ("stopped or hung" in out.detail)
        # the slot comes back with a fresh zygote: the next call works
        assert sb.run(SOURCE, {"source": "def f():\n    return 7", "entry": "f"}, 10).value["value"] == 7
        assert zygote not in sb.worker_pids()


def test_a_call_cannot_reach_its_zygote_so_tool_errors_stay_tool_errors():
    """What a call does to itself is its own failure (crashed), and the zygote survives it."""
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        sb.describe()
        (zygote,) = sb.worker_pids()
        out = sb.run(SOURCE, {"source": "import os\ndef f():\n    os._exit(3)", "entry": "f"}, 10)
        assert out.status == "crashed"
        assert sb.worker_pids() == [zygote]


def test_lock_and_sweep_never_race():
    """Folders made while another thread sweeps in a loop: a sweep never removes a folder whose
    owner holds it (the lock is taken before the folder carries the swept name)."""
    base = tempfile.mkdtemp(prefix="sweep-race-")
    prefix = "toolbench-sandbox-"
    stop = threading.Event()
    removed: list[str] = []

    def sweeper() -> None:
        while not stop.is_set():
            removed.extend(owned_folders.sweep_stale(base, prefix, cleanup.remove_tree))

    thread = threading.Thread(target=sweeper, daemon=True)
    thread.start()
    try:
        held = []
        for _ in range(400):
            path, fd = owned_folders.make_locked_folder(base, prefix)
            held.append((path, fd))
            assert os.path.isdir(path) and os.path.exists(os.path.join(path, owned_folders.LOCK_NAME))
        stop.set()
        thread.join(10)
        assert removed == []
        for path, fd in held:
            assert os.path.isdir(path)
            os.close(fd)
        assert len(owned_folders.sweep_stale(base, prefix, cleanup.remove_tree)) == 400  # released: now they are stale
    finally:
        stop.set()
        cleanup.remove_tree(base)


def test_folder_staging_left_by_a_killed_harness_is_swept_when_old():
    base = tempfile.mkdtemp(prefix="sweep-staging-")
    try:
        staging = os.path.join(base, f".{FOLDER_PREFIX}abc")
        os.mkdir(staging)
        assert owned_folders.sweep_stale(base, FOLDER_PREFIX) == []  # fresh: may be mid-creation
        old = time.time() - owned_folders.STAGING_STALE_S - 10
        os.utime(staging, (old, old))
        assert owned_folders.sweep_stale(base, FOLDER_PREFIX) == [staging]
    finally:
        cleanup.remove_tree(base)


def test_start_failure_is_one_line():
    """A zygote that cannot start: one line naming why, no traceback in the message."""
    with ToolSandbox(SandboxLimits(workers=1), preload=("pytest_toolbench.no_such_module",)) as sb:
        with pytest.raises(SandboxStartError) as info:
            sb.describe()
    text = str(info.value)
    assert "\n" not in text and "Traceback" not in text
    assert "sandbox worker failed to start" in text and "no_such_module" in text


REPO = __import__("pathlib").Path(__file__).resolve().parents[1]


def test_runs_started_together_never_break_each_other(tmp_path):
    """Pairs of real ToolHop runs (tool calls in the sandbox) started at the same moment: each
    one's start-up sweep must leave the other's live folder alone, every time."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    for round_ in range(4):
        procs = []
        for side in ("a", "b"):
            out = tmp_path / f"{round_}{side}"
            cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:cacheprovider",
                   "--model", "oracle", "--scenario", "mandatory", "--no-cache",
                   "--runs-dir", str(out / "runs"), "--toolbench-json", str(out / "report.json")]
            procs.append((out, subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                                stderr=subprocess.STDOUT, text=True)))
        for out, proc in procs:
            text, _ = proc.communicate(timeout=300)
            assert proc.returncode == 0, text[-3000:]
            report = json.loads((out / "report.json").read_text())
            assert report["run"]["sandbox"]["kernel_isolation"] is True
            assert len(report["cases"]) == 6 and not any(c.get("outcome") == "error" for c in report["cases"]), text[-2000:]
