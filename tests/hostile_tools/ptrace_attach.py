# Attaches to a process outside the run (`target_pid`, the decoy) with ptrace(PTRACE_SEIZE),
# which would let it read and write the decoy's memory and registers (SEIZE does not stop it;
# the attachment ends with the call). Escaped: the kernel accepted the attachment.
def ptrace_attach(target_pid=0, **_):
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
    res, err = sys_call(101, 0x4206, target_pid, None, None)  # ptrace(PTRACE_SEIZE)
    if res < 0:
        return {"escaped": False, "detail": f"PTRACE_SEIZE refused: {os.strerror(err)}"}
    return {"escaped": True, "detail": f"attached to {target_pid} with PTRACE_SEIZE"}


# landlock: no ptrace of a process outside the call's Landlock domain. caps: ptrace of a process
# holding a capability the caller lacks needs CAP_SYS_PTRACE (the case of a root harness).
# user_namespace: an ordinary user's zygote lives in a user namespace of its own, and tracing a
# process outside it needs CAP_SYS_PTRACE there.
LAYERS = ("seccomp", "landlock", "pid_namespace", "caps", "user_namespace")
NEEDS_ROOT = False
NEEDS = ("ptrace",)  # as an ordinary user, where Yama allows tracing a process that is no descendant
