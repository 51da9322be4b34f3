# Opens a userfaultfd (user-mode faults only, which needs no privilege): it lets a process
# pause the kernel in the middle of a copy from its memory, the usual way to win a kernel race.
# Escaped: the kernel returned a userfaultfd.
def userfaultfd_open(**_):
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
    fd, err = sys_call(323, os.O_CLOEXEC | 1)  # userfaultfd(O_CLOEXEC | UFFD_USER_MODE_ONLY)
    if fd < 0:
        fd, err2 = sys_call(323, os.O_CLOEXEC)
        if fd < 0:
            return {"escaped": False, "detail": f"userfaultfd refused: {os.strerror(err)} / {os.strerror(err2)}"}
    os.close(fd)
    return {"escaped": True, "detail": "opened a userfaultfd"}


LAYERS = ("seccomp",)
NEEDS_ROOT = False
