# Watches a folder it may read (the standard library's, a read-only bind of the host's) with
# inotify: the name of every file any process of the machine opens or reads there. Listens for
# `seconds`, opening nothing itself meanwhile. Escaped: it saw an event (names returned).
def inotify_watch(seconds=1.5, **_):
    import os, struct, time
    def unhook():  # the audit hook is a Python object: its class's __call__ becomes a no-op
        import gc
        gc.unfreeze()
        for obj in gc.get_objects():
            if "Audit" in type(obj).__name__ and callable(obj):
                try:
                    type(obj).__call__ = lambda self, *args: None
                except (TypeError, AttributeError):
                    pass

    unhook()
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
    except Exception as exc:  # the audit hook held, or there is no ctypes
        return {"escaped": False, "detail": f"no ctypes: {exc!r}"}
    libc.syscall.restype = ctypes.c_long

    def sys_call(nr, *args):  # (result, errno)
        ctypes.set_errno(0)
        res = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
        return res, (ctypes.get_errno() if res < 0 else 0)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        return {"escaped": False, "detail": f"inotify_init1 refused: {os.strerror(ctypes.get_errno())}"}
    where = os.path.dirname(os.__file__)
    if libc.inotify_add_watch(fd, where.encode(), ctypes.c_uint32(0x1 | 0x20)) < 0:  # IN_ACCESS | IN_OPEN
        err = ctypes.get_errno()
        os.close(fd)
        return {"escaped": False, "detail": f"inotify_add_watch({where}) refused: {os.strerror(err)}"}
    names, events = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            buf = os.read(fd, 65536)
        except BlockingIOError:
            time.sleep(0.02)
            continue
        off = 0
        while off + 16 <= len(buf):
            _wd, _mask, _cookie, length = struct.unpack_from("=iIII", buf, off)
            name = buf[off + 16: off + 16 + length].rstrip(b"\0").decode("utf-8", "replace")
            events += 1
            if name and name not in names:
                names.append(name)
            off += 16 + length
    os.close(fd)
    return {"escaped": events > 0, "detail": f"{events} events in {where}: {names[:12]}"}


LAYERS = ("seccomp",)
NEEDS_ROOT = False
