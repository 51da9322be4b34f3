# Makes SysV IPC objects (a shared-memory segment, a message queue, a semaphore set): they
# outlive the process that made them, so they are a channel from one call to the next (and to
# anything sharing the IPC namespace), outside the file rules. Removes what it made.
# Escaped: any of the three was created.
def sysv_ipc(**_):
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
    made, refused = [], []
    for what, nr, args, rm in (("shm", 29, (0, 4096, 0o1600), (31, 0, None)),    # shmget / shmctl(IPC_RMID)
                               ("msg", 68, (0, 0o1600), (71, 0, None)),          # msgget / msgctl
                               ("sem", 64, (0, 1, 0o1600), (66, 0, 0))):         # semget / semctl
        ident, err = sys_call(nr, *args)
        if ident < 0:
            refused.append(f"{what}: {os.strerror(err)}")
            continue
        made.append(what)
        sys_call(rm[0], ident, *rm[1:])
    return {"escaped": bool(made), "detail": f"created {made}; refused {refused}"}


LAYERS = ("seccomp",)
NEEDS_ROOT = False
