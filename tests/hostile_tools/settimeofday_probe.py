# settimeofday(NULL, NULL): the kernel checks CAP_SYS_TIME, then has nothing to set, so it
# changes nothing; with a time or a time zone the same call sets the machine's clock.
# Escaped: the call succeeded (the permission to set the clock was there).
def settimeofday_probe(**_):
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
    res, err = sys_call(164, None, None)  # settimeofday(NULL, NULL), the raw system call
    if res < 0:
        return {"escaped": False, "detail": f"settimeofday refused: {os.strerror(err)}"}
    return {"escaped": True, "detail": "settimeofday passed the CAP_SYS_TIME check"}


LAYERS = ("seccomp", "caps")
NEEDS_ROOT = True
