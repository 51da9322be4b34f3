"""Sandbox folders outlive no harness: a SIGKILLed pytest leaves no ``toolbench-sandbox-*``.

Zygotes run in their own session, so they outlive a killed harness: one whose pool went away
(EOF on its request pipe, EPIPE on its reply pipe) removes its whole folder and exits, even in
the middle of a call. What both a harness and its zygotes leave (all SIGKILLed) is removed by the
next pool that starts, by its lock: a folder whose lock nobody holds. A live pool's folder, of
this process or of another run on the same machine, holds its lock and is never touched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import ToolSandbox, cgroup
from pytest_toolbench.sandbox.pool import _PACKAGE_ROOT
from sandbox_env import process_alive as alive
from sandbox_env import wait_until

RUN = "pytest_toolbench.sandbox.jobs:run_source"
LOCK = ".owner.lock"

# A harness with two zygotes: one in the middle of a call that spins for two minutes, one idle.
HARNESS = """
import json, sys, threading, time
from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import ToolSandbox
RUN = "pytest_toolbench.sandbox.jobs:run_source"
sb = ToolSandbox(SandboxLimits(workers=2))
sb.describe()
busy = threading.Thread(target=sb.run, daemon=True,
                        args=(RUN, {"source": "def f():\\n    while True:\\n        pass", "entry": "f"}, 120.0))
busy.start()
# Not a fixed sleep: on a loaded runner the busy thread may not have its slot yet, and the next
# call would take the started zygote, leaving the busy call to start a zygote nobody lists.
deadline = time.monotonic() + 60
while sb._slots.qsize() > 1:  # the busy call holds the started zygote's slot
    assert time.monotonic() < deadline, "the busy call never took its slot"
    time.sleep(0.01)
time.sleep(0.5)  # and has handed its call over
assert sb.run(RUN, {"source": "def f():\\n    return 1", "entry": "f"}, 10.0).value["value"] == 1
assert len(sb.worker_pids()) == 2 == len(sb._live), sb.worker_pids()  # both listed, both started
print(json.dumps({"folders": sorted(w.tmpdir for w in sb._live), "zygotes": sb.worker_pids(),
                  "cgroups": [w.info["memory_cap"].get("path") for w in sb._live]}), flush=True)
time.sleep(600)
"""


def start_harness(base: Path, workers_line_timeout: float = 60.0) -> tuple[subprocess.Popen, dict]:
    env = {**os.environ, "TMPDIR": str(base)}
    proc = subprocess.Popen([sys.executable, "-c", HARNESS], cwd=_PACKAGE_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line:
        proc.kill()
        proc.wait()
        raise AssertionError("the harness did not start its pool")
    return proc, json.loads(line)


def kill_all(proc: subprocess.Popen, zygotes: list[int]) -> None:
    """Test hygiene: nothing of a harness outlives its test, whatever the code under test did."""
    for pid in zygotes:
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)  # its group: bwrap leads it, when in front
        except (ProcessLookupError, PermissionError):
            pass
    proc.kill()
    proc.wait()
    # A memory cgroup the pool made for a zygote under bwrap, which the zygote cannot reach:
    # with the harness gone, only a later pool's sweep removes it; this one, once they are gone.
    wait_until(lambda: not any(alive(pid) for pid in zygotes), 5.0)
    cgroup.sweep()


@pytest.fixture
def base(tmp_path: Path) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


def test_a_sigkilled_harness_leaves_no_sandbox_folder(base: Path) -> None:
    proc, got = start_harness(base)
    try:
        folders, zygotes = got["folders"], got["zygotes"]
        assert len(folders) == 2 and all(os.path.isdir(f) for f in folders)
        proc.send_signal(signal.SIGKILL)  # one zygote mid-call, the other idle
        proc.wait()
        assert wait_until(lambda: not any(os.path.exists(f) for f in folders), 5.0), \
            sorted(str(p) for p in base.rglob("*"))
        assert wait_until(lambda: not any(alive(pid) for pid in zygotes), 5.0)
        assert list(base.iterdir()) == []
        # Their memory cgroups (where the machine gives one): a zygote removes its own as it
        # exits; one the pool made under bwrap, which the zygote cannot reach, the next pool's
        # start sweeps (its owner, named in it, is gone).
        cgroups = [c for c in got["cgroups"] if c]
        with ToolSandbox(SandboxLimits(workers=1)) as later:
            later.describe()
            assert not [c for c in cgroups if os.path.exists(c)]
    finally:
        kill_all(proc, got["zygotes"])


def test_a_new_pool_sweeps_only_folders_nobody_owns(base: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # Another run on this machine, alive: its folders are held by its pool and zygotes.
    live_proc, live = start_harness(base)
    dead_proc, dead = start_harness(base)
    try:
        # A run killed with its zygotes (the OOM killer, a kill of everything): nobody cleans up.
        # Stopped first: a harness still running when its zygote dies sees the EOF and removes
        # that zygote's folder itself (what it should do), which is not the case under test.
        dead_proc.send_signal(signal.SIGSTOP)
        for pid in dead["zygotes"]:
            os.killpg(os.getpgid(pid), signal.SIGKILL)  # bwrap leads the group, when in front
        dead_proc.kill()
        dead_proc.wait()
        assert wait_until(lambda: not any(alive(pid) for pid in dead["zygotes"]), 5.0)
        time.sleep(0.5)
        left = sorted(str(p) for p in base.iterdir())
        assert all(os.path.isdir(f) for f in dead["folders"]), left  # left behind
        locked_out = Path(dead["folders"][0]) / "deep"
        locked_out.mkdir()
        (locked_out / "f").write_text("x")
        os.chmod(locked_out, 0)  # a stale folder's content need not be removable as it is
        # Folders of a version before the lock: one untouched for two days, one fresh.
        old, young = base / "toolbench-sandbox-old", base / "toolbench-sandbox-young"
        for folder in (old, young):
            folder.mkdir()
            (folder / ".worker-stderr").write_text("")
        os.utime(old, (time.time() - 2 * 86400, time.time() - 2 * 86400))
        # Not folders of ours: never followed, never removed.
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "keep").write_text("kept")
        (base / "toolbench-sandbox-link").symlink_to(elsewhere)
        (base / "toolbench-sandbox-file").write_text("not a folder")

        monkeypatch.setattr(tempfile, "tempdir", str(base))
        with ToolSandbox(SandboxLimits(workers=1)) as mine:
            assert mine.run(RUN, {"source": "def f():\n    return 2", "entry": "f"}, 10.0).value["value"] == 2
            own = next(iter(mine._live)).tmpdir
            with ToolSandbox(SandboxLimits(workers=1)) as later:  # its start sweeps
                assert later.run(RUN, {"source": "def f():\n    return 3", "entry": "f"}, 10.0).value["value"] == 3
                assert not any(os.path.exists(f) for f in dead["folders"])
                assert not old.exists() and young.is_dir()
                assert all(os.path.isdir(f) and os.path.isfile(os.path.join(f, LOCK)) for f in live["folders"])
                assert all(alive(pid) for pid in live["zygotes"])
                assert os.path.isdir(own)  # this process's other pool
                assert (elsewhere / "keep").read_text() == "kept"
                assert (base / "toolbench-sandbox-file").exists()
            # Both pools here still work after the sweep.
            assert mine.run(RUN, {"source": "def f():\n    return 4", "entry": "f"}, 10.0).value["value"] == 4
        # The live run, SIGKILLed in its turn, still cleans up after itself.
        live_proc.kill()
        live_proc.wait()
        assert wait_until(lambda: not any(os.path.exists(f) for f in live["folders"]), 5.0)
    finally:
        kill_all(live_proc, live["zygotes"])
        kill_all(dead_proc, dead["zygotes"])


def test_a_tool_cannot_give_up_its_pool_folder_lock(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call's child closes the lock it inherits before any tool code runs, and cannot open the
    lock file: after the hostile tool, a sweep still finds the live folder held."""
    from pytest_toolbench.sandbox.pool import sweep_stale_folders

    src = (Path(__file__).parent / "hostile_tools" / "lock_release.py").read_text(encoding="utf-8")
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    with ToolSandbox(SandboxLimits(workers=1), preload=("pytest_toolbench.benchmarks.toolhop.execution",)) as sb:
        out = sb.run("pytest_toolbench.benchmarks.toolhop.execution:call_tool",
                     {"functions": [src], "name": "lock_release", "arguments": "{}"}, 10.0)
        assert out.status == "ok" and json.loads(out.value["content"]) == {"unlocked": [], "opened": []}, out
        worker = next(iter(sb._live))
        folder = worker.tmpdir
        sb._live.clear()  # as if this pool had gone: only its zygote holds the lock now
        assert sweep_stale_folders() == [] and os.path.isdir(folder)
        assert sb.run(RUN, {"source": "def f():\n    return 5", "entry": "f"}, 10.0).value["value"] == 5
    worker.kill()  # test hygiene: the zygote its pool forgot (and the cgroup made for it under bwrap)
