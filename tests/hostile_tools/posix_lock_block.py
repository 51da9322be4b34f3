# Takes a shared POSIX record lock (fcntl F_SETLK, F_RDLCK, which a file opened read-only may
# take) on a file it may only read (`watched`, a standard-library file): every host process
# that wants to write-lock the same file (as SQLite does its databases) waits while the call
# holds it, for `seconds` here. A filter that refuses this refuses SQLite's locks on the call's
# own files too: it cannot tell the files apart (so it may answer "done" and lock nothing).
# Escaped: the lock was really taken: an open file description of its own sees it (F_OFD_GETLK).
def posix_lock_block(seconds=1.5, watched="this.py", **_):
    import fcntl, os, struct, time

    def really_locked():  # another open file description of its own asks for a write lock
        other = os.open(path, os.O_RDONLY)
        try:  # struct flock: l_type, l_whence, l_start, l_len, l_pid
            got = fcntl.fcntl(other, 36, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0))  # F_OFD_GETLK
            return struct.unpack("hhqqi4x", got)[0] != fcntl.F_UNLCK
        finally:
            os.close(other)

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
            held = really_locked()
            if not held:
                break  # answered, but nothing was locked
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
