"""Is a process still alive: the run's model server, the writer of a run or of a cache pack?
(No pytest import: the SDK process uses it too.)"""

from __future__ import annotations

from typing import Callable

import psutil


def process_alive(pid: int) -> bool:
    """True while the process runs (a zombie awaiting its parent's wait() counts as dead)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process (a /proc mounted with hidepid)
        return True


def started_after(pid: int, when: float, *, slack_s: float = 1.0) -> bool:
    """Whether the process ``pid`` started after ``when`` (epoch seconds), so it cannot be the
    one that wrote a file last modified then: the pid was reused. False when it cannot be told."""
    try:
        return psutil.Process(pid).create_time() > when + slack_s
    except (psutil.Error, OSError):
        return False


def dead_server_check(pid: int | None) -> Callable[[], str | None] | None:
    """A callable the backend consults before retrying: a message if the server (the managed
    vLLM process ``pid``) is gone; None where there is no process of ours to watch."""
    if not pid:
        return None

    def check() -> str | None:
        if process_alive(pid):
            return None
        return f"the vLLM server (pid {pid}) is no longer running; see its log in the run folder"

    return check
