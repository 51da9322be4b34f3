"""No privilege in a call: no capability, no other process in sight or in reach, memory that
counts, and a report that names every layer the machine did not give. Runs as whoever runs the
tests (root here, an ordinary user in .ci/unprivileged, with or without user namespaces)."""

from __future__ import annotations

import os

import pytest

from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import ToolSandbox
from pytest_toolbench.sandbox.isolation_report import isolation_state, merge_isolation_states
from pytest_toolbench.session.identity import sandbox_warning

SOURCE = "pytest_toolbench.sandbox.jobs:run_source"

SELF_VIEW = """
import os, resource
def f(harness):
    out = {"pid": os.getpid(), "ppid": os.getppid()}
    for key, attempt in {
        "renice_harness": lambda: os.setpriority(os.PRIO_PROCESS, harness, 19),
        "affinity_harness": lambda: os.sched_setaffinity(harness, {0}),
        "prlimit_harness": lambda: resource.prlimit(harness, resource.RLIMIT_CORE, (0, 0)),
        "signal_harness": lambda: os.kill(harness, 0),
        "signal_group": lambda: os.kill(0, 0),
        "renice_user": lambda: os.setpriority(os.PRIO_USER, 0, 19),
        "renice_self": lambda: os.setpriority(os.PRIO_PROCESS, 0, 5),
    }.items():
        try:
            attempt()
            out[key] = "done"
        except OSError as exc:
            out[key] = exc.errno
    return out
"""


def run(sb: ToolSandbox, source: str, **kwargs: object) -> dict:
    out = sb.run(SOURCE, {"source": source, "entry": "f", "kwargs": kwargs}, 20)
    assert out.status == "ok" and out.value["error"] is None, out
    return out.value["value"]


@pytest.mark.parametrize("layers_off", [(), ("pid_namespace",)], ids=["all layers", "no PID namespace"])
def test_a_call_cannot_touch_the_harness_or_any_process_but_itself(layers_off):
    harness = os.getpid()
    before = (os.getpriority(os.PRIO_PROCESS, harness), os.sched_getaffinity(harness))
    with ToolSandbox(SandboxLimits(workers=1), disable_layers=layers_off) as sb:
        got = run(sb, SELF_VIEW, harness=harness)
        described = sb.describe()
    for key in ("renice_harness", "affinity_harness", "prlimit_harness", "signal_harness", "signal_group",
                "renice_user"):
        assert got[key] != "done", (key, got)
    assert got["renice_self"] == "done"  # its own process stays its own
    assert (os.getpriority(os.PRIO_PROCESS, harness), os.sched_getaffinity(harness)) == before
    iso = described["isolation"]
    if not layers_off and iso.get("pid_namespace"):
        assert got["ppid"] == 0 and got["pid"] < 100  # its own namespace: no parent in sight
    assert iso["verified_other_pids_refused"] is True


def test_no_capability_in_a_call():
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        iso = sb.describe()["isolation"]
    caps = iso["capabilities"]
    assert iso["verified_no_capabilities"] is True
    assert caps["effective"] == caps["permitted"] == caps["inheritable"] == 0
    if iso["privileged_start"] or iso["user_namespace"]:
        assert caps["bounding_empty"] is True and caps["securebits_locked"] is True


def test_the_report_names_the_layers_a_machine_did_not_give():
    off = ("pid_namespace", "cgroup", "jail")
    with ToolSandbox(SandboxLimits(workers=1), disable_layers=off) as sb:
        state = sb.isolation_state()
    assert state["kernel_isolation"] is True  # the floor held
    assert {"pid_namespace", "cgroup", "jail"} <= set(state["absent_layers"])
    assert all(state["absent_layers"][k] for k in off)  # each with why
    assert state["capabilities"] == "none" and state["memory_cap"] == "rlimit"
    line = sandbox_warning([state])
    assert line is not None and not line.startswith("WARNING") and "pid_namespace" in line
    merged = merge_isolation_states([state, state])
    assert merged is not None and merged["absent_layers"] == state["absent_layers"]


def test_isolation_state_keeps_the_new_fields_through_describe():
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        described = sb.describe()
    state = isolation_state(described)
    for key in ("capabilities", "privileged_start", "user_namespace", "pid_namespace", "memory_cap", "absent_layers"):
        assert key in state


MEMORY = """
import os
def f(kind, mb):
    held = []
    chunk = b"x" * (1 << 20)
    try:
        for _ in range(mb):
            if kind == "pipe":
                r, w = os.pipe()
                import fcntl
                fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
                os.set_blocking(w, False)
                os.write(w, chunk)
                held.append((r, w))
            else:
                fd = os.memfd_create("x")
                os.write(fd, chunk)
                held.append(fd)
    except OSError as exc:
        return {"held_mb": len(held), "errno": exc.errno}
    return {"held_mb": len(held), "errno": None}
"""


@pytest.mark.parametrize("kind", ["pipe", "memfd"])
def test_pipes_and_memfds_are_refused_at_the_source(kind):
    """RLIMIT_AS does not count pipe buffers or memfds: the allowlist refuses both."""
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        got = run(sb, MEMORY, kind=kind, mb=64)
    assert got == {"held_mb": 0, "errno": 1}


def test_the_memory_cgroup_counts_memfds_where_there_is_one():
    """With the filter off (insecure), a memfd flood past the cgroup's limit kills the call;
    only where this machine gives the harness a memory cgroup."""
    limits = SandboxLimits(workers=1, insecure=True, memory_mb=96, disk_mb=16)
    with ToolSandbox(limits, disable_layers=("seccomp",)) as sb:
        if sb.isolation_state()["memory_cap"] != "cgroup":
            pytest.skip("no memory cgroup for this account on this machine")
        out = sb.run(SOURCE, {"source": MEMORY, "entry": "f", "kwargs": {"kind": "memfd", "mb": 400}}, 30)
        assert out.status == "crashed" and "SIGKILL" in out.detail, out
        assert run(sb, "def f():\n    return 'alive'") == "alive"


def test_calls_are_born_in_the_memory_cgroup_the_zygote_lives_in():
    """The zygote moves into its cgroup once, so no call migrates (a migration waits a kernel
    grace period, 10-15 ms); the limit holds the zygote's resident size on top of the call's
    allowance; and the pool that kills its zygote at close removes that cgroup."""
    limits = SandboxLimits(workers=1, memory_mb=96, disk_mb=16)
    with ToolSandbox(limits) as sb:
        cap = sb.describe()["isolation"]["memory_cap"]
        if cap["mechanism"] != "cgroup":
            pytest.skip("no memory cgroup for this account on this machine")
        (zygote,) = sb.worker_pids()
        with open(f"/proc/{zygote}/cgroup", encoding="ascii") as f:
            assert any(line.endswith(os.path.basename(cap["path"])) for line in f.read().splitlines())
        assert cap["limit_mb"] == 96 + 16 + 64 and cap["zygote_mb"] > 0
        limit_file = "memory.max" if cap["version"] == 2 else "memory.limit_in_bytes"
        with open(os.path.join(cap["path"], limit_file), encoding="ascii") as f:
            assert int(f.read()) // 2**20 == cap["limit_mb"] + cap["zygote_mb"]
        assert run(sb, "def f():\n    return 'born here'") == "born here"
    assert not os.path.exists(cap["path"]), "the pool killed its zygote and left its cgroup"


@pytest.mark.parametrize("use_bubblewrap", [False, True], ids=["zygote", "bwrap"])
def test_a_delegated_cgroup_named_in_the_environment_reaches_the_zygote(tmp_path, monkeypatch, use_bubblewrap):
    """``TOOLBENCH_SANDBOX_CGROUP`` (a cgroup delegated to an ordinary user) used to stop at the
    pool: the zygote's environment is an allowlist, so the zygote, which makes the cgroup, never
    saw it. It now comes in the zygote's config; a folder outside the cgroup2 mount (here a
    plain one, where the limit files would be ordinary files that limit nothing) is refused and
    the report says why."""
    from pytest_toolbench.sandbox import cgroup

    if not any(fstype == "cgroup2" for _, fstype, _ in cgroup._mounts()):
        pytest.skip("no cgroup2 file system mounted here")
    if use_bubblewrap:
        from bubblewrap_usable import bubblewrap_usable

        if bubblewrap_usable() is not None:
            pytest.skip(bubblewrap_usable())
    folder = tmp_path / "delegated"
    folder.mkdir()
    monkeypatch.setenv(cgroup.ENV_VAR, str(folder))
    with ToolSandbox(SandboxLimits(workers=1), use_bubblewrap=use_bubblewrap) as sb:
        cap = sb.describe()["isolation"]["memory_cap"]
        assert run(sb, "def f():\n    return 'ran'") == "ran"
    assert f"{cgroup.ENV_VAR}={folder} is not beneath the cgroup2 mount" in cap["note"], cap
    assert cap.get("path", "").startswith(str(folder)) is False
    assert list(folder.iterdir()) == [], "limit files written as plain files"


OWN_FILES = """
import os
def f():
    out = {}
    with open("notes", "w") as fh:  # O_TRUNC with O_WRONLY: Landlock's business at every ABI
        fh.write("twelve bytes")
        fh.truncate(6)
    out["write_and_ftruncate"] = open("notes").read()
    try:
        os.truncate("notes", 2)
        out["truncate_by_path"] = "done"
    except OSError as exc:
        out["truncate_by_path"] = exc.errno
    return out
"""


@pytest.mark.parametrize("older_landlock", [False, True], ids=["this kernel's Landlock", "Landlock ABI 2"])
def test_without_a_jail_truncation_is_refused_where_landlock_does_not_govern_it(older_landlock):
    """No jail and a Landlock without the truncation right (Linux 5.13-6.1): the zygote's filter
    refuses truncation but through a descriptor open for writing (syscall_filter ``_TRUNCATE``);
    with this kernel's Landlock, truncation stays Landlock's to decide."""
    import errno

    from pytest_toolbench.sandbox.policy import landlock_abi

    if landlock_abi() < 3:
        pytest.skip("this kernel's Landlock has no truncation right to compare with")
    layers_off = ("jail", "landlock_truncation") if older_landlock else ("jail",)
    with ToolSandbox(SandboxLimits(workers=1), disable_layers=layers_off) as sb:
        got = run(sb, OWN_FILES)
        iso = sb.describe()["isolation"]
    assert got["write_and_ftruncate"] == "twelve"
    assert iso["landlock_abi"] == (2 if older_landlock else landlock_abi())
    assert iso["missing_layers"] == []  # still above the floor
    assert ("truncation but through a descriptor" in iso["absent_layers"]["jail"]) is older_landlock
    assert got["truncate_by_path"] == (errno.EPERM if older_landlock else "done")
