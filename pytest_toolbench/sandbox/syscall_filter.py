"""The per-call seccomp filter: an allowlist of system calls, with the pid a call may name.

Why an allowlist: a blocklist misses what nobody thought of (``fanotify_mark`` watching every
file on a mount, ``clock_adjtime`` setting the clock, ``syslog`` reading the kernel log were
all allowed by the first filter). Every system call not named here fails with ``EPERM``; the
list is what CPython and the standard library use to run a tool's Python: files (Landlock says
which), memory, time, signals and threads of the call's own process.

Why pid rules: a call shares its uid with the harness (and, as root, with every root process),
and the kernel lets a process renice, re-pin, prlimit or signal any process of its own uid
without a capability. Where a PID namespace hides the other processes this is a second line;
where none can be had (an ordinary user without user namespaces) it is the line: every call
that names a pid (``kill``, ``tgkill``, ``setpriority``, ``prlimit64``, ``sched_set*``...) is
allowed only on the call's own process (``0`` or its own pid).

Memory a call could hold outside its address-space limit is refused at the source: no
``pipe``/``pipe2``/``splice`` (pipe buffers), no ``memfd_create``, no SysV or POSIX shared
memory, no ``mlock``. Classic BPF, x86_64 only (the number table below); stdlib only (the
worker imports it before anything else).
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Iterable

#: x86_64 system call numbers (``asm/unistd_64.h``) of the calls a tool's process may make.
ALLOWED_X86_64: dict[str, int] = {
    # files (Landlock decides which paths; the jail decides which exist)
    "read": 0, "write": 1, "open": 2, "close": 3, "stat": 4, "fstat": 5, "lstat": 6, "poll": 7,
    "lseek": 8, "pread64": 17, "pwrite64": 18, "readv": 19, "writev": 20,
    "access": 21, "select": 23, "dup": 32, "dup2": 33, "sendfile": 40,
    "fsync": 74, "fdatasync": 75, "truncate": 76, "ftruncate": 77, "getdents": 78, "getcwd": 79,
    "chdir": 80, "fchdir": 81, "rename": 82, "mkdir": 83, "rmdir": 84, "creat": 85, "link": 86,
    "unlink": 87, "symlink": 88, "readlink": 89, "chmod": 90, "fchmod": 91, "umask": 95,
    "statfs": 137, "fstatfs": 138, "readahead": 187, "getxattr": 191, "lgetxattr": 192,
    "fgetxattr": 193, "listxattr": 194, "llistxattr": 195, "flistxattr": 196, "getdents64": 217,
    "fadvise64": 221, "utimes": 235, "utime": 132, "openat": 257, "mkdirat": 258,
    "futimesat": 261, "newfstatat": 262, "unlinkat": 263, "renameat": 264, "linkat": 265,
    "symlinkat": 266, "readlinkat": 267, "fchmodat": 268, "faccessat": 269, "pselect6": 270,
    "ppoll": 271, "sync_file_range": 277, "utimensat": 280, "fallocate": 285, "dup3": 292,
    "preadv": 295, "pwritev": 296, "renameat2": 316, "copy_file_range": 326, "preadv2": 327,
    "pwritev2": 328, "statx": 332, "close_range": 436, "openat2": 437, "faccessat2": 439,
    # memory of its own address space (capped by RLIMIT_AS and, where there is one, the cgroup)
    "mmap": 9, "mprotect": 10, "munmap": 11, "brk": 12, "mremap": 25, "msync": 26,
    "mincore": 27, "madvise": 28, "membarrier": 324, "pkey_mprotect": 329, "pkey_alloc": 330,
    "pkey_free": 331,
    # signals and timers of its own process
    "rt_sigaction": 13, "rt_sigprocmask": 14, "rt_sigreturn": 15, "pause": 34, "getitimer": 36,
    "alarm": 37, "setitimer": 38, "rt_sigpending": 127, "rt_sigtimedwait": 128,
    "rt_sigsuspend": 130, "sigaltstack": 131, "timer_create": 222, "timer_settime": 223,
    "timer_gettime": 224, "timer_getoverrun": 225, "timer_delete": 226, "signalfd": 282,
    "timerfd_create": 283, "timerfd_settime": 286, "timerfd_gettime": 287, "signalfd4": 289,
    "eventfd": 284, "eventfd2": 290, "epoll_create": 213, "epoll_wait": 232, "epoll_ctl": 233,
    "epoll_pwait": 281, "epoll_create1": 291, "epoll_pwait2": 441,
    # time (reading it; setting it is refused)
    "nanosleep": 35, "gettimeofday": 96, "time": 201, "clock_gettime": 228, "clock_getres": 229,
    "clock_nanosleep": 230, "times": 100,
    # threads of its own process (clone is checked below) and their bookkeeping
    "sched_yield": 24, "futex": 202, "set_tid_address": 218, "restart_syscall": 219,
    "set_robust_list": 273, "arch_prctl": 158, "rseq": 334, "futex_waitv": 449, "gettid": 186,
    "exit": 60, "exit_group": 231, "wait4": 61, "waitid": 247,
    # what it may know of itself
    "getpid": 39, "getppid": 110, "getpgrp": 111, "uname": 63, "getrlimit": 97, "setrlimit": 160,
    "getrusage": 98, "getuid": 102, "getgid": 104, "geteuid": 107, "getegid": 108,
    "getgroups": 115, "getresuid": 118, "getresgid": 120, "sched_get_priority_max": 146,
    "sched_get_priority_min": 147, "getcpu": 309, "getrandom": 318,
}

#: Calls that change a file's mode or times. Landlock does not govern them (it has no right for
#: file metadata): on the host's tree a call could ``chmod``/``utime`` any file of the harness's
#: uid, the project, its ``.venv`` and the home folder included (``chmod 644 ~/.ssh/id_rsa``
#: hands a key to every user of the machine). In the jail everything but the call's own
#: directory is read-only (EROFS), so they stay allowed there; without a jail they are refused.
FILE_METADATA_X86_64: tuple[str, ...] = ("chmod", "fchmod", "fchmodat", "utime", "utimes",
                                         "futimesat", "utimensat")

#: Truncation Landlock governs from ABI 3 only (``LANDLOCK_ACCESS_FS_TRUNCATE``, Linux 6.2): below
#: it a call opening a file it may only read with ``O_RDONLY | O_TRUNC`` (Linux truncates it),
#: or naming it to ``truncate``, empties any file of the harness's uid on the host's tree (the
#: project's ``.venv``; as root, the Python installation). In the jail those files are on
#: read-only mounts (EROFS); without one, on kernels 5.13-6.1, the filter refuses both: an
#: ``open``/``openat`` that truncates without opening for writing, and ``truncate`` by path (a
#: call truncates its own files through a descriptor it opened for writing: ``ftruncate``).
#: ``openat2`` keeps its flags in a structure the filter cannot read: ENOSYS (CPython and glibc
#: never need it).
_OPEN, _OPENAT, _OPENAT2, _TRUNCATE = (ALLOWED_X86_64[name] for name in ("open", "openat", "openat2", "truncate"))
_O_TRUNC, _O_ACCMODE, _O_WRONLY, _O_RDWR = 0o1000, 3, 1, 2

#: Calls allowed only when the pid they name (their first argument) is the caller's own:
#: ``0`` (itself) or its own pid. ``kill`` takes only its own pid: ``0`` is its process group
#: (the zygote's), ``-1`` every process it may signal.
SELF_PID_X86_64: dict[str, int] = {
    "getpgid": 121, "getsid": 124, "prlimit64": 302, "sched_setparam": 142,
    "sched_getparam": 143, "sched_setscheduler": 144, "sched_getscheduler": 145,
    "sched_rr_get_interval": 148, "sched_setaffinity": 203, "sched_getaffinity": 204,
    "sched_setattr": 314, "sched_getattr": 315,
}
OWN_PID_ONLY_X86_64: dict[str, int] = {"kill": 62, "tgkill": 234}
#: ``getpriority``/``setpriority(which, who)``: only ``PRIO_PROCESS`` of itself (``PRIO_USER``
#: would renice every process of the uid, ``PRIO_PGRP`` the zygote's group).
PRIORITY_X86_64: dict[str, int] = {"getpriority": 140, "setpriority": 141}
_CLONE, _CLONE3 = 56, 435

# Calls allowed with some of their commands only (the command is an argument, so the filter
# reads it). fcntl: the file's own flags and descriptors; a lock succeeds without being taken
# (a shared lock on a read-only host file would block the host's writers; a call is one process,
# so nothing of its own needs one); no F_NOTIFY (dnotify: it would learn of every host read in a
# folder it may read), F_SETLEASE (a lease blocks the host's writers), F_SETOWN/F_SETSIG or
# O_ASYNC (the kernel would signal a process it names), seals or pipe sizes.
_FCNTL, _FLOCK, _IOCTL, _PRCTL = 72, 73, 16, 157
_F_SETFL, _O_ASYNC = 4, 0o20000
FCNTL_ALLOWED = (0, 1, 2, 3, 5, 9, 11, 16, 36, 1030, 1032)  # DUPFD GETFD SETFD GETFL GETLK GETOWN GETSIG GETOWN_EX OFD_GETLK DUPFD_CLOEXEC GETPIPE_SZ
FCNTL_FAKED = (6, 7, 37, 38)  # F_SETLK F_SETLKW F_OFD_SETLK F_OFD_SETLKW: "done", nothing locked
#: ioctl: what Python's io asks a file (isatty, size of a read, blocking mode, close-on-exec);
#: no FIOSETOWN/SIOCSPGRP/FIOASYNC (signals to another process), no TIOCSTI (typing into a tty).
IOCTL_ALLOWED = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)
#: prctl: its own name, dumpable flag, death signal, seccomp/no_new_privs (only ever narrower),
#: timer slack, THP, speculation control, anonymous VMA names; not PR_SCHED_CORE (names a pid),
#: PR_SET_MM, PR_SET_PTRACER, PR_SET_CHILD_SUBREAPER, PR_CAP_AMBIENT...
PRCTL_ALLOWED = (1, 2, 3, 4, 15, 16, 21, 22, 23, 27, 29, 30, 38, 39, 40, 41, 42, 52, 53, 0x53564D41)
_AUDIT_ARCH_X86_64 = 0xC000003E
_CLONE_THREAD = 0x00010000
#: CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | CLONE_PARENT...
#: what a thread never needs: a new namespace or a sibling of the zygote.
_CLONE_REFUSED = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00008000

# Classic BPF opcodes and seccomp return values.
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K, _AND_K = 0x20, 0x15, 0x35, 0x45, 0x06, 0x54
_ALLOW = 0x7FFF0000
_DENY = 0x00050000 | errno.EPERM
_ENOSYS = 0x00050000 | errno.ENOSYS
_ENOTTY = 0x00050000 | errno.ENOTTY
_DONE = 0x00050000  # SECCOMP_RET_ERRNO with errno 0: the call returns 0 and the kernel does nothing
_NR, _ARCH, _ARG0, _ARG1, _ARG2 = 0, 4, 16, 24, 32  # offsets in struct seccomp_data (low 32 bits)

Insn = tuple[int, int, int, int]


def _ret(value: int) -> Insn:
    return (_RET_K, 0, 0, value)


def _ld(offset: int) -> Insn:
    return (_LD_W_ABS, 0, 0, offset)


def _pid_block(own_pid: int, allow_zero: bool) -> list[Insn]:
    """Allow when the first argument (a pid) is the caller's own, or 0 (itself) if ``allow_zero``."""
    own = own_pid & 0xFFFFFFFF
    if allow_zero:
        return [_ld(_ARG0), (_JEQ_K, 2, 0, 0), (_JEQ_K, 1, 0, own), _ret(_DENY), _ret(_ALLOW)]
    return [_ld(_ARG0), (_JEQ_K, 1, 0, own), _ret(_DENY), _ret(_ALLOW)]


def _priority_block(own_pid: int) -> list[Insn]:
    """``which == PRIO_PROCESS`` and ``who`` is 0 or the caller's pid."""
    return [
        _ld(_ARG0), (_JEQ_K, 0, 3, 0),
        _ld(_ARG1), (_JEQ_K, 2, 0, 0), (_JEQ_K, 1, 0, own_pid & 0xFFFFFFFF),
        _ret(_DENY), _ret(_ALLOW),
    ]


def _clone_block() -> list[Insn]:
    return [
        _ld(_ARG0),
        (_JSET_K, 0, 2, _CLONE_THREAD),  # a thread: check its flags; a process: deny
        (_JSET_K, 1, 0, _CLONE_REFUSED),
        _ret(_ALLOW),
        _ret(_DENY),
    ]


def _command_block(offset: int, allowed: Iterable[int], faked: Iterable[int] = (),
                   masked: dict[int, tuple[int, int]] | None = None, refuse: int = _DENY) -> list[Insn]:
    """The argument at ``offset`` (a command) decides: allowed, faked (returns 0, nothing done),
    ``masked`` (value -> (offset of another argument, bits it may not have)), else ``refuse``.
    Each test is followed by its own return: every jump is short."""
    block = [_ld(offset)]
    for value in allowed:
        block += [(_JEQ_K, 0, 1, value), _ret(_ALLOW)]
    for value in faked:
        block += [(_JEQ_K, 0, 1, value), _ret(_DONE)]
    for value, (other, bits) in (masked or {}).items():
        block += [(_JEQ_K, 0, 4, value), _ld(other), (_JSET_K, 0, 1, bits), _ret(refuse), _ret(_ALLOW)]
    return block + [_ret(refuse)]


def _truncating_open_block(flags: int) -> list[Insn]:
    """An open whose flags (at ``flags``) truncate is allowed only when it opens for writing,
    which Landlock governs at every ABI."""
    return [
        _ld(flags), (_JSET_K, 1, 0, _O_TRUNC), _ret(_ALLOW),
        (_AND_K, 0, 0, _O_ACCMODE), (_JEQ_K, 2, 0, _O_WRONLY), (_JEQ_K, 1, 0, _O_RDWR),
        _ret(_DENY), _ret(_ALLOW),
    ]


def _guarded(nr: int, block: list[Insn]) -> list[Insn]:
    """``if nr == N: <block>`` (the block ends in returns); the number is reloaded after it."""
    return [(_JEQ_K, 0, len(block), nr), *block]


def program(own_pid: int, file_metadata: bool = True, file_truncation: bool = True) -> list[Insn]:
    """The filter for a process whose pid (as it sees itself) is ``own_pid``. Jumps stay short
    (each test is followed by its own return), so the program can grow without 8-bit overflows.
    ``file_metadata``: whether :data:`FILE_METADATA_X86_64` are allowed (only in the jail);
    ``file_truncation``: whether truncation is left to Landlock (in the jail, or ABI >= 3;
    see ``_TRUNCATE``)."""
    prog: list[Insn] = [
        _ld(_ARCH), (_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64), _ret(_DENY),
        _ld(_NR), (_JGE_K, 0, 1, 0x40000000), _ret(_DENY),  # the x32 ABI
        (_JEQ_K, 0, 1, _CLONE3), _ret(_ENOSYS),  # glibc falls back to clone(), checked below
    ]

    def reload(blocks: Iterable[list[Insn]]) -> None:
        for block in blocks:
            prog.extend(block)
            prog.append(_ld(_NR))

    reload(_guarded(nr, _pid_block(own_pid, allow_zero=True)) for nr in SELF_PID_X86_64.values())
    reload(_guarded(nr, _pid_block(own_pid, allow_zero=False)) for nr in OWN_PID_ONLY_X86_64.values())
    reload(_guarded(nr, _priority_block(own_pid)) for nr in PRIORITY_X86_64.values())
    reload([_guarded(_CLONE, _clone_block())])
    reload([_guarded(_FCNTL, _command_block(_ARG1, FCNTL_ALLOWED, FCNTL_FAKED, {_F_SETFL: (_ARG2, _O_ASYNC)}))])
    reload([[(_JEQ_K, 0, 1, _FLOCK), _ret(_DONE)]])
    reload([_guarded(_IOCTL, _command_block(_ARG1, IOCTL_ALLOWED, refuse=_ENOTTY))])
    reload([_guarded(_PRCTL, _command_block(_ARG0, PRCTL_ALLOWED))])
    refused = set() if file_metadata else {ALLOWED_X86_64[name] for name in FILE_METADATA_X86_64}
    if not file_truncation:
        reload([_guarded(_OPEN, _truncating_open_block(_ARG1)), _guarded(_OPENAT, _truncating_open_block(_ARG2)),
                [(_JEQ_K, 0, 1, _OPENAT2), _ret(_ENOSYS)]])
        refused.add(_TRUNCATE)
    for nr in sorted(set(ALLOWED_X86_64.values()) - refused):
        prog += [(_JEQ_K, 0, 1, nr), _ret(_ALLOW)]
    prog.append(_ret(_DENY))
    return prog


def _check_jumps(prog: list[Insn]) -> None:
    """Self-check of the hand-laid jumps: every jump lands inside the program (the kernel
    would refuse the filter, and every call would then run without it)."""
    for i, (code, jt, jf, _) in enumerate(prog):
        if code in (_JEQ_K, _JGE_K, _JSET_K):
            assert i + 1 + max(jt, jf) < len(prog), f"seccomp jump out of the program at {i}"
    assert len(prog) < 4096


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


#: A pid no real process has: the placeholder the template carries until a child patches in its own.
_PLACEHOLDER_PID = 0x7FFFFFF0


class SyscallFilter:
    """Compiled once in the zygote with a placeholder pid; each per-call child patches in its
    own pid (a few words of the inherited array) and installs it last, after every privileged
    step of the confinement. Building the program in every child cost a millisecond a call."""

    def __init__(self, file_metadata: bool = True, file_truncation: bool = True) -> None:
        self.file_metadata, self.file_truncation = file_metadata, file_truncation
        self.available = os.uname().machine == "x86_64"
        self.note = "" if self.available else f"the syscall allowlist is written for x86_64, not {os.uname().machine}"
        if not self.available:
            return
        insns = program(_PLACEHOLDER_PID, file_metadata, file_truncation)
        _check_jumps(insns)
        self._array = (_SockFilter * len(insns))(*[_SockFilter(*insn) for insn in insns])
        self._pid_slots = [i for i, insn in enumerate(insns) if insn[0] == _JEQ_K and insn[3] == _PLACEHOLDER_PID]
        self._prog = _SockFprog(len(insns), ctypes.cast(self._array, ctypes.POINTER(_SockFilter)))
        self.size = len(insns)

    def apply(self) -> tuple[bool, str]:
        if not self.available:
            return False, self.note
        own = os.getpid() & 0xFFFFFFFF
        for i in self._pid_slots:
            self._array[i].k = own
        zero = ctypes.c_ulong(0)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), zero, zero, zero):
            return False, f"prctl(NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}"
        if _libc.prctl(_PR_SET_SECCOMP, ctypes.c_ulong(_SECCOMP_MODE_FILTER), ctypes.byref(self._prog), zero, zero):
            return False, f"prctl(PR_SET_SECCOMP) failed: {os.strerror(ctypes.get_errno())}"
        return True, (f"allowlist of {len(ALLOWED_X86_64)} system calls (files, memory, time, "
                      "signals and threads of its own process); calls naming a pid only on itself; "
                      "no sockets, exec, fork, pipes, memfd, shared memory, mount, namespaces, "
                      "ptrace, fanotify/inotify/dnotify, leases, locks on others' files, signals "
                      "by file ownership, kernel log or clock setting"
                      + ("" if self.file_metadata else "; no chmod or utime (no jail)")
                      + ("" if self.file_truncation else
                         "; no truncation but through a descriptor open for writing (no jail, Landlock ABI < 3)"))
