"""What this machine's sandbox gives (root, an ordinary user with or without user namespaces),
read once per test process from a real zygote's probe, so that a test of an optional layer
(the jail, the per-call tmpfs, the PID namespace, the memory cgroup) skips, with why, where the
machine cannot give it, and runs wherever it can. The floor (Landlock, the allowlist, no
capabilities) is never skipped."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import pytest

from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import ToolSandbox


@functools.lru_cache(maxsize=1)
def isolation() -> dict[str, Any]:
    with ToolSandbox(SandboxLimits(workers=1)) as box:
        return dict(box.describe()["isolation"])


def has(layer: str) -> bool:
    iso = isolation()
    return {
        "jail": iso.get("filesystem_view") == "jail",
        "tmpfs": iso.get("disk_cap", {}).get("mechanism") == "tmpfs",
        "pid_namespace": bool(iso.get("pid_namespace")),
        "network_namespace": bool(iso.get("network_namespace")),
        "cgroup": iso.get("memory_cap", {}).get("mechanism") == "cgroup",
    }[layer]


def require(*layers: str) -> None:
    """Skip the calling test unless this machine gives every one of ``layers``."""
    for layer in layers:
        if not has(layer):
            why = isolation().get("absent_layers", {}).get(layer) or "not given here"
            pytest.skip(f"this machine gives no {layer} ({why})")


def process_alive(pid: int) -> bool:
    """Whether a sandbox process (a zygote, a call) still runs: it exists and is no zombie, which
    holds nothing while it waits to be reaped (under bwrap by the host's init, a moment later)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def wait_until(check: Callable[[], object], seconds: float) -> bool:
    """Whether ``check()`` came true within ``seconds``: what a sandbox process does after an
    event (a zygote removing its folder, a process reaped) takes a moment, longer on a loaded
    runner, so a test polls for it rather than sleeping a fixed time."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return bool(check())


#: For a script run in a confined process of its own: ``attempt(key, fn)`` sets ``out[key]``
#: to "ok" or to the errno ``fn`` raised (paste it after ``out = {...}``).
ATTEMPT = """
def attempt(key, fn):
    try:
        fn()
        out[key] = "ok"
    except OSError as exc:
        out[key] = exc.errno
"""
