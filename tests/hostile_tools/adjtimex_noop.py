# Writes to the kernel's clock discipline with adjtimex(), the older call: reads the state,
# then writes back the maximum-error estimate it just read (ADJ_MAXERROR), which leaves the
# time itself alone. Any write needs CAP_SYS_TIME; the same call with other modes slews or steps
# the clock of the whole machine. Escaped: the write was accepted.
def adjtimex_noop(**_):
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

    class Timex(ctypes.Structure):
        _fields_ = [("modes", ctypes.c_uint), ("offset", ctypes.c_long), ("freq", ctypes.c_long),
                    ("maxerror", ctypes.c_long), ("esterror", ctypes.c_long), ("status", ctypes.c_int),
                    ("constant", ctypes.c_long), ("precision", ctypes.c_long), ("tolerance", ctypes.c_long),
                    ("sec", ctypes.c_long), ("usec", ctypes.c_long), ("tick", ctypes.c_long),
                    ("ppsfreq", ctypes.c_long), ("jitter", ctypes.c_long), ("shift", ctypes.c_int),
                    ("stabil", ctypes.c_long), ("jitcnt", ctypes.c_long), ("calcnt", ctypes.c_long),
                    ("errcnt", ctypes.c_long), ("stbcnt", ctypes.c_long), ("tai", ctypes.c_int),
                    ("pad", ctypes.c_int * 11)]

    tx = Timex()
    res, err = sys_call(159, ctypes.byref(tx))  # adjtimex, modes 0: read
    if res < 0:
        return {"escaped": False, "detail": f"adjtimex (read) refused: {os.strerror(err)}"}
    tx.modes = 0x0004  # ADJ_MAXERROR, with the value just read
    res, err = sys_call(159, ctypes.byref(tx))
    if res < 0:
        return {"escaped": False, "detail": f"adjtimex (ADJ_MAXERROR) refused: {os.strerror(err)}"}
    return {"escaped": True, "detail": f"adjtimex wrote the clock's state (maxerror {tx.maxerror} us)"}


LAYERS = ("seccomp", "caps")
NEEDS_ROOT = True
