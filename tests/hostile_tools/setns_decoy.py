# Joins the mount namespace of a process outside the run (`target_pid`, the decoy, which lives
# in the host's) with setns on a pidfd: the jail's file-system view is gone, the host's whole
# tree is there to look at. Escaped: setns succeeded (and what it then sees of the host).
def setns_decoy(target_pid=0, **_):
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
    try:
        pidfd = os.pidfd_open(target_pid)
    except OSError as exc:
        return {"escaped": False, "detail": f"pidfd_open refused: {exc}"}
    res, err = sys_call(308, pidfd, 0x00020000)  # setns(pidfd, CLONE_NEWNS)
    os.close(pidfd)
    if res < 0:
        return {"escaped": False, "detail": f"setns into the decoy's mount namespace refused: {os.strerror(err)}"}
    seen = [p for p in ("/etc/hostname", "/proc/1", "/home", "/root") if os.path.lexists(p)]
    return {"escaped": True, "detail": f"in the host's mount namespace; sees {seen}"}


# landlock: joining a namespace through a pidfd needs ptrace-like access to its process, which
# Landlock refuses outside the call's own domain.
LAYERS = ("seccomp", "pid_namespace", "caps", "landlock")
NEEDS_ROOT = True
