"""Removing and measuring what a tool left in its directory, whatever it built there.

A tool controls its whole directory: trees thousands of levels deep (deeper than Python's
recursion limit and than PATH_MAX), names that are not UTF-8, directories and files with mode
000, fifos, symlinks (pointing anywhere), hard links, hundreds of thousands of entries. So
nothing here recurses in Python or builds full paths: it walks with directory fds (``openat``
relative to the current directory, never following a symlink), climbs back with ``..`` and gives
itself the permissions it needs. It never raises: a clean-up that fails must not take a sandbox
slot with it, so failures are returned as text.

Stdlib only (imported by the zygote and by the pool).

Ownership of a sandbox folder (``owned_folders.py``): its pool holds the folder's lock and shares
it with its zygote, so the lock is held while either lives. A zygote whose pool went away removes
its own folder; one that is killed too leaves it, and a later pool's sweep removes it (with
:func:`remove_tree`), once nobody holds the lock, never before.
"""

from __future__ import annotations

import os
import stat

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, dir_fd: int, *, live: bool = False) -> int:
    """Open a subdirectory for listing, first giving it rwx if the tool took that away.

    ``live``: the tool may still be running (:func:`usage`), so between the caller's check that
    ``name`` is a directory and the ``chmod`` it can swap in a symlink, which a plain ``chmod``
    would follow to any file of the harness's uid. There it is changed only if it is not a
    symlink (``AT_SYMLINK_NOFOLLOW``; glibc needs ``/proc`` for it, and where it has none the
    plain ``chmod`` is the fallback)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        try:  # the tool dead (not live), nothing changes under us: a plain chmod
            os.chmod(name, 0o700, dir_fd=dir_fd, follow_symlinks=not live)
        except ValueError:  # CPython's word for ENOTSUP without following: a symlink now, or no /proc
            if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode):
                raise OSError(f"{name}: replaced by a symlink while measured") from None
            os.chmod(name, 0o700, dir_fd=dir_fd)
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
                    child = _open_dir(entry.name, stack[-1], live=True)
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
