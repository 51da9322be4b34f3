"""Removing and measuring what a tool left in its directory, whatever it built there.

A tool controls its whole directory: trees thousands of levels deep (deeper than Python's
recursion limit and than PATH_MAX), names that are not UTF-8, directories and files with mode
000, fifos, symlinks (pointing anywhere), hard links, hundreds of thousands of entries. So
nothing here recurses in Python or builds full paths: it walks with directory fds (``openat``
relative to the current directory, never following a symlink), climbs back with ``..`` and gives
itself the permissions it needs. It never raises: a clean-up that fails must not take a sandbox
slot with it, so failures are returned as text.

Stdlib only (imported by the zygote and by the pool).

Ownership of a sandbox folder: its pool takes an exclusive ``flock`` on :data:`LOCK_NAME` inside
it and shares that lock with its zygote, so the lock is held while either lives. A zygote whose
pool went away removes its own folder; one that is killed too leaves it, and a later pool's
:func:`sweep_stale` removes it, once it can take the lock (nobody holds it), never before. The
controller's folder of parsed files (benchmarks/parsed_files.py) is owned the same way.
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
import time

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, dir_fd: int) -> int:
    """Open a subdirectory for listing, first giving it rwx if the tool took that away."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=dir_fd)  # a directory (checked by the caller), not a symlink
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _split(dir_fd: int) -> tuple[list[str], list[str]]:
    """(subdirectories, everything else) of an open directory, without following symlinks."""
    os.chmod(dir_fd, 0o700)  # entries of a mode-000 (or read-only) directory can be unlinked
    dirs: list[str] = []
    others: list[str] = []
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            (dirs if is_dir else others).append(entry.name)
    return dirs, others


def remove_tree(path: str) -> str | None:
    """Remove ``path`` and everything beneath it. Returns None once it is gone, else why not.

    Only for a tree nobody changes any more (the tool's process is dead): the walk climbs back
    with ``..``, which holds only while no directory is moved.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    try:
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(path)
            return None
        try:
            os.chmod(path, 0o700)
        except OSError:
            pass
        fd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    # One entry per level being walked: the directory's name and the subdirectories still to do.
    names: list[str] = []
    pending: list[list[str]] = []
    problem: str | None = None
    try:
        dirs, others = _split(fd)
        pending.append(dirs)
        while True:
            for name in others:
                try:
                    os.unlink(name, dir_fd=fd)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    problem = problem or f"{type(exc).__name__}: {exc}"
            others = []
            todo = pending[-1]
            if todo:
                name = todo.pop()
                try:
                    child = _open_dir(name, fd)
                except OSError as exc:
                    problem = problem or f"{type(exc).__name__}: {exc}"
                    continue
                os.close(fd)
                fd = child
                names.append(name)
                dirs, others = _split(fd)
                pending.append(dirs)
                continue
            pending.pop()
            if not names:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            try:
                os.rmdir(names.pop(), dir_fd=fd)
            except OSError as exc:
                problem = problem or f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - never raise: the caller must get its slot back
        problem = problem or f"{type(exc).__name__}: {exc}"
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError as exc:
        return problem or f"{type(exc).__name__}: {exc}"
    return None


def usage(path: str, max_bytes: int, max_inodes: int, max_depth: int = 256) -> str | None:
    """None while the tree under ``path`` stays within ``max_bytes`` (allocated blocks) and
    ``max_inodes`` entries; otherwise what it exceeds. For a tree that is still being changed by
    a running tool: it holds a fd per level (no ``..``), stops counting as soon as a limit is
    passed, and a tree nested deeper than ``max_depth`` counts as over the limit."""
    used = inodes = 0
    try:
        top = os.open(path, _DIR_FLAGS)
    except OSError:
        return None  # nothing to measure (gone, or not readable to us either)
    stack = [top]
    iters: list = []
    try:
        iters.append(os.scandir(top))
        while iters:
            entry = next(iters[-1], None)
            if entry is None:
                iters.pop().close()
                os.close(stack.pop())
                continue
            inodes += 1
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            used += st.st_blocks * 512
            if used > max_bytes:
                return f"more than {max_bytes // (1024 * 1024)} MB of disk"
            if inodes > max_inodes:
                return f"more than {max_inodes} files and directories"
            if stat.S_ISDIR(st.st_mode):
                if len(stack) >= max_depth:
                    return f"directories nested more than {max_depth} levels deep"
                try:
                    child = _open_dir(entry.name, stack[-1])
                except OSError:
                    continue
                stack.append(child)
                try:
                    iters.append(os.scandir(child))
                except OSError:
                    os.close(stack.pop())
    except Exception:  # noqa: BLE001 - a measurement that fails is no verdict
        return None
    finally:
        for it in iters:
            it.close()
        for fd in stack:
            try:
                os.close(fd)
            except OSError:
                pass
    return None


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
        remove_tree(staging)
        raise
    return final, fd


def sweep_stale(base: str, prefix: str) -> list[str]:
    """Remove the folders ``base/prefix*`` of this user that no live owner holds (a pool and its
    zygotes, or a run's controller for its parsed files, killed); returns those removed. A
    folder whose lock is held (a live run, this process's or another's) is never touched.
    Never raises."""
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
