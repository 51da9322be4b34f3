# Watches a folder it may read (the standard library's) with dnotify, the old interface to the
# kernel's file notifications: fcntl(F_NOTIFY, DN_ACCESS | DN_MULTISHOT) on the folder, and the
# kernel sends the call SIGIO each time any process of the machine reads a file there. No
# fanotify, no inotify, only fcntl. Listens for `seconds`.
# Escaped: it was told of at least one read it did not make.
def dnotify_watch(seconds=1.5, **_):
    import fcntl, os, signal, time
    where = os.path.dirname(os.__file__)
    seen = []
    signal.signal(signal.SIGIO, lambda *args: seen.append(1))
    try:
        fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT)
    except OSError as exc:
        return {"escaped": False, "detail": f"F_NOTIFY on {where} refused: {exc}"}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.02)
    os.close(fd)
    return {"escaped": bool(seen), "detail": f"told of {len(seen)} reads in {where} in {seconds} s"}


LAYERS = ("seccomp",)
NEEDS_ROOT = False
