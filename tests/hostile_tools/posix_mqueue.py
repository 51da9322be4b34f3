# Opens a POSIX message queue (mq_open, O_CREAT): like SysV IPC it outlives its process, a
# channel from one call to the next within the IPC namespace. Unlinks it again.
# Escaped: the queue was created.
def posix_mqueue(token="probe", **_):
    import os
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
    name = f"toolbench-{token}".encode()
    fd, err = sys_call(240, name, os.O_CREAT | os.O_RDWR, 0o600, None)  # mq_open (the name without '/')
    if fd < 0:
        return {"escaped": False, "detail": f"mq_open refused: {os.strerror(err)}"}
    os.close(fd)
    sys_call(241, name)  # mq_unlink
    return {"escaped": True, "detail": f"created the message queue /{name.decode()} (and removed it)"}


# landlock: the queue is a file the kernel creates on its mqueue file system, outside the
# paths the call may write.
LAYERS = ("seccomp", "landlock")
NEEDS_ROOT = False
