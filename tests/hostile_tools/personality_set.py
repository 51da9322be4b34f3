# Changes its execution domain with personality(): ADDR_NO_RANDOMIZE turns off address-space
# randomisation for what it would run next, READ_IMPLIES_EXEC makes readable memory
# executable. Puts the old value back. Escaped: the kernel took the new personality.
def personality_set(**_):
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
    old, err = sys_call(135, 0xFFFFFFFF)  # query
    if old < 0:
        return {"escaped": False, "detail": f"personality (query) refused: {os.strerror(err)}"}
    res, err = sys_call(135, old | 0x0040000)  # ADDR_NO_RANDOMIZE
    now, _ = sys_call(135, 0xFFFFFFFF)
    sys_call(135, old)
    if res < 0 or not now & 0x0040000:
        return {"escaped": False, "detail": f"personality(ADDR_NO_RANDOMIZE) refused: {os.strerror(err)}"}
    return {"escaped": True, "detail": f"personality {old:#x} -> {now:#x} (and back)"}


LAYERS = ("seccomp",)
NEEDS_ROOT = False
