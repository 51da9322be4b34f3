"""Temporary folders owned by a live process, and the sweep that removes those of dead ones.

A harness process that is SIGKILLed (the OOM killer, a CI job's timeout, ``kill -9`` of its
group) cannot remove its temporary folders: the sandbox's, the kept parsed files', the SDK
process's socket folder and the vLLM server's. Each is made by :func:`make_locked_folder`, whose
exclusive ``flock`` on :data:`LOCK_NAME` inside it its owner holds (and may pass to the child that
uses the folder, so the lock lasts while either lives); a later run's :func:`sweep_stale` removes
a folder once it can take that lock, never before, and only this user's.

Stdlib only (the SDK process's launcher imports it before anything else of the plugin).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable

LOCK_NAME = ".owner.lock"
#: A sandbox folder without a lock file was made by a version before the lock: removed by a
#: sweep only once untouched this long (a live one of those changes at every call).
UNLOCKED_STALE_S = 24 * 3600.0
#: A staging folder (made, locked, then renamed within milliseconds) older than this was cut short.
STAGING_STALE_S = 600.0


def make_locked_folder(base: str, prefix: str) -> tuple[str, int]:
    """A new folder ``base/prefix*`` whose lock file is already held when it appears under that
    name: it is made and locked under a name the sweep never looks at (``.``-prefixed), then
    renamed (atomic), so another run's sweep never finds it unlocked. Returns (path, lock fd;
    close-on-exec: pass it on to the zygote explicitly). The lock lasts until every process
    holding that fd has closed it or died."""
    staging = tempfile.mkdtemp(prefix=f".{prefix}", dir=base)
    try:
        fd = os.open(os.path.join(staging, LOCK_NAME),
                     os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            final = tempfile.mkdtemp(prefix=prefix, dir=base)  # a unique name, replaced below
            os.rename(staging, final)  # an empty directory is replaced atomically
        except BaseException:
            os.close(fd)
            raise
    except BaseException:
        _rmtree(staging)
        raise
    return final, fd


def claim_folder(base: str, prefix: str) -> tuple[str, int]:
    """:func:`make_locked_folder`, after sweeping the folders ``base/prefix*`` whose owners were
    killed (the sweep of every harness folder but the sandbox's, which logs what it removed)."""
    sweep_stale(base, prefix)
    return make_locked_folder(base, prefix)


def release_folder(path: str, lock_fd: int, remove: Callable[[str], str | None] | None = None) -> str | None:
    """Remove a folder made by :func:`make_locked_folder`, then close its lock (only then: another
    run's sweep must not start on a folder still being removed). Returns None once the folder is
    gone, else why not (``remove`` as for :func:`sweep_stale`)."""
    problem = (remove or _rmtree)(path)
    if lock_fd >= 0:
        os.close(lock_fd)
    return problem


def sweep_stale(base: str, prefix: str, remove: Callable[[str], str | None] | None = None) -> list[str]:
    """Remove the folders ``base/prefix*`` of this user that no live owner holds (their owners
    were killed); returns those removed. A folder whose lock is held (a live run, this process's
    or another's) is never touched. ``remove``: removes a tree, returns None once it is gone
    (default: :func:`shutil.rmtree`; the sandbox's folders need its own, which no tool's tree
    defeats). Never raises."""
    remove_tree = remove or _rmtree
    removed: list[str] = []
    try:
        entries = os.listdir(base)
    except OSError:
        return removed
    names = [n for n in entries if n.startswith(prefix)]
    for name in (n for n in entries if n.startswith(f".{prefix}")):  # a creation cut short
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
                and time.time() - st.st_mtime > STAGING_STALE_S and remove_tree(path) is None):
            removed.append(path)
    for name in names:
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue
        try:
            fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:  # no lock file: an older version's folder, or one being made now
            if time.time() - st.st_mtime > UNLOCKED_STALE_S and remove_tree(path) is None:
                removed.append(path)
            continue
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: the folder is alive
            os.close(fd)
            continue
        try:
            # Still the folder's own lock file, not one its owner unlinked while removing the
            # folder itself (it holds the lock until the folder is gone).
            if os.fstat(fd).st_ino == os.lstat(os.path.join(path, LOCK_NAME)).st_ino and remove_tree(path) is None:
                removed.append(path)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def private_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a real folder (not a link) of this user's that nobody else may write
    to: what a file read back from it (a pickle, a kept estimate) may be trusted for."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def user_folder(base: str | os.PathLike[str], name: str) -> str | None:
    """``base/name/u<uid>``, made private (0700) if new: this user's corner of a folder users may
    share (the response cache's). None when it cannot be made, or is not private (a link, another
    owner, widened modes): the caller then keeps nothing there."""
    folder = os.path.join(base, name, f"u{os.geteuid()}")
    try:
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return folder if private_folder(folder) else None


def _rmtree(path: str) -> str | None:
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
