# Mounts a file system (a tmpfs inside its own folder): a mount lives in the zygote's mount
# namespace, not in the call, and mounting at all is the door to remounting the jail's read-only
# binds read-write or hiding paths from later calls. Unmounts it again.
# Escaped: the mount succeeded.
def mount_tmpfs(**_):
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
    os.mkdir("mnt")
    target = os.path.abspath("mnt").encode()
    if libc.mount(b"none", target, b"tmpfs", ctypes.c_ulong(0), b"size=1m") != 0:
        return {"escaped": False, "detail": f"mount refused: {os.strerror(ctypes.get_errno())}"}
    libc.umount2(target, 2)
    return {"escaped": True, "detail": "mounted a tmpfs (and unmounted it)"}


# landlock: a process under Landlock may not change the mount topology.
LAYERS = ("seccomp", "caps", "landlock")
NEEDS_ROOT = True
