"""Whether ``bwrap`` is installed *and* may make its namespaces here: installed where the machine
refuses unprivileged user namespaces (Debian's sysctl, tests/no_userns.py in .ci/unprivileged), it
fails and the pool falls back to its own layers, which the tests that expect bwrap in front of the
zygote must skip, not fail."""

from __future__ import annotations

import functools
import shutil
import subprocess

import pytest


@functools.cache
def bubblewrap_usable() -> str | None:
    """None when bwrap runs here; else why not (the skip reason)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) not installed"
    try:
        done = subprocess.run([bwrap, "--unshare-all", "--ro-bind", "/", "/", "true"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap does not run here ({exc})"
    if done.returncode != 0:
        return f"bwrap cannot make its namespaces here: {done.stderr.strip()[:200]}"
    return None


needs_bwrap = pytest.mark.skipif(bubblewrap_usable() is not None,
                                 reason=bubblewrap_usable() or "")
