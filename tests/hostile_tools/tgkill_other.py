# Stops a process outside the run (`target_pid`, the decoy) with tgkill(pid, pid, SIGSTOP)
# through ctypes, the raw thread-directed signal (os.kill is what the audit hook watches).
# Escaped: the signal was accepted (the host also sees the decoy stopped).
def tgkill_other(target_pid=0, **_):
    import os, signal
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
    if not target_pid:
        return {"escaped": False, "detail": "no target_pid given"}
    res, err = sys_call(234, target_pid, target_pid, int(signal.SIGSTOP))  # tgkill
    if res < 0:
        return {"escaped": False, "detail": f"tgkill refused: {os.strerror(err)}"}
    return {"escaped": True, "detail": f"tgkill({target_pid}, SIGSTOP) accepted"}


LAYERS = ("seccomp", "landlock", "pid_namespace")
NEEDS_ROOT = False
