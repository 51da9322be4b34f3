# Reads its own capability sets (capget; the bounding set with prctl(PR_CAPBSET_READ), which
# no filter refuses): any capability held is a door to the kernel's privileged paths (setting
# the clock, reading the kernel log, watching file systems...). Escaped: it holds an effective
# or permitted capability, or (as root) a non-empty bounding set.
def capget_sets(**_):
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

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()
    res, err = sys_call(125, ctypes.byref(header), ctypes.byref(data))  # capget
    eff = prm = None
    if res == 0:
        eff = data[0].effective | data[1].effective << 32
        prm = data[0].permitted | data[1].permitted << 32
    bounding = 0
    for cap in range(64):
        r, e = sys_call(157, 23, cap, 0, 0, 0)  # prctl(PR_CAPBSET_READ, cap)
        if r < 0:
            break
        bounding |= r << cap
    escaped = bool(eff) or bool(prm) or (bounding != 0 and os.geteuid() == 0)
    shown = "capget refused: " + os.strerror(err) if eff is None else f"effective {eff:#x}, permitted {prm:#x}"
    return {"escaped": escaped, "detail": f"{shown}, bounding {bounding:#x}, euid {os.geteuid()}"}


LAYERS = ("caps",)
NEEDS_ROOT = True
