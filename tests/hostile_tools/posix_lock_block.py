# Takes a shared POSIX record lock (fcntl F_SETLK, F_RDLCK, which a file opened read-only may
# take) on a file it may only read (`watched`, a standard-library file): every host process
# that wants to write-lock the same file (as SQLite does its databases) waits while the call
# holds it, for `seconds` here. A filter that refuses this refuses SQLite's locks on the call's
# own files too: it cannot tell the files apart. Escaped: the host's own write lock was refused.
def posix_lock_block(seconds=1.5, watched="this.py", **_):
    import fcntl, os, time
    path = os.path.join(os.path.dirname(os.__file__), os.path.basename(watched))
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        return {"escaped": False, "detail": f"open {path}: {exc}"}
    end = time.monotonic() + seconds
    held = False
    while time.monotonic() < end and not held:
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            held = True
        except (BlockingIOError, PermissionError):
            time.sleep(0.01)  # the host's own check holds it a moment
        except OSError as exc:
            os.close(fd)
            return {"escaped": False, "detail": f"F_SETLK on {path} refused: {exc}"}
    while time.monotonic() < end:
        time.sleep(0.02)
    os.close(fd)
    return {"escaped": held, "detail": f"{'held' if held else 'never got'} a shared POSIX lock on {path}"}


LAYERS = ("seccomp",)
NEEDS_ROOT = False
