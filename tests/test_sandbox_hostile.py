"""Hostile tools through the real sandbox (real kernel layers): the corpus in tests/hostile_tools/.

Every tool there that claims no layer must end as a result or a tool error, within the output
cap, with the zygote alive (or replaced), the next innocent call working and nothing left on the
disk; the tests below check each attack's own effect (disk cap, clean-up, no state between
calls, forged replies). The attacks that name the layers stopping them (``LAYERS``) run in
tests/test_sandbox_attacks.py, with and without those layers. Calls run in threads with a
deadline, so a sandbox that strands its caller fails a test instead of hanging the suite.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import SandboxOutcome, ToolSandbox

import sandbox_env
from shared_data import BUNDLED_TOOLHOP

JOB = "pytest_toolbench.benchmarks.toolhop.execution:call_tool"
PRELOAD = ("pytest_toolbench.benchmarks.toolhop.execution",)
HOSTILE = Path(__file__).parent / "hostile_tools"


def _earlier_corpus() -> list[str]:
    """The tools of tests/hostile_tools/ that claim no layer (no ``LAYERS =`` line): run here
    with no arguments. Those that name the layers stopping them, and take arguments (a decoy's
    pid...), run in tests/test_sandbox_attacks.py; run_corpus.py is no tool."""
    out = []
    for path in HOSTILE.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        if "def" in text and text.split("def")[1].split("(")[0].strip() == path.stem \
                and "\nLAYERS = " not in text:
            out.append(path.stem)
    return sorted(out)


CORPUS = _earlier_corpus()
CAP = 1000
LIMITS = dict(workers=1, cpu_seconds=10, output_cap=CAP, disk_mb=32, disk_inodes=2000)
ECHO = "def echo(text):\n    return {'echo': text}\n"
MARKER = "TOOLBENCH-SECRET-31337"  # what the tools in the corpus look for, split in two


def source(name: str) -> str:
    return (HOSTILE / f"{name}.py").read_text(encoding="utf-8")


def call(sb: ToolSandbox, src: str, name: str, arguments: str = "{}", timeout_s: float = 20.0,
         deadline_s: float = 60.0) -> SandboxOutcome:
    """One ToolHop tool call; fails the test if the caller is stranded past ``deadline_s``."""
    box: dict = {}

    def target() -> None:
        try:
            box["out"] = sb.run(JOB, {"functions": [src], "name": name, "arguments": arguments}, timeout_s)
        except BaseException as exc:  # noqa: BLE001 - reported below
            box["exc"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(deadline_s)
    assert not thread.is_alive(), f"sandbox call to {name} still blocked after {deadline_s} s"
    if "exc" in box:
        raise AssertionError(f"the harness raised on {name}: {box['exc']!r}") from box["exc"]
    return box["out"]


def innocent(sb: ToolSandbox, text: str = "hello") -> None:
    out = call(sb, ECHO, "echo", f'{{"text": "{text}"}}')
    assert out.status == "ok" and out.value["content"] == f'{{"echo": "{text}"}}', out


def disk_use(path: str) -> int:
    """Bytes allocated under ``path`` as the harness sees it (a tool's tmpfs is not visible)."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def sandbox_dirs(sb: ToolSandbox) -> set[str]:
    """The folders of ``sb``'s own workers. Only these: under xdist another process's sandbox
    (the watchdog test's, mid-flood) shares the temp folder, and its bytes are not ``sb``'s."""
    with sb._lock:
        return {w.tmpdir for w in sb._live}


@pytest.fixture(scope="module")
def sb():
    with ToolSandbox(SandboxLimits(**LIMITS), preload=PRELOAD) as box:
        innocent(box)
        yield box


def assert_tool_outcome(out: SandboxOutcome) -> None:
    """A result or a tool error a model may be shown: the runner's shape, within the cap, and
    no harness traceback."""
    assert out.status in ("ok", "crashed", "timeout"), out
    assert "Traceback" not in out.detail and len(out.detail) <= CAP + 40, out.detail
    if out.status == "ok":
        assert set(out.value) == {"content", "raised", "exception_type"}, out.value
        assert isinstance(out.value["content"], str) and isinstance(out.value["raised"], bool)
        assert len(out.value["content"]) <= CAP + 40


@pytest.mark.parametrize("name", CORPUS)
def test_every_hostile_tool_is_one_contained_call(sb: ToolSandbox, name: str) -> None:
    before = sandbox_dirs(sb)
    out = call(sb, source(name), name)
    assert_tool_outcome(out)
    innocent(sb)
    innocent(sb, "again")  # a slot taken for good would hang here
    after = sandbox_dirs(sb)
    for path in after & before:
        assert disk_use(path) < 1024 * 1024, f"{name} left {disk_use(path)} bytes in {path}"
    for path in before - after:  # a worker replaced after the tool took its folder with it
        assert not os.path.exists(path), f"{name}: the replaced worker's {path} is still there"


# ------------------------------------------------------------------------ slot and clean-up


def test_deep_trees_never_take_a_slot_or_leave_disk_behind() -> None:
    """As many deep-tree tools as workers, then innocent calls: each gets a working slot.
    (Where no tmpfs can be had, the watchdog kills such a tree at 256 levels: that variant is
    test_without_a_tmpfs_the_watchdog_caps_disk_and_cleans_up.)"""
    sandbox_env.require("tmpfs")
    with ToolSandbox(SandboxLimits(**{**LIMITS, "workers": 2}), preload=PRELOAD) as box:
        outs: list = []
        threads = [threading.Thread(target=lambda: outs.append(call(box, source("deep_tree"), "deep_tree")))
                   for _ in range(2)]  # at once: one in each slot
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert [o.status for o in outs] == ["ok", "ok"] and outs[0].value["content"] == "1500", outs
        for i in range(4):
            innocent(box, f"after-{i}")
        dirs = {w.tmpdir for w in box._live}
    assert not any(os.path.exists(d) for d in dirs)


def test_close_wakes_callers_waiting_for_a_slot_or_a_reply() -> None:
    """close() (what a SIGTERM/Ctrl-C handler calls) ends every blocked caller within seconds."""
    box = ToolSandbox(SandboxLimits(**LIMITS), preload=PRELOAD)
    innocent(box)
    results: list = []

    def busy() -> None:
        try:
            results.append(box.run(JOB, {"functions": ["def spin():\n    while True:\n        pass\n"],
                                         "name": "spin", "arguments": "{}"}, 120.0))
        except RuntimeError as exc:
            results.append(exc)

    threads = [threading.Thread(target=busy, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    threading.Event().wait(0.5)  # one call running, three waiting for the only slot
    box.close()
    for t in threads:
        t.join(5)
    assert not any(t.is_alive() for t in threads)
    assert len(results) == 4


def test_remove_tree_handles_anything_a_tool_can_build(tmp_path: Path) -> None:
    from pytest_toolbench.sandbox import cleanup

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("kept")
    top = tmp_path / "tree"
    top.mkdir()
    deep = os.open(top, os.O_RDONLY)
    try:
        fd = deep
        for _ in range(3000):  # deeper than PATH_MAX allows as one path, and than the recursion limit
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
            if fd != deep:
                os.close(fd)
            fd = nxt
        os.mkdir(b"\xff\xfe", dir_fd=fd)
        os.chmod(fd, 0)
        os.close(fd)
    finally:
        os.close(deep)
    os.mkdir(top / "many")
    for i in range(2000):
        (top / "many" / str(i)).touch()
    os.mkfifo(top / "fifo")
    (top / "file").write_text("x")
    os.link(top / "file", top / "hard")
    os.link(outside / "keep", top / "hard-outside")
    os.symlink(outside, top / "link-dir")
    os.symlink(outside / "keep", top / "link-file")
    os.symlink("/nonexistent", top / "dangling")
    (top / "locked").mkdir()
    (top / "locked" / "f").write_text("x")
    os.chmod(top / "locked" / "f", 0)
    os.chmod(top / "locked", 0)
    os.chmod(top, 0)
    assert cleanup.remove_tree(str(top)) is None
    assert not top.exists()
    assert (outside / "keep").read_text() == "kept"  # links were removed, never followed
    assert cleanup.remove_tree(str(top)) is None  # already gone: fine


def test_the_disk_watchdog_never_follows_a_directory_swapped_for_a_symlink(tmp_path: Path, monkeypatch) -> None:
    """The watchdog measures a running tool's tree: between finding a mode-000 directory and
    giving it rwx, the tool may swap in a symlink to any file of the harness's uid; the chmod
    must not follow it (the race, played by an os.open that swaps the entry and refuses)."""
    import stat

    from pytest_toolbench.sandbox import cleanup

    top = tmp_path / "tree"
    (top / "d").mkdir(parents=True)
    (top / "d" / "f").write_bytes(b"x" * 10_000)
    target = tmp_path / "id_rsa"
    target.write_text("secret")
    target.chmod(0o600)
    real_open = os.open

    def swapping_open(name, flags, *args, dir_fd=None, **kwargs):
        if name == "d" and dir_fd is not None and not (top / "d").is_symlink():
            (top / "d" / "f").unlink()
            (top / "d").rmdir()
            (top / "d").symlink_to(target)
            raise PermissionError(13, "Permission denied", name)
        return real_open(name, flags, *args, dir_fd=dir_fd, **kwargs)

    monkeypatch.setattr(cleanup.os, "open", swapping_open)
    assert cleanup.usage(str(top), 10**9, 10**6) is None
    monkeypatch.undo()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text() == "secret"
    # a directory the tool made mode 000 is still opened and counted
    (top / "d").unlink()
    (top / "d").mkdir()
    (top / "d" / "f").write_bytes(b"x" * 200_000)
    os.chmod(top / "d", 0)
    assert cleanup.usage(str(top), 100_000, 10**6) == "more than 0 MB of disk"


def test_without_a_tmpfs_the_watchdog_caps_disk_and_cleans_up() -> None:
    """The fallback where no mount namespace is possible: a deep tree is still removed, and a
    call over the disk cap is killed by the zygote."""
    with ToolSandbox(SandboxLimits(**LIMITS), preload=PRELOAD, disable_layers=("tmpfs",)) as box:
        assert box.describe()["isolation"]["disk_cap"]["mechanism"] == "watchdog"
        out = call(box, source("deep_tree"), "deep_tree")  # past the watchdog's nesting limit
        assert out.status == "crashed" and "nested more than" in out.detail, out
        innocent(box)
        tmpdir = next(iter(box._live)).tmpdir
        assert disk_use(tmpdir) < 1024 * 1024
        out = call(box, source("disk_flood"), "disk_flood")
        assert out.status == "crashed" and "disk cap" in out.detail, out
        out = call(box, source("inode_flood"), "inode_flood")
        assert out.status == "crashed" and "disk cap" in out.detail, out
        innocent(box)
        assert disk_use(tmpdir) < 1024 * 1024


# -------------------------------------------------------------------------------- disk cap


def test_disk_cap_is_a_tool_error_inside_the_tool(sb: ToolSandbox) -> None:
    sandbox_env.require("tmpfs")  # the watchdog's own test: test_without_a_tmpfs_...
    assert sb.describe()["isolation"]["disk_cap"]["mechanism"] == "tmpfs"
    out = call(sb, source("disk_flood"), "disk_flood")
    assert out.status == "ok", out
    got = __import__("json").loads(out.value["content"])
    assert got["written_mb"] <= LIMITS["disk_mb"] and "No space left on device" in got["error"], got


def test_inode_cap_is_a_tool_error_inside_the_tool(sb: ToolSandbox) -> None:
    sandbox_env.require("tmpfs")
    out = call(sb, source("inode_flood"), "inode_flood")
    assert out.status == "ok", out
    got = __import__("json").loads(out.value["content"])
    assert got["files"] <= LIMITS["disk_inodes"] and "No space left on device" in got["error"], got


# ------------------------------------------------------------------- no state between calls


def test_a_call_finds_nothing_of_an_earlier_call_in_objects_or_frames(sb: ToolSandbox) -> None:
    out = call(sb, ECHO, "echo", f'{{"text": "{MARKER}"}}')  # in the payload and in the result
    assert MARKER in out.value["content"]
    out = call(sb, source("secret_scan"), "secret_scan")
    assert out.status == "ok" and out.value["content"] == "[]", out


def test_a_call_finds_nothing_of_an_earlier_call_in_the_memory_it_inherits() -> None:
    """With the audit hook off (as if bypassed), ctypes reads the zygote's heap as inherited."""
    with ToolSandbox(SandboxLimits(**LIMITS), preload=PRELOAD, disable_layers=("audit_hook",)) as box:
        innocent(box)
        for _ in range(3):
            out = call(box, ECHO, "echo", f'{{"text": "{MARKER * 4}"}}')
            assert MARKER in out.value["content"]
        out = call(box, source("heap_scan"), "heap_scan", timeout_s=30.0)
        assert out.status == "ok", out
        got = __import__("json").loads(out.value["content"])
        assert got["scanned_mb"] > 0 and got["hits"] == 0, got


# ------------------------------------------------------------------------- forged replies


@pytest.mark.parametrize("name", ["forge_many_strings", "forge_huge", "forge_wrong_shape",
                                  "forge_deep_value", "forge_garbage"])
def test_a_forged_reply_is_a_tool_error_and_the_zygote_survives(sb: ToolSandbox, name: str) -> None:
    zygote = sb.worker_pids()
    out = call(sb, source(name), name)
    assert out.status == "crashed", out
    assert "malformed reply" in out.detail or "exceeds" in out.detail, out.detail
    assert "Traceback" not in out.detail
    assert sb.worker_pids() == zygote  # no restart: the zygote never read the forged bytes
    innocent(sb)


def test_forged_reply_reaches_the_model_as_an_upstream_tool_error(sb: ToolSandbox) -> None:
    """Through the ToolHop runner: the model gets upstream's error message for the call."""
    import asyncio

    from pytest_toolbench.benchmarks.toolhop.runner import ToolHopRunner
    from pytest_toolbench.benchmarks.toolhop.options import ToolHopOptions
    from pytest_toolbench.models.base import Sampling

    runner = ToolHopRunner(sb, ToolHopOptions(), Sampling())
    record = type("R", (), {"functions": [source("forge_wrong_shape")]})()
    call_ = {"id": "c1", "function": {"name": "forge_wrong_shape", "arguments": "{}"}}
    state = type("S", (), {"deviations": [], "calls": [], "masked_feedback": 0})()
    content = asyncio.run(runner._execute(record, call_, 1, 0, state))
    assert content.startswith("an error occured when call forge_wrong_shape: tool execution crashed (")
    assert "malformed reply" in content and len(content) < 400


def test_sigterm_ends_a_run_within_seconds_whatever_its_tools_do(tmp_path: Path) -> None:
    """A real run whose every tool builds a deep tree, then sleeps: SIGTERM ends the process
    within seconds (exit 2, INTERRUPTED), and no sandbox folder of the run is left behind."""
    import json
    import re
    import signal
    import subprocess
    import sys
    import time

    repo = Path(__file__).resolve().parents[1]
    records = json.loads(BUNDLED_TOOLHOP.read_text(encoding="utf-8"))
    # Where no tmpfs can be had, the watchdog kills a call past 256 levels at once: stay below.
    depth = 1400 if sandbox_env.has("tmpfs") else 200
    hostile = ("    import os, time\n    path = '.'\n    for _ in range(%d):\n" % depth +
               "        path = os.path.join(path, 'd')\n        try:\n            os.mkdir(path)\n"
               "        except OSError:\n            break\n    time.sleep(5)\n    return 'done'\n")
    # Every tool keeps its name, builds a deep tree and returns after a while: a sandbox whose
    # clean-up failed on such a tree kept the slot, and callers waiting for one held the
    # process after SIGTERM.
    for record in records:
        record["functions"] = [re.sub(r"def (\w+)\(.*", r"def \1(*args, **kwargs):", src.splitlines()[0])
                               + "\n" + hostile for src in record["functions"]]
    (tmp_path / "data" / "toolhop").mkdir(parents=True)
    (tmp_path / "data" / "toolhop" / "ToolHop.json").write_text(json.dumps(records), encoding="utf-8")
    sandbox_tmp = tmp_path / "tmp"
    sandbox_tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(sandbox_tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "suites/toolhop", "--model", "oracle", "--scenario", "mandatory",
         "--data-dir", str(tmp_path / "data"), "--sandbox-workers", "2", "--no-cache", "-n", "0",
         "-p", "no:cacheprovider", "-q"],
        cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        # Wait until the pools have started (their folders exist); the oracle's first tool
        # calls follow at once and hang.
        while len(list(sandbox_tmp.glob("toolbench-sandbox-*"))) < 1 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            time.sleep(0.2)
        time.sleep(9.0)  # the first calls have ended (and their trees are gone), later ones run
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        output, _ = proc.communicate(timeout=30)
        waited = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, output[-3000:]
    assert waited < 15, f"the run took {waited:.1f} s to end after SIGTERM"
    # The zygotes notice their pool went away and remove their folders (a moment; longer on a
    # loaded runner: polled, not a fixed sleep).
    assert sandbox_env.wait_until(lambda: not list(sandbox_tmp.glob("toolbench-sandbox-*")), 15.0), \
        "a sandbox folder outlived the run"


UNPRINTABLE = """def unprintable():
    class Unprintable(Exception):
        def __str__(self):
            raise Unprintable()
    raise Unprintable()
"""


def test_an_exception_whose_text_raises_is_a_tool_error_with_a_reason(sb: ToolSandbox) -> None:
    """ToolHop's job renders the tool's exception (``str(e)``, as upstream); an exception whose
    ``__str__`` raises again escaped the job, and the child died without a reply ("exited with
    status 70"): the model and the report got no reason. Now the job's failure says what it was."""
    out = call(sb, UNPRINTABLE, "unprintable")
    assert out.status == "crashed", out
    assert "Unprintable (its text could not be rendered" in out.detail, out.detail
    assert "status 70" not in out.detail
    innocent(sb)
