"""Run a command as on a machine whose Landlock answers its version query with an error:

    python tests/refuse_landlock.py ERRNO COMMAND [ARG ...]

``ERRNO`` is ``EPERM`` (a container's seccomp profile refusing the call), ``ENOSYS`` (a kernel
without Landlock) or ``EOPNOTSUPP`` (Landlock built in, not enabled). Installs a seccomp filter
that makes ``landlock_create_ruleset`` fail with it, then execs the command; the filter is
inherited by every process the command starts. x86_64 only, stdlib only.
"""

from __future__ import annotations

import errno
import os
import sys

from no_userns import _ALLOW, _JEQ, _LD, _RET, install_filter

_LANDLOCK_CREATE_RULESET = 444


def refuse_landlock(err: int) -> None:
    program = [(_LD, 0, 0, 0), (_JEQ, 0, 1, _LANDLOCK_CREATE_RULESET), (_RET, 0, 0, 0x00050000 | err),
               (_RET, 0, 0, _ALLOW)]
    install_filter(program)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    refuse_landlock(getattr(errno, sys.argv[1]))
    os.execvp(sys.argv[2], sys.argv[2:])
