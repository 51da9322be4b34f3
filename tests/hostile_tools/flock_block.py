# Takes an exclusive lock (flock LOCK_EX) on a file it may only read (`watched`, a
# standard-library file): flock does not care how the file was opened, so every host process
# that locks the same file (as package managers and caches lock theirs) waits while the call
# holds it, for `seconds` here. Escaped: the lock was really taken: a second open of the same
# file cannot take it too (a filter may answer "done" without locking anything).
def flock_block(seconds=1.5, watched="this.py", **_):
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
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            other = os.open(path, os.O_RDONLY)
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = False  # answered, but nothing was locked
                break
            except BlockingIOError:
                held = True
            finally:
                os.close(other)
        except BlockingIOError:
            time.sleep(0.01)  # the host's own check holds it a moment
        except OSError as exc:
            os.close(fd)
            return {"escaped": False, "detail": f"flock on {path} refused: {exc}"}
    while time.monotonic() < end:
        time.sleep(0.02)
    os.close(fd)
    return {"escaped": held, "detail": f"{'held' if held else 'never got'} an exclusive flock on {path}"}


LAYERS = ("seccomp",)
NEEDS_ROOT = False
