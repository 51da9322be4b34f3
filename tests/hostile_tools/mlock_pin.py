# Pins memory so that it can never be swapped out (mlock of 32 MiB, or more than its
# RLIMIT_MEMLOCK): with CAP_IPC_LOCK the limit does not apply, and locked memory squeezes the
# whole machine. Unlocks it again. Escaped: it locked more than its RLIMIT_MEMLOCK allows.
def mlock_pin(**_):
    import mmap, os, resource
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
    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft == resource.RLIM_INFINITY or soft >= 48 << 20:
        return {"escaped": False, "detail": f"RLIMIT_MEMLOCK is {soft}: too high to tell a privilege from the limit"}
    size = max(32 << 20, soft + (16 << 20))
    try:
        area = mmap.mmap(-1, size)
    except (OSError, ValueError) as exc:
        return {"escaped": False, "detail": f"mmap of {size >> 20} MiB: {exc}"}
    addr = ctypes.addressof(ctypes.c_char.from_buffer(area))
    libc.mlock.argtypes = libc.munlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    if libc.mlock(addr, size) != 0:
        return {"escaped": False, "detail": f"mlock of {size >> 20} MiB refused: {os.strerror(ctypes.get_errno())}"}
    libc.munlock(addr, size)
    return {"escaped": True, "detail": f"locked {size >> 20} MiB (RLIMIT_MEMLOCK {soft >> 20} MiB)"}


LAYERS = ("seccomp", "caps")
NEEDS_ROOT = True
