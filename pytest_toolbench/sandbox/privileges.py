"""What a call holds: no capability, no view of other processes, and how a zygote gets there
from whatever account runs the harness (root, an ordinary user with or without user namespaces).

- ``narrow_inheritance`` (the zygote, once) and ``drop_capabilities`` (each call): the bounding
  set emptied and ``SECBIT_NOROOT`` locked where the zygote may (root, or root of its own user
  namespace), then empty effective, permitted, inheritable and ambient sets in the call; an
  ordinary user holds no capability to begin with and cannot regain one (no ``execve``,
  ``no_new_privs``).
- ``PidNamespace``: the zygote's later children live in a PID namespace of their own, kept alive
  by a do-nothing init (pid 1): a call sees no process but itself and that init; the zygote, the
  harness and the host have no pid it could name.
- ``probe_user_namespace``: whether an unprivileged zygote can own a user namespace in which
  mounts work, tried in a throw-away child first. Entering one is irreversible, and on Ubuntu
  24.04 (``kernel.apparmor_restrict_unprivileged_userns=1``) ``unshare`` succeeds but the
  namespace grants nothing: the zygote must not be left inside such a one.

Stdlib only (the worker imports this before anything else).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Callable

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
_SYS_CAPGET, _SYS_CAPSET = 125, 126
_CAP_VERSION_3 = 0x20080522
# SECBIT_NOROOT (+ locked): uid 0 gains no capability by exec; KEEP_CAPS locked off;
# NO_CAP_AMBIENT_RAISE (+ locked).
_SECUREBITS = (1 << 0) | (1 << 1) | (1 << 5) | (1 << 6) | (1 << 7)
_CLONE_NEWPID, _CLONE_NEWUSER, _CLONE_NEWNS = 0x20000000, 0x10000000, 0x00020000
_MS_REC, _MS_PRIVATE = 1 << 14, 1 << 18


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def last_capability() -> int:
    """The highest capability number this kernel knows (read once, before the jail)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 40


def capability_sets() -> dict[str, int]:
    """This process's effective, permitted and inheritable sets (64-bit masks)."""
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if _libc.syscall(_SYS_CAPGET, ctypes.byref(header), ctypes.byref(data)):
        raise OSError(ctypes.get_errno(), f"capget: {os.strerror(ctypes.get_errno())}")
    return {name: getattr(data[0], name) | (getattr(data[1], name) << 32)
            for name in ("effective", "permitted", "inheritable")}


def bounding_set(last_cap: int) -> int:
    """The capabilities still in the bounding set (a mask)."""
    mask = 0
    for cap in range(last_cap + 1):
        if _libc.prctl(23, ctypes.c_ulong(cap), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) == 1:
            mask |= 1 << cap
    return mask


def narrow_inheritance(last_cap: int) -> dict[str, bool]:
    """In the zygote, once: empty the bounding set and lock ``SECBIT_NOROOT``. Neither touches
    the zygote's own effective capabilities (it still mounts each call's tmpfs); both pass to
    every child it forks, so a call starts with nothing it could ever regain, and its own drop
    (``drop_capabilities``) is one ``capset``. Needs CAP_SETPCAP (root, or root of the zygote's
    user namespace); an ordinary user keeps a full bounding set it has no way to use."""
    zero = ctypes.c_ulong(0)
    bounding = True
    for cap in range(last_cap + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, ctypes.c_ulong(cap), zero, zero, zero):
            bounding = False
            break
    securebits = _libc.prctl(_PR_SET_SECUREBITS, ctypes.c_ulong(_SECUREBITS), zero, zero, zero) == 0
    _libc.prctl(_PR_CAP_AMBIENT, ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL), zero, zero, zero)
    return {"bounding_empty": bounding and bounding_set(last_cap) == 0, "securebits_locked": securebits}


def drop_capabilities() -> dict[str, int]:
    """In a call's child: give up every capability for good (effective, permitted, inheritable
    all empty; the bounding set and securebits were narrowed in the zygote). Raises ``OSError``
    when a set is not empty afterwards: nothing should be able to keep one."""
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()  # all zero
    if _libc.syscall(_SYS_CAPSET, ctypes.byref(header), ctypes.byref(data)):
        raise OSError(ctypes.get_errno(), f"capset: {os.strerror(ctypes.get_errno())}")
    sets = capability_sets()
    if sets["effective"] or sets["permitted"] or sets["inheritable"]:
        raise OSError(f"capabilities left after dropping them: {sets}")
    return sets


# ---------------------------------------------------------------------------- PID namespace


class PidNamespace:
    """Children forked after ``enter()`` live in a new PID namespace whose init is a forked,
    confined do-nothing process: the namespace lasts while it lives (an init that exits takes
    the namespace with it, and the next fork would fail)."""

    def __init__(self) -> None:
        self.init_pid: int | None = None
        self.note = ""

    def enter(self, confine_init: Callable[[], None]) -> bool:
        if _libc.unshare(_CLONE_NEWPID) != 0:
            self.note = f"unshare(CLONE_NEWPID) failed: {os.strerror(ctypes.get_errno())}"
            return False
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pid 1 of the namespace: confined like a call, then idle until killed
            try:
                confine_init()
                while True:
                    signal.pause()
            finally:
                os._exit(0)
        self.init_pid = pid
        self.note = "each call in a PID namespace of the zygote's (it sees itself and an idle init)"
        return True

    def alive(self) -> bool:
        if self.init_pid is None:
            return False
        try:
            done, _ = os.waitpid(self.init_pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return done == 0

    def close(self) -> None:
        if self.init_pid is None:
            return
        try:
            os.kill(self.init_pid, signal.SIGKILL)
            os.waitpid(self.init_pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        self.init_pid = None


# ---------------------------------------------------------------------------- user namespace


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def enter_user_namespace() -> tuple[bool, str]:
    """unshare(CLONE_NEWUSER | CLONE_NEWNS) mapping this uid/gid to root inside, so that the
    zygote may build its mounts, jail and namespaces as an ordinary user. Irreversible: call
    ``probe_user_namespace`` first."""
    uid, gid = os.geteuid(), os.getegid()
    if _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
        return False, f"unshare(CLONE_NEWUSER): {os.strerror(ctypes.get_errno())}"
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
    except OSError as exc:
        return False, f"user namespace id maps: {exc}"
    return True, f"user namespace (uid {uid} is root inside it, and nothing outside)"


def probe_user_namespace(tmpdir: str) -> tuple[bool, str]:
    """Try, in a child that then exits, what the zygote would do in a user namespace: enter
    it, make mounts private and mount a tmpfs. (True, "") when all of it works."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        why = b""
        try:
            ok, note = enter_user_namespace()
            if not ok:
                why = note.encode()
            elif _libc.mount(b"none", b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None) != 0:
                why = f"mount (private) in a user namespace: {os.strerror(ctypes.get_errno())}".encode()
            elif _libc.mount(b"tmpfs", os.fsencode(tmpdir), b"tmpfs", ctypes.c_ulong(0), b"size=65536") != 0:
                why = f"tmpfs in a user namespace: {os.strerror(ctypes.get_errno())}".encode()
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            why = f"{type(exc).__name__}: {exc}".encode()
        try:
            os.write(w, why or b"ok")
        finally:
            os._exit(0)
    os.close(w)
    try:
        answer = b""
        while chunk := os.read(r, 4096):
            answer += chunk
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    text = answer.decode("utf-8", "replace")
    return (True, "") if text == "ok" else (False, text or "the probe child died")
