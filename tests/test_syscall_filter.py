"""The per-call syscall allowlist: its decisions read off the BPF program (an interpreter of the
few classic-BPF instructions it uses), then the same filter in a real process."""

from __future__ import annotations

import errno
import json
import subprocess
import sys

import pytest

from pytest_toolbench.sandbox import syscall_filter as sf
from sandbox_env import ATTEMPT

OWN = 4242
ALLOW, DENY, ENOSYS, DONE, ENOTTY = "allow", "deny", "enosys", "done", "enotty"
ARCH = 0xC000003E


def decide(nr: int, *args: int, arch: int = ARCH, own: int = OWN, file_metadata: bool = True,
           file_truncation: bool = True) -> str:
    """Run the program on a seccomp_data of (arch, nr, args)."""
    words = {0: nr, 4: arch}
    for i, arg in enumerate(args):
        words[16 + 8 * i] = arg & 0xFFFFFFFF
        words[20 + 8 * i] = (arg >> 32) & 0xFFFFFFFF
    prog, pc, acc = sf.program(own, file_metadata, file_truncation), 0, 0
    for _ in range(10_000):
        code, jt, jf, k = prog[pc]
        if code == 0x20:
            acc, pc = words.get(k, 0), pc + 1
        elif code == 0x54:  # acc &= k
            acc, pc = acc & k, pc + 1
        elif code in (0x15, 0x35, 0x45):
            hit = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:
            return {0x7FFF0000: ALLOW, 0x00050000 | errno.EPERM: DENY, 0x00050000 | errno.ENOSYS: ENOSYS,
                    0x00050000: DONE, 0x00050000 | errno.ENOTTY: ENOTTY}[k]
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
    raise AssertionError("the program loops")


def nr(name: str) -> int:
    for table in (sf.ALLOWED_X86_64, sf.SELF_PID_X86_64, sf.OWN_PID_ONLY_X86_64, sf.PRIORITY_X86_64):
        if name in table:
            return table[name]
    return {"socket": 41, "fork": 57, "execve": 59, "pipe": 22, "pipe2": 293, "memfd_create": 319,
            "syslog": 103, "clock_adjtime": 305, "clock_settime": 227, "settimeofday": 164,
            "adjtimex": 159, "fanotify_init": 300, "fanotify_mark": 301, "inotify_init1": 294,
            "ptrace": 101, "unshare": 272, "mount": 165, "shmget": 29, "ioprio_set": 251,
            "capget": 125, "sysinfo": 99, "mlock": 149, "splice": 275, "pidfd_open": 434,
            "process_vm_readv": 310, "bpf": 321, "io_uring_setup": 425, "tkill": 200,
            "rt_sigqueueinfo": 129, "move_pages": 279, "get_robust_list": 274, "clone": 56,
            "clone3": 435, "personality": 135, "setpgid": 109, "keyctl": 250}[name]


@pytest.mark.parametrize("name", sorted(sf.ALLOWED_X86_64))
def test_every_allowed_call_is_allowed(name):
    """(fcntl, flock, ioctl and prctl are checked by command below.)"""
    assert decide(nr(name), 0, 0) == ALLOW


@pytest.mark.parametrize("name", ["socket", "fork", "execve", "pipe", "pipe2", "memfd_create", "syslog",
                                  "clock_adjtime", "clock_settime", "settimeofday", "adjtimex",
                                  "fanotify_init", "fanotify_mark", "inotify_init1", "ptrace", "unshare",
                                  "mount", "shmget", "ioprio_set", "capget", "sysinfo", "mlock", "splice",
                                  "pidfd_open", "process_vm_readv", "bpf", "io_uring_setup", "tkill",
                                  "rt_sigqueueinfo", "move_pages", "get_robust_list", "personality",
                                  "setpgid", "keyctl"])
def test_calls_outside_the_list_are_refused(name):
    assert decide(nr(name), 0, 0, 0) == DENY


def test_file_modes_and_times_are_refused_without_a_jail():
    """Landlock does not govern chmod or utime: on the host's tree (no jail) they would reach
    any file of the harness's uid, so that filter refuses them; everything else is unchanged."""
    for name in sf.FILE_METADATA_X86_64:
        assert decide(nr(name), 0, 0, file_metadata=True) == ALLOW
        assert decide(nr(name), 0, 0, file_metadata=False) == DENY
    for name in sorted(set(sf.ALLOWED_X86_64) - set(sf.FILE_METADATA_X86_64)):
        assert decide(nr(name), 0, 0, file_metadata=False) == ALLOW, name


def test_truncation_of_files_it_may_only_read_is_refused_below_landlock_abi_3():
    """Without a jail, on a kernel whose Landlock does not govern truncation (ABI 1-2), an open
    that truncates without opening for writing, and ``truncate`` by path, would empty any file
    of the harness's uid: refused. Opening for writing (Landlock's business at every ABI) and
    ``ftruncate`` stay allowed; ``openat2``, whose flags the filter cannot read, is ENOSYS."""
    o_trunc, o_creat = 0o1000, 0o100
    cases = {  # (call, args): decision without Landlock's truncation right
        ("open", (0, o_trunc)): DENY, ("open", (0, o_trunc | 3)): DENY,
        ("open", (0, o_trunc | 1 | o_creat)): ALLOW, ("open", (0, o_trunc | 2)): ALLOW,
        ("open", (0, 0)): ALLOW, ("open", (0, o_creat | 1)): ALLOW,
        ("openat", (0xFFFFFF9C, 0, o_trunc)): DENY, ("openat", (3, 0, o_trunc | 0o2000000)): DENY,
        ("openat", (3, 0, o_trunc | 1)): ALLOW, ("openat", (3, 0, o_trunc | 2)): ALLOW,
        ("openat", (3, 0, 0)): ALLOW, ("openat", (3, 0, 0o2000000)): ALLOW,
        ("truncate", (0, 0)): DENY, ("ftruncate", (3, 0)): ALLOW, ("creat", (0, 0o644)): ALLOW,
    }
    for (name, args), expected in cases.items():
        assert decide(nr(name), *args, file_metadata=False, file_truncation=False) == expected, (name, args)
        assert decide(nr(name), *args, file_metadata=False) == ALLOW, (name, args)  # Landlock's, ABI >= 3
    assert decide(437, 0, 0, 0, 24, file_truncation=False) == ENOSYS  # openat2
    for name in sorted(set(sf.ALLOWED_X86_64) - {"truncate", "open", "openat", "openat2"}):
        assert decide(nr(name), 0, 0, file_truncation=False) == ALLOW, name


@pytest.mark.parametrize("name", sorted(sf.SELF_PID_X86_64))
def test_pid_calls_only_on_itself(name):
    assert decide(nr(name), 0) == ALLOW
    assert decide(nr(name), OWN) == ALLOW
    assert decide(nr(name), 1) == DENY
    assert decide(nr(name), OWN + 1) == DENY
    assert decide(nr(name), (1 << 32) | 7) == DENY  # the kernel reads an int: only the low half


@pytest.mark.parametrize("name", sorted(sf.OWN_PID_ONLY_X86_64))
def test_signals_only_to_itself(name):
    assert decide(nr(name), OWN, 0) == ALLOW
    assert decide(nr(name), 0) == DENY  # kill(0): the zygote's process group
    assert decide(nr(name), 0xFFFFFFFF) == DENY  # kill(-1): every process it may signal
    assert decide(nr(name), 1) == DENY


@pytest.mark.parametrize("name", sorted(sf.PRIORITY_X86_64))
def test_priority_only_of_its_own_process(name):
    assert decide(nr(name), 0, 0) == ALLOW  # PRIO_PROCESS, itself
    assert decide(nr(name), 0, OWN) == ALLOW
    assert decide(nr(name), 0, 1) == DENY
    assert decide(nr(name), 1, 0) == DENY  # PRIO_PGRP: the zygote's group
    assert decide(nr(name), 2, 0) == DENY  # PRIO_USER: every process of the uid


def test_threads_but_no_processes_or_namespaces():
    thread = 0x3D0F00  # CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
    assert decide(nr("clone"), thread) == ALLOW
    assert decide(nr("clone"), 0x01200011) == DENY  # fork(): SIGCHLD|CHILD_SETTID|CHILD_CLEARTID
    assert decide(nr("clone"), thread | 0x40000000) == DENY  # a thread in a new network namespace
    assert decide(nr("clone"), thread | 0x00008000) == DENY  # CLONE_PARENT: a sibling of the zygote
    assert decide(nr("clone3"), 0) == ENOSYS  # glibc falls back to clone


def test_fcntl_flock_ioctl_prctl_by_command():
    fcntl, flock, ioctl, prctl = 72, 73, 16, 157
    for cmd in (0, 1, 2, 3, 5, 1030):  # dup, flags, get lock, dup cloexec
        assert decide(fcntl, 3, cmd, 0) == ALLOW
    assert decide(fcntl, 3, 4, 0o4000) == ALLOW  # F_SETFL O_NONBLOCK
    assert decide(fcntl, 3, 4, 0o20000) == DENY  # F_SETFL O_ASYNC: signals to an owner
    for cmd in (6, 7, 37, 38):  # locks: succeed, nothing taken (a host file stays unblocked)
        assert decide(fcntl, 3, cmd, 0) == DONE
    for cmd in (8, 10, 15, 1024, 1026, 1031, 1033):  # SETOWN SETSIG SETOWN_EX SETLEASE NOTIFY SETPIPE_SZ ADD_SEALS
        assert decide(fcntl, 3, cmd, 0) == DENY
    assert decide(flock, 3, 2) == DONE
    assert decide(ioctl, 1, 0x5401) == ALLOW  # TCGETS: isatty
    for cmd in (0x8901, 0x8902, 0x5452, 0x5412):  # FIOSETOWN SIOCSPGRP FIOASYNC TIOCSTI
        assert decide(ioctl, 1, cmd) == ENOTTY
    assert decide(prctl, 15) == ALLOW  # PR_SET_NAME
    for option in (62, 35, 36, 0x59616D61, 47):  # SCHED_CORE SET_MM CHILD_SUBREAPER SET_PTRACER CAP_AMBIENT
        assert decide(prctl, option) == DENY


def test_other_abis_are_refused():
    assert decide(0x40000000 + 1, 0) == DENY  # x32
    assert decide(0, 0, arch=0x40000003) == DENY  # i386


KERNEL = """
import json, os, resource, threading
from pytest_toolbench.sandbox.syscall_filter import SyscallFilter
parent = os.getppid()
ok, note = SyscallFilter().apply()
out = {"applied": ok}
""" + ATTEMPT + """
attempt("pipe", os.pipe)
attempt("memfd", lambda: os.memfd_create("x"))
attempt("kill_self", lambda: os.kill(os.getpid(), 0))
attempt("kill_parent", lambda: os.kill(parent, 0))
attempt("getpriority_parent", lambda: os.getpriority(os.PRIO_PROCESS, parent))
attempt("getpriority_self", lambda: os.getpriority(os.PRIO_PROCESS, 0))
attempt("prlimit_parent", lambda: resource.prlimit(parent, resource.RLIMIT_CORE))
attempt("prlimit_self", lambda: resource.prlimit(0, resource.RLIMIT_CORE))
attempt("affinity_parent", lambda: os.sched_getaffinity(parent))
box = []
t = threading.Thread(target=lambda: box.append(sum(range(10))))
t.start(); t.join()
out["thread"] = box == [45]
attempt("fork", os.fork)
import fcntl, sqlite3, tempfile
with tempfile.TemporaryDirectory() as d:
    con = sqlite3.connect(os.path.join(d, "db"))  # file locks faked: sqlite still works
    con.execute("create table t (x)"); con.execute("insert into t values (6)"); con.commit()
    out["sqlite"] = con.execute("select x * 7 from t").fetchone()[0]
    con.close()
    fd = os.open(os.path.join(d, "f"), os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    out["flock"] = "ok"
    attempt("notify", lambda: fcntl.fcntl(fd, 1026, 1))
out["isatty"] = os.isatty(0) in (True, False)
print(json.dumps(out))
"""


def test_the_filter_in_a_real_process():
    proc = subprocess.run([sys.executable, "-c", KERNEL], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["applied"] is True and got["thread"] is True
    eperm = errno.EPERM
    assert got["kill_self"] == got["getpriority_self"] == got["prlimit_self"] == "ok"
    assert got["sqlite"] == 42 and got["flock"] == "ok" and got["isatty"] is True
    for key in ("pipe", "memfd", "kill_parent", "getpriority_parent", "prlimit_parent", "affinity_parent", "fork",
                "notify"):
        assert got[key] == eperm, (key, got)


TRUNCATION = """
import json, os, sys
from pytest_toolbench.sandbox import policy
from pytest_toolbench.sandbox.syscall_filter import SyscallFilter
ro, own, refuse = sys.argv[1], sys.argv[2], sys.argv[3] == "refuse"
abi, _ = policy.Landlock([ro], max_abi=1).apply(own)  # Linux 5.13-5.18's: no truncation right
applied, _ = SyscallFilter(file_metadata=False, file_truncation=not refuse).apply()
out = {"landlock": abi, "filter": applied}
""" + ATTEMPT + """
target = os.path.join(ro, "precious")
attempt("open_for_writing", lambda: open(target, "w"))
attempt("truncate", lambda: os.truncate(target, 0))
attempt("open_rdonly_trunc", lambda: os.close(os.open(target, os.O_RDONLY | os.O_TRUNC)))
def own_file():
    with open(os.path.join(own, "notes"), "w") as f:
        f.write("twelve bytes")
        f.truncate(6)
attempt("own_file", own_file)
print(json.dumps(out))
"""


@pytest.mark.parametrize("refuse", [True, False], ids=["this-filter", "truncation-allowed"])
def test_truncation_on_a_kernel_whose_landlock_does_not_govern_it(tmp_path, refuse):
    """On this kernel, with the Landlock of ABI 1 (Linux 5.13-5.18: no truncation right) and no
    jail: the filter that leaves truncation to Landlock lets a call empty a file it may only
    read; this one refuses it, while the call still writes and truncates its own files."""
    from pytest_toolbench.sandbox import policy

    if not sf.SyscallFilter().available or not policy.landlock_abi():
        pytest.skip("needs Landlock and the x86_64 filter")
    ro, own = tmp_path / "read-only", tmp_path / "own"
    ro.mkdir()
    own.mkdir()
    (ro / "precious").write_text("nine bytes")
    proc = subprocess.run([sys.executable, "-c", TRUNCATION, str(ro), str(own), "refuse" if refuse else "allow"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["landlock"] == 1 and got["filter"] is True
    assert got["open_for_writing"] == errno.EACCES  # Landlock's, at every ABI
    assert got["own_file"] == "ok" and (own / "notes").read_text() == "twelve"
    if refuse:
        assert got["truncate"] == got["open_rdonly_trunc"] == errno.EPERM, got
        assert (ro / "precious").read_text() == "nine bytes"
    else:
        assert got["truncate"] == "ok" and (ro / "precious").read_text() == ""
