#!/usr/bin/env python3
"""Run the hostile tool corpus (the other files of this folder) through a real sandbox, from
anywhere, against whatever ``pytest_toolbench`` this Python imports (an installed harness):

    python tests/hostile_tools/run_corpus.py                    # every attack, all layers on
    python tests/hostile_tools/run_corpus.py --without-layers   # also each with its LAYERS off
    python tests/hostile_tools/run_corpus.py --each-layer       # and each of its LAYERS alone
    python tests/hostile_tools/run_corpus.py renice_other pipe_hoard

One line per attack: ``contained``, ``ESCAPED`` (and what got out) or ``BROKEN`` (the call did
not end as a result or a tool error, or a later innocent call failed). With ``--without-layers``
a second line says whether the attack got through once the layers it names were switched off
(proof that the attack is real and that those layers stop it). Exit status 0 when every attack
was contained (and, with ``--without-layers``, got through without its layers), 1 otherwise.

``tests/test_sandbox_attacks.py`` imports this module and asserts the same, per attack.

What an attack may aim at is made here, never the machine's own processes: a decoy process
(a sleeping Python) whose pid each attack gets as ``target_pid``, an abstract unix socket, a file name
in /dev/shm, a name for a process that would outlive its call; each attack gets a fresh pool
and a fresh decoy, and everything is removed afterwards. Host-side checks after each call: the
decoy's and the zygote's nice value, CPU affinity, scheduling policy, I/O priority, resource
limits, state and tracer; a SIGURG the decoy received (each named by sender and si_code; one
that a live process outside the harness's process tree sent is shown as a note, not counted);
host opens of a file the fanotify attacks aim at; the socket, the /dev/shm name, a process left
behind; then an innocent call, and a harmless tool whose result must be the same before and
after the attack.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "__main__":  # run as a script: the attack files here must not shadow any module
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]

import ast  # noqa: E402
import ctypes  # noqa: E402
import fcntl  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import secrets  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any, Iterator  # noqa: E402

JOB = "pytest_toolbench.benchmarks.toolhop.execution:call_tool"
PRELOAD = ("pytest_toolbench.benchmarks.toolhop.execution",)
#: The pool every attack runs in: a small memory and disk cap, so that the memory attacks
#: (which stop by themselves at the cap + 128 MiB, at most 1.5 GiB) prove their point cheaply.
LIMITS = dict(workers=1, cpu_seconds=10, output_cap=2000, disk_mb=16, disk_inodes=2000, memory_mb=128)
#: All the memory a call may hold: its address space, its disk, and 64 MiB of slack for what
#: the kernel keeps for it. An attack holding more (pipe buffers, memfds) got past the cap.
LIMIT_MB = LIMITS["memory_mb"] + LIMITS["disk_mb"] + 64
CALL_TIMEOUT_S = 30.0
DEADLINE_S = 90.0
ECHO = "def echo(text):\n    return {'echo': text}\n"
#: A harmless tool: what a call inherits from its zygote. Same result before and after any
#: hostile call, or that call changed the calls after it.
FINGERPRINT = '''def fingerprint():
    import os, resource
    out = {"nice": os.getpriority(os.PRIO_PROCESS, 0), "affinity": sorted(os.sched_getaffinity(0)),
           "scheduler": os.sched_getscheduler(0), "umask": os.umask(0o022)}
    out["rlimits"] = {name: list(resource.getrlimit(getattr(resource, name))) for name in (
        "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_MEMLOCK",
        "RLIMIT_NPROC", "RLIMIT_STACK", "RLIMIT_DATA", "RLIMIT_RTPRIO", "RLIMIT_NICE")}
    data = os.urandom(1 << 16)
    try:
        with open("fingerprint.bin", "wb") as f:
            f.write(data)
        with open("fingerprint.bin", "rb") as f:
            out["file"] = f.read() == data
    except OSError as exc:
        out["file"] = str(exc)
    return out
'''
#: Host requirements an attack may name in ``NEEDS`` (besides ``NEEDS_ROOT``).
KNOWN_NEEDS = ("user_namespaces", "io_uring", "CAP_SYS_RESOURCE", "ptrace")


# ----------------------------------------------------------------------------------- corpus


@dataclass(frozen=True)
class Attack:
    """One file of the corpus. ``layers`` is None for the earlier corpus (no claim: only the
    invariants hold), ``()`` for an attack that claims no layer (its ``escaped`` is reported,
    only host-side effects count), else the layers each of which stops it."""

    name: str
    source: str
    layers: tuple[str, ...] | None
    needs_root: bool
    needs: tuple[str, ...]
    params: tuple[str, ...]
    any_kwargs: bool

    def arguments(self, offered: dict[str, Any]) -> dict[str, Any]:
        return dict(offered) if self.any_kwargs else {k: v for k, v in offered.items() if k in self.params}


def first_def_name(source: str) -> str:
    """The tool's name as ToolHop finds it (the text between the first 'def' and '(')."""
    return source.split("def")[1].split("(")[0].strip()


def load_attack(path: str) -> Attack | None:
    """The attack in ``path``, or None if the file is not a tool (this runner)."""
    name = os.path.splitext(os.path.basename(path))[0]
    if path == os.path.abspath(__file__):
        return None
    with open(path, encoding="utf-8") as f:
        source = f.read()
    if "def" not in source or first_def_name(source) != name:
        return None
    tree = ast.parse(source)
    consts: dict[str, Any] = {}
    func = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and func is None:
            func = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            consts[node.targets[0].id] = ast.literal_eval(node.value)
    assert func is not None and func.name == name, path
    params = tuple(a.arg for a in (*func.args.args, *func.args.kwonlyargs))
    layers = consts.get("LAYERS")
    return Attack(name=name, source=source, layers=None if layers is None else tuple(layers),
                  needs_root=bool(consts.get("NEEDS_ROOT", False)), needs=tuple(consts.get("NEEDS", ())),
                  params=params, any_kwargs=func.args.kwarg is not None)


def load_corpus(folder: str = HERE) -> list[Attack]:
    out = []
    for entry in sorted(os.listdir(folder)):
        if entry.endswith(".py"):
            attack = load_attack(os.path.join(folder, entry))
            if attack is not None:
                out.append(attack)
    return out


# ------------------------------------------------------------------------------ host side

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_SYS_IOPRIO_GET = 252
_WATCHED_LIMITS = ("RLIMIT_CORE", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_AS", "RLIMIT_CPU")


def process_state(pid: int) -> dict[str, Any] | None:
    """What an attack could change in a process, read from outside (None: no such process)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
    if state in ("Z", "X", "x"):
        return {"state": "dead"}
    out: dict[str, Any] = {"state": "stopped" if state in ("T", "t") else "alive"}
    readers = {
        "nice": lambda: os.getpriority(os.PRIO_PROCESS, pid),
        "affinity": lambda: sorted(os.sched_getaffinity(pid)),
        "scheduler": lambda: os.sched_getscheduler(pid),
        "ioprio": lambda: _libc.syscall(_SYS_IOPRIO_GET, ctypes.c_long(1), ctypes.c_long(pid)),
    }
    for name in _WATCHED_LIMITS:
        readers[name] = lambda name=name: tuple(resource.prlimit(pid, getattr(resource, name)))
    for key, read in readers.items():
        try:
            out[key] = read()
        except OSError as exc:
            out[key] = f"unreadable ({exc.strerror})"
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            tracer = [line.split()[1] for line in f if line.startswith("TracerPid:")]
        out["tracer"] = int(tracer[0]) if tracer else 0
    except (OSError, ValueError):
        pass
    return out


def state_changes(what: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    if before is None or before.get("state") == "dead":
        return []
    if after is None or after.get("state") == "dead":
        return [f"{what} died"]
    return [f"{what}'s {key}: {before[key]} -> {after.get(key)}" for key in before if before[key] != after.get(key)]


def host_needs_unmet(attack: Attack) -> list[str]:
    """Why this machine cannot show the attack getting through even with its layers off."""
    why = []
    if attack.needs_root and os.geteuid() != 0:
        why.append("needs a harness running as root")
    for need in attack.needs:
        if need not in KNOWN_NEEDS:
            why.append(f"unknown need {need!r}")
        elif need.startswith("CAP_") and not _holds_capability(need):
            why.append(f"the harness does not hold {need}")
        elif need == "user_namespaces" and not _user_namespaces_allowed():
            why.append("this machine refuses user namespaces")
        elif need == "io_uring" and _read_int("/proc/sys/kernel/io_uring_disabled", 0) != 0:
            why.append("io_uring is disabled on this machine (kernel.io_uring_disabled)")
        elif need == "ptrace" and os.geteuid() != 0 and _read_int("/proc/sys/kernel/yama/ptrace_scope", 0) != 0:
            why.append("Yama (kernel.yama.ptrace_scope >= 1) lets an ordinary user trace only its own descendants")
    return why


_CAP_NUMBERS = {"CAP_SYS_RESOURCE": 24}


def _holds_capability(name: str) -> bool:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            eff = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        return False
    return bool(eff >> _CAP_NUMBERS[name] & 1)


def _read_int(path: str, default: int) -> int:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return default


def _user_namespaces_allowed() -> bool:
    code = ("import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
            "sys.exit(0 if libc.unshare(0x10000000) == 0 else 1)")
    return subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


_RARE_MODULES = ("this.py", "antigravity.py", "__hello__.py", "tabnanny.py", "mailcap.py", "nntplib.py",
                 "sndhdr.py", "xdrlib.py", "telnetlib.py", "uu.py", "chunk.py", "crypt.py", "imghdr.py",
                 "pipes.py", "cgitb.py", "nturl2path.py")


#: The decoy: a process outside the run that attacks may aim at. It says "r" once ready and, on
#: each SIGURG (the default action is to ignore it; here blocked and read from a signalfd), one
#: JSON line: the siginfo's si_pid, si_code and si_uid and what /proc says of the sender at
#: once, before it can end: gone (no such process, or one started after the signal came: the
#: pid was reused), else its command line, its ancestors (pid/comm) and whether one of them is
#: the harness (the decoy's parent, the process that runs this module, of which the pool's
#: zygotes and calls are descendants). ``Host.effects`` decides what counts as the attack's.
#: A byte on its stdin (the host's pipe, which no call holds) asks it to report every SIGURG
#: pending and then say "s": what a call sent is pending once the call is over, so none is
#: missed however slowly the decoy runs. It ends when its stdin closes or after 600 s.
#: Not sigtimedwait with a timeout: stopped and continued in it (EINTR) once the timeout has
#: passed, CPython returns a siginfo the kernel never filled, as if a SIGURG had come.
_DECOY = r"""import ctypes, json, os, select, signal, struct, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGURG})
HARNESS, TICK = os.getppid(), os.sysconf("SC_CLK_TCK")
mask = (ctypes.c_uint64 * 16)()
mask[0] = 1 << (signal.SIGURG - 1)
SFD = ctypes.CDLL(None, use_errno=True).signalfd(-1, mask, os.O_NONBLOCK | os.O_CLOEXEC)
if SFD < 0:
    raise OSError(ctypes.get_errno(), "signalfd")
def stat(pid):
    with open("/proc/%d/stat" % pid, "rb") as f:
        data = f.read()
    rest = data[data.rindex(b")") + 2:].split()
    return data[data.index(b"(") + 1:data.rindex(b")")].decode(errors="replace"), int(rest[1]), int(rest[19])
def sender(pid, now):
    if pid <= 0:
        return {"gone": True}
    try:
        comm, ppid, start = stat(pid)
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read(160).replace(b"\0", b" ").strip().decode(errors="replace")[:120]
    except (OSError, ValueError, IndexError):
        return {"gone": True}
    if start > now:
        return {"gone": True, "reused_by": comm}
    out = {"gone": False, "cmd": cmd or "[" + comm + "]", "harness": pid == HARNESS, "chain": []}
    seen = 0
    while ppid > 0 and seen < 64 and not out["harness"]:
        out["harness"], seen = ppid == HARNESS, seen + 1
        try:
            comm, next_ppid, _ = stat(ppid)
        except (OSError, ValueError, IndexError):
            out["chain"].append("%d/?" % ppid)
            break
        if len(out["chain"]) < 8:
            out["chain"].append("%d/%s" % (ppid, comm))
        ppid = next_ppid
    return out
def drain():
    while True:
        try:
            data = os.read(SFD, 128 * 8)
        except BlockingIOError:
            return
        now = int(time.clock_gettime(time.CLOCK_BOOTTIME) * TICK)
        for off in range(0, len(data) - 127, 128):
            signo, _, code, pid, uid, fd, _, band = struct.unpack_from("IiiIIiII", data, off)
            got = {"signo": signo, "pid": pid, "code": code, "uid": uid}
            if code in (0, -1, -6):  # SI_USER, SI_QUEUE, SI_TKILL: si_pid is the sender
                got.update(sender(pid, now))
            else:  # the kernel's: POLL_* (for an fd: si_band, si_fd), SI_KERNEL
                got.update(band=band, fd=fd)
            os.write(1, json.dumps(got).encode() + b"\n")
os.write(1, b"r")
end = time.monotonic() + 600
while time.monotonic() < end:
    ready = select.select([0, SFD], [], [], 1.0)[0]
    drain()
    if 0 in ready:
        asked = os.read(0, 64)
        if not asked:
            break
        drain()
        os.write(1, b"s\n" * len(asked))
"""
#: si_code of a SIGURG: sent by a process (si_pid names it), or raised by the kernel.
_SI_CODES = {0: "SI_USER", -1: "SI_QUEUE", -6: "SI_TKILL", 0x80: "SI_KERNEL", -5: "SI_SIGIO",
             1: "POLL_IN", 2: "POLL_OUT", 3: "POLL_MSG", 4: "POLL_ERR", 5: "POLL_PRI", 6: "POLL_HUP"}
_SENT_BY_A_PROCESS = (0, -1, -6)


def _describe_signal(got: dict[str, Any]) -> str:
    code = got.get("code")
    what = f"{_SI_CODES.get(code, code)}"
    if code not in _SENT_BY_A_PROCESS:  # raised by the kernel (an fd armed for the decoy)
        return f"{what} (raised by the kernel: fd {got.get('fd')}, band {got.get('band')})"
    who = f"pid {got.get('pid')} uid {got.get('uid')}"
    if not got.get("pid"):  # the kernel kept no sender (no queue entry for it, e.g. out of memory)
        return f"{what} from pid 0 (the kernel kept no sender)"
    if got.get("gone"):
        reused = f", its pid already reused by {got['reused_by']!r}" if got.get("reused_by") else ""
        return f"{what} from {who} (gone at receipt{reused})"
    chain = " < ".join(got.get("chain", [])) or "-"
    relation = ("the harness's own process" if got.get("pid") in (os.getpid(), os.getppid()) else
                "a descendant of the harness" if got.get("harness") else "NOT a descendant of the harness")
    return f"{what} from {who} {got.get('cmd', '')!r} ({relation}; parents {chain})"


class Host:
    """What one attack may aim at outside the sandbox, made fresh for it, and the checks that
    nothing outside changed. A context manager: everything is removed on exit."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(6)
        self.decoy = subprocess.Popen([sys.executable, "-I", "-S", "-c", _DECOY], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.decoy.stdout is not None
        self._decoy_out = self.decoy.stdout.fileno()
        ready = select.select([self._decoy_out], [], [], 30)[0] and os.read(self._decoy_out, 1)
        if ready != b"r":
            self.decoy.kill()
            raise RuntimeError("the decoy process did not start")
        os.set_blocking(self._decoy_out, False)
        self._decoy_buf = b""
        self._syncs = [0, 0]  # asked of the decoy, answered
        #: What the host saw but does not count against the attack (a SIGURG from a process
        #: that is provably none of the run's); ``run_attack`` shows it in the result.
        self.notes: list[str] = []
        # A core-file limit of its own, which an attack lowering it visibly changes.
        resource.prlimit(self.decoy.pid, resource.RLIMIT_CORE, (0, 1 << 20))
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind("\0toolbench-canary-" + self.token)
        self.listener.listen(8)
        self.listener.setblocking(False)
        self.shm_path = "/dev/shm/toolbench-attack-" + self.token
        self.comm = ("tbo-" + self.token)[:15]
        # A standard-library file nothing imports, one of several: runs side by side (xdist)
        # each watch their own, so that one's permission mark never refuses another's opens.
        stdlib = os.path.dirname(os.__file__)
        rare = [n for n in _RARE_MODULES if os.path.isfile(os.path.join(stdlib, n))] or ["os.py"]
        self.watched_file = os.path.join(stdlib, secrets.choice(rare))
        self.refused_opens = 0
        self.blocked = {"flock": 0, "open for writing": 0, "POSIX write lock": 0}
        self._stop = threading.Event()

    def arguments(self) -> dict[str, Any]:
        return {"target_pid": self.decoy.pid, "harness_pid": os.getpid(), "limit_mb": LIMIT_MB,
                "token": self.token, "seconds": 1.5, "watched": os.path.basename(self.watched_file)}

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.decoy.kill()
        self.decoy.wait()
        self.decoy.stdout.close()  # type: ignore[union-attr]
        self.decoy.stdin.close()  # type: ignore[union-attr]
        self.listener.close()
        self.effects()  # removes what an attack left (the /dev/shm file, a process that outlived it)

    def activity(self) -> threading.Thread:
        """Host file activity while an attack runs, every 20 ms: opens and reads
        ``watched_file`` (what the watching attacks would see, and what a permission mark
        would block), takes an exclusive flock on it for a moment, opens it to write (never
        writing) and write-locks it for a moment: a lock or a lease held by a call blocks these."""
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(0.02):
                try:
                    with open(self.watched_file, "rb") as f:
                        f.read(64)
                        try:  # a moment's exclusive lock, as a host process locking it would
                            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
                        except BlockingIOError:
                            self.blocked["flock"] += 1
                except PermissionError:
                    self.refused_opens += 1
                except OSError:
                    pass
                try:  # opened to write (never written): a lease held on it makes this wait
                    fd = os.open(self.watched_file, os.O_WRONLY | os.O_NONBLOCK)
                except BlockingIOError:
                    self.blocked["open for writing"] += 1
                    continue
                except OSError:
                    continue
                try:  # and a moment's POSIX write lock, as SQLite takes on its files
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.lockf(fd, fcntl.LOCK_UN)
                except (BlockingIOError, PermissionError):
                    self.blocked["POSIX write lock"] += 1
                except OSError:
                    pass
                finally:
                    os.close(fd)
        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        return thread

    def stop_activity(self, thread: threading.Thread) -> None:
        self._stop.set()
        thread.join(5)

    def effects(self) -> list[str]:
        """What an attack changed outside the sandbox that the host can see (and undoes it)."""
        out = []
        counted, ignored = self._decoy_signals()
        if counted:
            out.append(f"the decoy received SIGURG {len(counted)} times: {'; '.join(counted)}")
        if ignored:
            self.notes.append(f"the decoy received SIGURG {len(ignored)} times from the harness or from "
                              f"processes provably outside the run, not counted: {'; '.join(ignored)}")
        if self.refused_opens:
            out.append(f"{self.refused_opens} host opens of {self.watched_file} were refused")
            self.refused_opens = 0
        for what, count in self.blocked.items():
            if count:
                out.append(f"the host's {what} of {self.watched_file} was blocked {count} times")
                self.blocked[what] = 0
        try:
            conn, _ = self.listener.accept()
            conn.close()
            out.append("a call connected to the harness's abstract unix socket")
        except (BlockingIOError, OSError):
            pass
        if os.path.lexists(self.shm_path):
            out.append(f"a call wrote {self.shm_path}")
            try:
                os.unlink(self.shm_path)
            except OSError:
                pass
        for pid in self._outliving():
            out.append(f"process {pid} ({self.comm}) outlived its call")
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return out

    def _decoy_signals(self) -> tuple[list[str], list[str]]:
        """The SIGURGs the decoy reported since the last look: (the attack's, others').

        The attack's: every one the kernel raised (POLL_IN..POLL_HUP through F_SETOWN and
        F_SETSIG, or SI_KERNEL: only an fd armed for the decoy causes those), and every one a
        process sent that was gone when the decoy looked or descends from the harness (the
        pool's zygotes and calls do). Others': one sent by the harness itself or its parent, or
        by a process alive at receipt and provably no descendant of the harness (another test
        worker's, the machine's)."""
        lines = self._decoy_lines(sync=True)
        counted, ignored = [], []
        for line in lines:
            if line == b"s":
                continue
            try:
                got = json.loads(line)
            except ValueError:
                counted.append(f"unreadable report {line[:200]!r}")
                continue
            text = _describe_signal(got)
            if got.get("code") not in _SENT_BY_A_PROCESS or got.get("gone"):
                counted.append(text)
            elif got.get("pid") in (os.getpid(), os.getppid()):
                ignored.append(text)
            elif got.get("harness"):
                counted.append(text)
            else:
                ignored.append(text)
        return counted, ignored

    def _decoy_lines(self, sync: bool, timeout_s: float = 10.0) -> list[bytes]:
        """The decoy's lines since the last look; with ``sync``, once it has reported every
        SIGURG pending (unless it is dead or stopped, or does not answer in ``timeout_s``)."""
        lines: list[bytes] = []
        if sync and (process_state(self.decoy.pid) or {}).get("state") == "alive":
            try:
                os.write(self.decoy.stdin.fileno(), b"s")  # type: ignore[union-attr]
                self._syncs[0] += 1
            except OSError:
                sync = False
        else:
            sync = False
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                chunk = os.read(self._decoy_out, 65536)
            except BlockingIOError:
                chunk = None
            except OSError:
                chunk = b""
            if chunk:
                self._decoy_buf += chunk
                *done, self._decoy_buf = self._decoy_buf.split(b"\n")
                lines += done
                self._syncs[1] += done.count(b"s")
                continue
            left = deadline - time.monotonic()
            if sync and left <= 0 and self._syncs[1] < self._syncs[0]:
                self.notes.append(f"the decoy did not answer in {timeout_s:g} s: a SIGURG it had not "
                                  "reported by then is not seen")
            if chunk == b"" or not sync or self._syncs[1] >= self._syncs[0] or left <= 0:
                return lines
            select.select([self._decoy_out], [], [], min(left, 0.5))

    def _outliving(self) -> Iterator[int]:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/comm", encoding="utf-8", errors="replace") as f:
                        if f.read().strip() == self.comm:
                            yield int(entry)
                except OSError:
                    pass


# --------------------------------------------------------------------------------- calls


@dataclass
class Result:
    name: str
    layers_off: tuple[str, ...]
    status: str = ""  # the call's outcome: ok, crashed, timeout
    tool_escaped: bool = False  # what the tool said it achieved
    tool_detail: str = ""
    effects: list[str] = field(default_factory=list)  # what the host saw changed
    problems: list[str] = field(default_factory=list)  # invariants that did not hold
    claims_layers: bool = True  # False: the tool's own "escaped" is reported, not counted
    notes: list[str] = field(default_factory=list)  # what the host saw that is not the attack's

    @property
    def escaped(self) -> bool:
        return bool(self.effects) or (self.tool_escaped and self.claims_layers)

    def verdict(self) -> str:
        if self.problems:
            return "BROKEN"
        return "ESCAPED" if self.escaped else "contained"

    def why(self) -> str:
        parts = [*self.problems, *self.effects]
        if self.tool_detail:
            said = ("escaped" if self.tool_escaped else "contained") if self.claims_layers else (
                f"no layer claimed, reports {'success' if self.tool_escaped else 'failure'}")
            parts.append(f"tool ({self.status}, {said}): {self.tool_detail}")
        elif self.status and self.status != "ok":
            parts.append(f"call {self.status}")
        parts += (f"note: {note}" for note in self.notes)
        return "; ".join(parts)


def call(pool: Any, source: str, name: str, arguments: dict[str, Any] | None = None,
         timeout_s: float = CALL_TIMEOUT_S, deadline_s: float = DEADLINE_S) -> Any:
    """One ToolHop tool call, in a thread: a sandbox that strands its caller raises
    TimeoutError after ``deadline_s`` instead of hanging."""
    box: dict[str, Any] = {}
    payload = {"functions": [source], "name": name, "arguments": json.dumps(arguments or {})}

    def target() -> None:
        try:
            box["out"] = pool.run(JOB, payload, timeout_s)
        except BaseException as exc:  # noqa: BLE001 - raised below, in the caller
            box["exc"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(deadline_s)
    if thread.is_alive():
        raise TimeoutError(f"sandbox call to {name} still blocked after {deadline_s} s")
    if "exc" in box:
        raise box["exc"]
    return box["out"]


def outcome_problems(out: Any, cap: int) -> list[str]:
    """The invariants of any call: a result or a tool error a model may be shown (the runner's
    shape, within the cap, no harness traceback)."""
    import typing

    from pytest_toolbench.sandbox import SandboxOutcome

    # ok, timeout, crashed; and where the harness has it, "unavailable": a zygote gone (which
    # the host-side checks report as an effect of the call when the call killed it)
    statuses = typing.get_args(SandboxOutcome.model_fields["status"].annotation) or ("ok", "crashed", "timeout")
    problems = []
    if out.status not in statuses:
        problems.append(f"status {out.status!r}")
    if "Traceback" in out.detail or len(out.detail) > cap + 40:
        problems.append(f"detail not fit for a model: {out.detail[:200]!r}")
    if out.status == "ok":
        value = out.value
        if not (isinstance(value, dict) and set(value) == {"content", "raised", "exception_type"}
                and isinstance(value["content"], str) and isinstance(value["raised"], bool)
                and len(value["content"]) <= cap + 40):
            problems.append(f"reply of the wrong shape: {str(value)[:200]}")
    return problems


def _tool_said(out: Any) -> tuple[bool, str]:
    if out.status != "ok":
        return False, ""
    content = out.value["content"]
    if out.value["raised"]:
        return False, content[:300]
    try:
        said = json.loads(content)
    except ValueError:
        return False, content[:300]
    if isinstance(said, dict) and "escaped" in said:
        return bool(said["escaped"]), str(said.get("detail", ""))[:400]
    return False, content[:300]


def make_pool(layers_off: tuple[str, ...] = ()) -> Any:
    from pytest_toolbench.config import SandboxLimits
    from pytest_toolbench.sandbox import ToolSandbox

    if layers_off:
        # Without bwrap too: in front of the zygote (where installed) its own PID, network and
        # user namespaces and its small root would stop the attack, and the run would not show
        # that the layers it names are what stop it.
        return ToolSandbox(SandboxLimits(**LIMITS, insecure=True), preload=PRELOAD, disable_layers=layers_off,
                           use_bubblewrap=False)
    return ToolSandbox(SandboxLimits(**LIMITS), preload=PRELOAD)


def run_attack(attack: Attack, without_layers: bool = False, keep: str | None = None) -> Result:
    """The attack in a fresh pool (all layers on; or with its LAYERS and the audit hook off;
    or, with ``keep``, all of those off but that one layer), with a fresh decoy: what it
    achieved, what the host saw, and the invariants."""
    layers_off: tuple[str, ...] = ()
    if without_layers or keep:
        layers_off = tuple(x for x in dict.fromkeys((*(attack.layers or ()), "audit_hook")) if x != keep)
    result = Result(attack.name, layers_off, claims_layers=bool(attack.layers))
    with Host() as host, make_pool(layers_off) as pool:
        before = call(pool, FINGERPRINT, "fingerprint")
        if before.status != "ok" or before.value["raised"]:
            result.problems.append(f"the harmless tool failed before the attack: {before}")
            return result
        zygotes = {pid: process_state(pid) for pid in pool.worker_pids()}
        decoy = process_state(host.decoy.pid)
        activity = host.activity()
        try:
            out = call(pool, attack.source, attack.name, attack.arguments(host.arguments()))
        except TimeoutError as exc:
            result.problems.append(str(exc))
            return result
        finally:
            host.stop_activity(activity)
        result.status = out.status
        result.problems += outcome_problems(out, LIMITS["output_cap"])
        result.tool_escaped, result.tool_detail = _tool_said(out)
        if out.status != "ok" and not result.tool_detail:
            result.tool_detail = out.detail[:300]
        time.sleep(0.05)  # a zygote killed by the call: let it be seen dead
        for pid, state in zygotes.items():
            result.effects += state_changes(f"the zygote {pid}", state, process_state(pid))
        result.effects += state_changes("the decoy", decoy, process_state(host.decoy.pid))
        result.effects += host.effects()
        result.notes += host.notes
        echo = call(pool, ECHO, "echo", {"text": "hello"})
        if echo.status != "ok" or echo.value["content"] != '{"echo": "hello"}':
            result.problems.append(f"the next innocent call failed: {echo.status} {echo.detail[:200]}")
        after = call(pool, FINGERPRINT, "fingerprint")
        if after.status != "ok" or after.value != before.value:
            got = after.value["content"] if after.status == "ok" else after.detail
            result.effects.append(f"a later call differs: {before.value['content']} -> {got}")
    return result


# ----------------------------------------------------------------------------------- main


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="attacks to run (default: all)")
    parser.add_argument("--without-layers", action="store_true",
                        help="also run each attack with the layers it names switched off")
    parser.add_argument("--each-layer", action="store_true",
                        help="also run each attack once per layer it names, with only that one of "
                             "them on: does that layer alone stop it?")
    args = parser.parse_args(argv)
    corpus = load_corpus()
    unknown = set(args.names) - {a.name for a in corpus}
    if unknown:
        parser.error(f"no such attack: {', '.join(sorted(unknown))}")
    import pytest_toolbench

    print(f"pytest_toolbench from {os.path.dirname(pytest_toolbench.__file__)}; "
          f"euid {os.geteuid()}; {len(corpus)} tools in {HERE}", flush=True)
    failed = 0
    for attack in corpus:
        if args.names and attack.name not in args.names:
            continue
        try:
            result = run_attack(attack)
            verdict, why = result.verdict(), result.why()
        except Exception as exc:  # noqa: BLE001 - one line per attack, whatever happens
            verdict, why = "BROKEN", f"{type(exc).__name__}: {exc}"
        failed += verdict != "contained"
        print(f"{attack.name:24} {verdict:9} {why}", flush=True)
        if args.without_layers and attack.layers:
            unmet = host_needs_unmet(attack)
            if unmet:
                print(f"{'':24} {'skipped':9} without {', '.join(attack.layers)}: {'; '.join(unmet)}")
                continue
            try:
                off = run_attack(attack, without_layers=True)
                ok, why = off.escaped and not off.problems, off.why()
            except Exception as exc:  # noqa: BLE001
                ok, why = False, f"{type(exc).__name__}: {exc}"
            failed += not ok
            word = "got through" if ok else "NOT THROUGH"
            print(f"{'':24} {word:9} without {', '.join(attack.layers)}: {why}", flush=True)
        if args.each_layer and attack.layers and len(attack.layers) > 1:
            for layer in attack.layers:
                try:
                    alone = run_attack(attack, keep=layer)
                    ok, why = not alone.escaped and not alone.problems, alone.why()
                except Exception as exc:  # noqa: BLE001
                    ok, why = False, f"{type(exc).__name__}: {exc}"
                failed += not ok
                word = "held" if ok else "NOT HELD"
                print(f"{'':24} {word:9} {layer} alone: {why}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
