"""Run a command as on a machine that refuses user namespaces (Ubuntu 24.04's default,
``kernel.apparmor_restrict_unprivileged_userns=1``, or ``user.max_user_namespaces=0``):

    python tests/no_userns.py COMMAND [ARG ...]

installs a seccomp filter that makes ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` fail with
EPERM (and ``clone3``, which a filter cannot inspect, fail with ENOSYS so that glibc falls back
to ``clone``), then execs the command. The filter is inherited by every process the command
starts, and nothing outside them changes: unlike the sysctl, it needs no root and cannot leak
into the rest of the machine. x86_64 only, stdlib only.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

_CLONE_NEWUSER = 0x10000000
_UNSHARE, _CLONE, _CLONE3 = 272, 56, 435
_LD, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_ALLOW, _EPERM, _ENOSYS = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Insn))]


def refuse_user_namespaces() -> None:
    program = [
        (_LD, 0, 0, 0),  # the syscall number
        (_JEQ, 0, 1, _CLONE3), (_RET, 0, 0, _ENOSYS),
        (_JEQ, 1, 0, _UNSHARE), (_JEQ, 0, 3, _CLONE),
        (_LD, 0, 0, 16),  # flags: the first argument of both
        (_JSET, 0, 1, _CLONE_NEWUSER), (_RET, 0, 0, _EPERM),
        (_RET, 0, 0, _ALLOW),
    ]
    install_filter(program)


def install_filter(program: list[tuple[int, int, int, int]]) -> None:
    """Load a classic-BPF seccomp ``program`` on this process (and all it starts), no_new_privs first."""
    array = (_Insn * len(program))(*[_Insn(*insn) for insn in program])
    prog = _Prog(len(program), ctypes.cast(array, ctypes.POINTER(_Insn)))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(prog), 0, 0):
        raise OSError(ctypes.get_errno(), f"cannot install the filter: {os.strerror(ctypes.get_errno())}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    refuse_user_namespaces()
    os.execvp(sys.argv[1], sys.argv[1:])
