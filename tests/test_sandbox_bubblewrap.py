"""The sandbox with ``bwrap`` (bubblewrap) in front of the zygote. CI has no bwrap: the tests that
start it skip with why; the logic they rest on (the argv, the probe's checks) is tested here
without it too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bubblewrap_usable import needs_bwrap
from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import ToolSandbox, policy, pool, worker

RUN = "pytest_toolbench.sandbox.jobs:run_source"


def run(sb: ToolSandbox, source: str) -> dict:
    outcome = sb.run(RUN, {"source": source, "entry": "f"}, 10.0)
    assert outcome.status == "ok", outcome.detail
    return outcome.value


def test_bwrap_root_shows_the_symlinks_on_the_way_to_its_binds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe found bwrap never ran: its root held ``/usr/lib64`` but not ``/lib64 ->
    usr/lib64``, the loader path written in every program, so exec of the interpreter failed
    (ENOENT) and the pool fell back without it. The links are mirrored as ``--symlink``."""
    real = tmp_path / "usr" / "lib64"
    real.mkdir(parents=True)
    (tmp_path / "lib64").symlink_to("usr/lib64")
    loader = tmp_path / "lib64" / "ld.so"
    bound = [str(real)]
    links = policy.links_on_the_way(str(loader), bound)
    assert links == [(str(tmp_path / "lib64"), "usr/lib64")]
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/bwrap")
    argv = pool.bubblewrap_argv(str(tmp_path / "folder"), bound, links)
    assert argv is not None
    i = argv.index("--symlink")
    assert argv[i: i + 3] == ["--symlink", "usr/lib64", str(tmp_path / "lib64")]
    # A link already inside a bound tree is the host's own, seen through the bind: not repeated.
    assert policy.links_on_the_way(str(real / "x"), bound) == []


def test_the_pools_bwrap_links_lead_to_the_interpreters_loader() -> None:
    """On this machine: every symlink on the way to the interpreter and the system paths that
    lies outside the binds is in bwrap's argv (``/lib64``, ``/lib`` on a merged-/usr system)."""
    bound = pool._bwrap_read_paths()
    links = dict(pool._bwrap_links(bound))
    for path in ("/lib", "/lib64", sys.executable):
        cur = "/"
        for part in os.path.abspath(path).strip("/").split("/"):
            cur = os.path.join(cur, part)
            if any(cur == b or cur.startswith(b + "/") for b in bound):
                break
            if os.path.islink(cur):
                assert links.get(cur) == os.readlink(cur), cur
                cur = os.path.realpath(cur)


def test_the_other_pids_probe_does_not_count_the_probes_own_pid() -> None:
    """Under bwrap the zygote is pid 2 of bwrap's PID namespace, and the probe's child is pid 2
    of the zygote's own: the probe named "the zygote" by a number that was the child itself,
    which the filter rightly lets it signal, so a sound seccomp was reported failed and every
    pool refused to start. A pid the child holds itself is no other process's."""
    probes: dict = {}
    exec(worker._KERNEL_PROBES, probes)  # noqa: S102 - the probe's own source, as the child runs it
    with pytest.raises(PermissionError):
        probes["_other_pids"]([os.getpid()])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:  # unconfined here: another process of ours still counts as reached
        probes["_other_pids"]([os.getpid(), other.pid])
    finally:
        other.kill()
        other.wait()


@needs_bwrap
def test_bubblewrap_is_really_used_and_every_layer_holds(caplog: pytest.LogCaptureFixture) -> None:
    """With bwrap on PATH the zygote runs inside it (no "bubblewrap failed" fallback), and the
    probe verifies the layers inside it as without it."""
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        iso = sb.describe()["isolation"]
        assert "bubblewrap failed" not in caplog.text
        assert iso["bubblewrap"] is True and iso["missing_layers"] == []
        assert iso["verified_other_pids_refused"] is True
        if iso.get("filesystem_view") == "jail":
            assert iso["verified_jail_read_only"] is True
        assert sb.isolation_state()["bubblewrap"] is True
        assert run(sb, "def f():\n    return 1")["value"] == 1


def test_host_pid_finds_a_descendant_by_its_pid_in_its_own_namespace() -> None:
    """Under bwrap, hello's pid (2) is the zygote's number in bwrap's PID namespace and the pool's
    process is bwrap: ``worker_pids()`` named bwrap, so a signal meant for the zygote (a test's
    SIGSTOP, the attack corpus watching the zygote's nice value and limits) reached bwrap."""
    try:
        proc = subprocess.Popen(["unshare", "--user", "--map-root-user", "--pid", "--fork",
                                 sys.executable, "-c", "import time; time.sleep(30)"],
                                stderr=subprocess.DEVNULL)
    except OSError as exc:
        pytest.skip(f"no unshare here: {exc}")
    try:
        found = proc.pid
        for _ in range(200):
            found = pool.host_pid(proc.pid, 1)
            if found != proc.pid or proc.poll() is not None:
                break
            time.sleep(0.01)
        if proc.poll() is not None:
            pytest.skip("this machine refuses an unprivileged PID namespace")
        assert found != proc.pid
        with open(f"/proc/{found}/cmdline", "rb") as f:
            assert b"time.sleep(30)" in f.read()
    finally:
        proc.kill()
        proc.wait()
    assert pool.host_pid(os.getpid(), 987654) == os.getpid()  # none such: the root itself


@needs_bwrap
def test_worker_pids_are_the_zygotes_not_bwraps() -> None:
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        sb.describe()
        (pid,) = sb.worker_pids()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            assert b"pytest_toolbench.sandbox.worker" in f.read()
        assert pid != next(iter(sb._live)).proc.pid


@needs_bwrap
def test_the_zygotes_handle_on_the_host_temp_dir_never_reaches_a_call() -> None:
    """Under bwrap the zygote holds an fd of the host's temp dir (to remove its folder when its
    harness is SIGKILLed: inside bwrap that folder is a mount point). A call holds no directory
    fd at all: with one it could reach the host's tree beside the jail."""
    source = ("import os, stat\ndef f():\n    out = []\n    for fd in range(1024):\n"
              "        try:\n            if stat.S_ISDIR(os.fstat(fd).st_mode):\n                out.append(fd)\n"
              "        except OSError:\n            pass\n    return out")
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        assert sb.describe()["isolation"]["bubblewrap"] is True
        assert run(sb, source)["value"] == []


def test_no_bwrap_bind_lies_beneath_another() -> None:
    """As an ordinary user whose Python is the system's (base prefix /usr), bwrap bound /usr and
    then /usr/lib, /usr/lib64... beneath it: child mounts, locked in the zygote's user
    namespace, so its jail's non-recursive bind of /usr failed (EINVAL) and every call of
    ``make run`` saw the host's paths (``absent_layers: jail``). Each bind is recursive: one
    beneath another adds nothing."""
    paths = pool._bwrap_read_paths()
    assert paths == sorted(set(paths))
    for path in paths:
        assert not any(path.startswith(other.rstrip("/") + "/") for other in paths), path
    assert os.path.realpath("/usr") in paths  # the loader and libraries still come with it


def test_a_bwrap_that_cannot_start_leaves_no_dead_worker_in_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where bwrap is installed but may not make its namespaces (user namespaces refused), its
    start fails and the pool falls back to its own layers. The failed worker stayed registered
    among the live ones (.ci/unprivileged's orphan tests counted three pools' folders for two):
    a dead worker a close() kills again and a reader of the pool takes for a live one."""
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/bwrap" if name == "bwrap" else None)
    monkeypatch.setattr(pool, "bubblewrap_argv", lambda *a, **k: ["/bin/false", "--"])
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        assert run(sb, "def f():\n    return 1")["value"] == 1
        assert sb.describe()["isolation"]["bubblewrap"] is False
        assert len(sb._live) == 1 and all(hasattr(w, "info") for w in sb._live)


CGROUP_VIEW = """
import os
def f(limit_file, cgroup_dev):
    out = {"sys": os.path.exists("/sys"), "cgroup_fds": []}
    for fd in range(1024):
        try:
            if os.fstat(fd).st_dev == cgroup_dev:
                out["cgroup_fds"].append(fd)
        except OSError:
            pass
    try:
        open(limit_file, "w").write("max")
        out["wrote_limit"] = True
    except OSError as exc:
        out["wrote_limit"] = exc.errno
    return out
"""

FLOOD = """
import os
def f(mb):
    held, chunk = [], b"x" * (1 << 20)
    for _ in range(mb):  # RLIMIT_AS does not count them, nor RLIMIT_FSIZE below a MiB each
        held.append(os.memfd_create("x"))
        os.write(held[-1], chunk)
    return len(held)
"""


@needs_bwrap
def test_under_bwrap_a_call_keeps_the_memory_cgroup_the_machine_gives() -> None:
    """bwrap's root has no /sys, and inside it the zygote's pid is 2: a zygote that made its own
    cgroup found none to make (``memory_cap: rlimit``) where the same pool without bwrap had
    one (root). The pool makes it on the host's side, named after the zygote's host pid and
    start time, and moves the zygote in before it forks anything: every call is born there,
    the limit is enforced (a memfd flood past it, the filter off, is killed), the call still
    sees no /sys and holds no handle on the cgroup, and the pool's close removes it."""
    limits = SandboxLimits(workers=1, memory_mb=96, disk_mb=16)
    with ToolSandbox(limits, use_bubblewrap=False) as plain:
        if plain.describe()["isolation"]["memory_cap"]["mechanism"] != "cgroup":
            pytest.skip("no memory cgroup for this account on this machine, bwrap or not")
    with ToolSandbox(limits) as sb:
        iso = sb.describe()["isolation"]
        cap = iso["memory_cap"]
        assert iso["bubblewrap"] is True
        assert cap["mechanism"] == "cgroup", cap["note"]
        assert "cgroup" not in iso["absent_layers"] and sb.isolation_state()["memory_cap"] == "cgroup"
        (zygote,) = sb.worker_pids()
        assert os.path.basename(cap["path"]).endswith(f"{zygote}-{pool_start_time(zygote)}")
        with open(f"/proc/{zygote}/cgroup", encoding="ascii") as f:
            assert any(line.endswith("/" + os.path.basename(cap["path"])) for line in f.read().splitlines())
        limit_file = os.path.join(cap["path"], "memory.max" if cap["version"] == 2 else "memory.limit_in_bytes")
        with open(limit_file, encoding="ascii") as f:
            assert int(f.read()) // 2**20 == cap["limit_mb"] + cap["zygote_mb"] == 96 + 16 + 64 + cap["zygote_mb"]
        out = sb.run(RUN, {"source": CGROUP_VIEW, "entry": "f", "kwargs": {"limit_file": limit_file, "cgroup_dev": os.stat(cap["path"]).st_dev}}, 10.0)
        assert out.status == "ok", out.detail
        assert out.value["value"]["sys"] is False
        assert out.value["value"]["cgroup_fds"] == []  # no handle on the cgroup file system
        assert out.value["value"]["wrote_limit"] is not True
    assert not os.path.exists(cap["path"]), "the pool killed its zygote and left its cgroup"
    with ToolSandbox(SandboxLimits(workers=1, memory_mb=96, disk_mb=16, insecure=True),
                     disable_layers=("seccomp",)) as sb:
        assert sb.describe()["isolation"]["memory_cap"]["mechanism"] == "cgroup"
        out = sb.run(RUN, {"source": FLOOD, "entry": "f", "kwargs": {"mb": 400}}, 30.0)
        assert out.status == "crashed" and "SIGKILL" in out.detail, out
        assert run(sb, "def f():\n    return 'alive'")["value"] == "alive"


def pool_start_time(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rpartition(")")[2].split()[19]
