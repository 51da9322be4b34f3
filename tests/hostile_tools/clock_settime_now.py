# Sets the machine's clock with clock_settime(CLOCK_REALTIME), to the time it reads just
# before (plus the microsecond the two calls take): the clock does not visibly move, but the
# same call with another value steps the time of every process on the machine. Needs
# CAP_SYS_TIME. Escaped: the kernel accepted the new time.
def clock_settime_now(**_):
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

    class Timespec(ctypes.Structure):
        _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]

    now = Timespec()
    if libc.clock_gettime(0, ctypes.byref(now)) != 0:
        return {"escaped": False, "detail": f"clock_gettime: {os.strerror(ctypes.get_errno())}"}
    now.nsec += 1000
    if now.nsec >= 1_000_000_000:
        now.sec, now.nsec = now.sec + 1, now.nsec - 1_000_000_000
    res, err = sys_call(227, 0, ctypes.byref(now))  # clock_settime(CLOCK_REALTIME)
    if res < 0:
        return {"escaped": False, "detail": f"clock_settime refused: {os.strerror(err)}"}
    return {"escaped": True, "detail": "clock_settime(CLOCK_REALTIME) accepted"}


LAYERS = ("seccomp", "caps")
NEEDS_ROOT = True
