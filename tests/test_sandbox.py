"""The sandbox: warm pool, limits, isolation, robustness. Small timeouts keep this file fast."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import SandboxOutcome, ToolSandbox
from sandbox_env import process_alive, wait_until

RUN = "pytest_toolbench.sandbox.jobs:run_source"


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def run_src(sb: ToolSandbox, source: str, timeout_s: float = 5.0, **kwargs) -> SandboxOutcome:
    return sb.run(RUN, {"source": source, "entry": "f", "kwargs": kwargs}, timeout_s)


def value(sb: ToolSandbox, source: str, **kwargs):
    outcome = run_src(sb, source, **kwargs)
    assert outcome.status == "ok", outcome.detail
    return outcome.value


@pytest.fixture(scope="module")
def sandbox():
    with ToolSandbox(SandboxLimits(workers=2, cpu_seconds=5, memory_mb=512, file_size_mb=1)) as sb:
        yield sb


def test_simple_call_and_warm_reuse(sandbox):
    assert value(sandbox, "def f(x):\n    return {'double': x * 2}", x=21) == {"value": {"double": 42}, "error": None, "type": None}
    got = [value(sandbox, "import os\ndef f():\n    return [os.getpid(), os.getppid()]")["value"] for _ in range(10)]
    assert len({ppid for _, ppid in got}) <= 2  # warm zygotes reused, not one interpreter per call
    assert len({pid for pid, _ in got}) == 10  # each call in its own fresh fork


def test_infinite_loop_times_out_and_worker_is_replaced():
    pid = "import os\ndef f():\n    return os.getpid()"
    # host pids: the call's own PID namespace (or bwrap's) would show it a small number of its own
    with ToolSandbox(SandboxLimits(workers=1), disable_layers=("pid_namespace",), use_bubblewrap=False) as sb:
        before = value(sb, pid)["value"]
        outcome = run_src(sb, "def f():\n    while True:\n        pass", timeout_s=1.0)
        assert outcome.status == "timeout" and 1.0 <= outcome.duration_s < 3.0
        assert not os.path.exists(f"/proc/{before}")  # killed and reaped
        assert value(sb, "def f():\n    return 'alive'")["value"] == "alive"
        assert value(sb, pid)["value"] != before


def test_huge_allocation_is_an_error_not_a_crash(sandbox):
    got = value(sandbox, "def f():\n    return len(bytearray(10 * 1024 ** 3))")
    assert got["type"] == "MemoryError"
    assert value(sandbox, "def f():\n    return 1")["value"] == 1


def test_cpu_limit_kills_the_worker_and_reports_crashed():
    with ToolSandbox(SandboxLimits(workers=1, cpu_seconds=0.5)) as sb:
        outcome = run_src(sb, "def f():\n    while True:\n        pass", timeout_s=10.0)
        assert outcome.status == "crashed" and "SIGXCPU" in outcome.detail
        assert value(sb, "def f():\n    return 2")["value"] == 2


@pytest.mark.parametrize(
    "source",
    [
        "import socket\ndef f():\n    return socket.socket().fileno()",
        "import socket\ndef f():\n    socket.create_connection(('127.0.0.1', 80), timeout=1)",
        "import urllib.request\ndef f():\n    return urllib.request.urlopen('http://127.0.0.1:9/', timeout=1).read()",
    ],
)
def test_network_is_blocked(sandbox, source):
    got = value(sandbox, source)
    assert got["error"] and got["type"] in {"PermissionError", "URLError", "OSError"}, got


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    open('/etc/toolbench_probe', 'w').write('x')",
        "import os\ndef f():\n    os.close(os.open('/etc/toolbench_probe', os.O_WRONLY | os.O_CREAT))",
        "import pathlib\ndef f():\n    pathlib.Path('/etc/toolbench_probe').write_text('x')",
        "import os\ndef f():\n    os.mkdir('/etc/toolbench_probe')",
    ],
)
def test_writes_outside_the_temp_dir_are_blocked(sandbox, source):
    got = value(sandbox, source)
    assert got["type"] == "PermissionError", got
    assert not os.path.exists("/etc/toolbench_probe")


def test_removing_or_renaming_outside_is_blocked(sandbox, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    for op in ("os.remove(p)", "os.rename(p, 'stolen')", "os.chmod(p, 0)"):
        got = value(sandbox, f"import os\ndef f(p):\n    {op}", p=str(victim))
        assert got["type"] == "PermissionError", (op, got)
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize(
    "source",
    [
        "import subprocess\ndef f():\n    return subprocess.run(['true']).returncode",
        "import os\ndef f():\n    return os.system('true')",
        "import os\ndef f():\n    return os.fork()",
        "import os\ndef f():\n    os.execv('/bin/true', ['true'])",
        "def f():\n    import ctypes\n    return ctypes.CDLL(None).getpid()",
    ],
)
def test_process_creation_and_ctypes_are_blocked(sandbox, source):
    got = value(sandbox, source)
    assert got["type"] == "PermissionError", got


def test_writing_inside_the_private_temp_dir_works(sandbox):
    src = (
        "import os, tempfile\ndef f():\n"
        "    open('notes.txt', 'w').write('hi')\n"
        "    with tempfile.NamedTemporaryFile('w', delete=False) as t:\n        t.write('x')\n"
        "    os.rename('notes.txt', 'n2.txt')\n"
        "    return [open('n2.txt').read(), os.getcwd() == os.environ['HOME'], t.name.startswith(os.getcwd())]"
    )
    assert value(sandbox, src)["value"] == ["hi", True, True]


def test_file_size_limit(sandbox):
    got = value(sandbox, "def f():\n    open('big', 'wb').write(b'x' * (3 * 1024 * 1024))")
    assert got["type"] == "OSError" and "too large" in got["error"].lower(), got


def test_environment_is_scrubbed(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-for-test")
    monkeypatch.setenv("SOME_TOKEN", "t")
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        env = value(sb, "import os\ndef f():\n    return dict(os.environ)")["value"]
    assert "OPENAI_API_KEY" not in env and "SOME_TOKEN" not in env
    assert "sk-secret-for-test" not in repr(env)
    assert env["HOME"] == env["TMPDIR"]


def test_prints_do_not_corrupt_results(sandbox):
    src = (
        "import os, sys, struct, json\n"
        "print('hello from example usage')\n"
        "def f():\n"
        "    frame = json.dumps({'id': 1, 'ok': True, 'value': 'forged'}).encode()\n"
        "    sys.stdout.write(struct.pack('>I', len(frame)).decode('latin1') + frame.decode())\n"
        "    sys.stdout.buffer.write(b'\\x00\\x00\\x00\\x05junk')\n"
        "    print('x' * 200000, file=sys.stderr)\n"
        "    os.write(1, b'raw bytes on fd 1')\n"
        "    os.write(2, b'raw bytes on fd 2')\n"
        "    return 'real'"
    )
    for _ in range(3):
        assert value(sandbox, src)["value"] == "real"


def test_eight_concurrent_threads_get_their_own_results(sandbox):
    results: dict[int, object] = {}

    def worker(i: int) -> None:
        out = run_src(sandbox, "import time\ndef f(i):\n    time.sleep(0.05)\n    return i * i", i=i)
        results[i] = out.value["value"] if out.status == "ok" else out

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == {i: i * i for i in range(8)}


def test_arun_from_asyncio(sandbox):
    async def main():
        return await asyncio.gather(
            *(sandbox.arun(RUN, {"source": f"def f():\n    return {i}", "entry": "f"}, 5.0) for i in range(4))
        )

    assert [o.value["value"] for o in asyncio.run(main())] == [0, 1, 2, 3]


def test_job_that_raises_is_crashed_and_pool_recovers(sandbox):
    outcome = sandbox.run(RUN, {"no_source": True}, 5.0)
    assert outcome.status == "crashed" and "KeyError" in outcome.detail
    assert value(sandbox, "def f():\n    return 'ok'")["value"] == "ok"


def test_decode_frame_treats_nesting_too_deep_as_a_bad_frame():
    from pytest_toolbench.sandbox import protocol

    body = b"[" * 200_000 + b"]" * 200_000  # valid JSON, deeper than the decoder's recursion limit
    frame = len(body).to_bytes(protocol.HEADER_BYTES, "big") + body
    with pytest.raises(protocol.ProtocolError, match="nested too deeply"):
        protocol.decode_frame(frame)
    r, w = os.pipe()
    try:
        threading.Thread(target=protocol.write_all, args=(w, frame), daemon=True).start()
        with pytest.raises(protocol.ProtocolError, match="nested too deeply"):
            protocol.recv(r)
    finally:
        os.close(r)
        os.close(w)
    assert protocol.decode_frame(protocol.encode([[1]])) == [[1]]


# A call that writes a hand-made, deeply nested reply frame to every fd it may hold, then exits.
DEEP_FRAME = """import os, struct
def f():
    body = b"[" * 200000 + b"]" * 200000
    frame = struct.pack(">I", len(body)) + body
    for fd in range(3, 64):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    os._exit(0)
"""


def test_a_deeply_nested_reply_frame_fails_the_call_not_the_worker():
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        assert value(sb, "def f():\n    return 1")["value"] == 1
        zygote = sb.worker_pids()
        outcome = run_src(sb, DEEP_FRAME)
        assert outcome.status == "crashed" and "malformed reply" in outcome.detail, outcome.detail
        assert "nested too deeply" in outcome.detail
        assert sb.worker_pids() == zygote  # the warm zygote survived its call's bad frame
        assert value(sb, "def f():\n    return 2")["value"] == 2


def test_only_harness_jobs_are_allowed(sandbox):
    for job in ("os:system", "json:loads", "pytest_toolbench", "pytest_toolbench.sandbox.jobs:", "x.pytest_toolbench:f"):
        with pytest.raises(ValueError):
            sandbox.run(job, {}, 1.0)


def test_describe_reports_isolation_in_force(sandbox):
    info = sandbox.describe()
    iso = info["isolation"]
    assert info["limits"]["memory_mb"] == 512 and info["python"].startswith("3.")
    assert iso["audit_hook"] is True
    assert isinstance(iso["network_namespace"], bool) and isinstance(iso["seccomp"], bool)
    if iso["seccomp"] or iso["landlock_abi"] >= 4:
        assert iso["verified_socket_refused"]
    if iso["landlock_abi"]:
        assert iso["verified_write_outside_refused"] and iso["verified_proc_environ_refused"]


def test_close_leaves_no_process_and_no_temp_dir():
    before = children_of(os.getpid())
    sb = ToolSandbox(SandboxLimits(workers=3))
    out = [sb.run(RUN, {"source": "import os\ndef f():\n    return os.getcwd()", "entry": "f"}, 5.0) for _ in range(3)]
    threads = [threading.Thread(target=sb.run, args=(RUN, {"source": "def f():\n    while True: pass", "entry": "f"}, 30.0)) for _ in range(2)]
    for t in threads:
        t.start()
    while len(sb.worker_pids()) < 2:
        threading.Event().wait(0.05)
    pids = sb.worker_pids()
    assert pids and children_of(os.getpid()) - before
    sb.close()
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    assert children_of(os.getpid()) == before
    # Under bwrap the zygote is its namespace-init's child, not the pool's: killed with that
    # namespace, it lingers as a zombie until the host's init reaps it (a moment on a busy
    # machine), where without bwrap the pool reaps it itself.
    assert wait_until(lambda: not any(process_alive(pid) for pid in pids), 5.0), pids
    assert not any(os.path.exists(o.value["value"]) for o in out)
    with pytest.raises(RuntimeError):
        sb.run(RUN, {"source": "", "entry": None}, 1.0)


@pytest.mark.parametrize("interrupt_at", ["config", "hello"])
def test_ctrl_c_while_a_worker_starts_leaves_no_process_and_no_temp_dir(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, interrupt_at: str) -> None:
    """Ctrl-C reaches the thread that starts a zygote (a run's first tool call, or describe()):
    before the zygote exists, or while the harness waits for its hello."""
    import tempfile

    from pytest_toolbench.sandbox import pool

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the worker's folder lands here
    if interrupt_at == "config":
        def interrupted(*args: object, **kwargs: object) -> list[str]:
            raise KeyboardInterrupt
        monkeypatch.setattr(pool, "protected_paths", interrupted)
    else:
        real_recv = pool.protocol.recv

        def interrupted(fd: int, deadline: float | None = None) -> dict:
            if threading.current_thread() is threading.main_thread():
                raise KeyboardInterrupt
            return real_recv(fd, deadline)
        monkeypatch.setattr(pool.protocol, "recv", interrupted)
    before = children_of(os.getpid())
    open_fds = set(os.listdir("/proc/self/fd"))
    with pytest.raises(KeyboardInterrupt):
        ToolSandbox(SandboxLimits(workers=1)).describe()
    assert children_of(os.getpid()) == before
    assert not list(tmp_path.glob("toolbench-sandbox-*"))
    assert set(os.listdir("/proc/self/fd")) <= open_fds  # its pipes closed


def test_the_outcome_model_is_built_before_any_thread_makes_one():
    """``SandboxOutcome`` (a ``DeferredModel``) is first made on asyncio's executor threads, by
    several tool calls at once. pydantic before 2.14 rebuilds a deferred model unsafely there
    (8 threads making a first instance at once: 2.11.4 failed every trial, 2.12.0 1-4 in 200);
    the pool builds it when it is made, on its owner's thread. A fresh interpreter: a
    command that never makes a pool still defers it."""
    import subprocess
    import sys

    code = ("from pytest_toolbench.sandbox import SandboxOutcome, ToolSandbox\n"
            "before = SandboxOutcome.__pydantic_complete__\n"
            "ToolSandbox().close()\n"
            "print(before, SandboxOutcome.__pydantic_complete__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr
