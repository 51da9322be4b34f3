# unshare(CLONE_NEWUSER): a user namespace of its own, where it is root with every capability
# over what it then creates (mount and network namespaces, mounts...): the way in to most kernel
# attack surface an unprivileged process cannot reach. Then tries the other namespace kinds.
# Escaped: the user namespace was created (the other kinds are reported).
def unshare_ns(**_):
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
    res, err = sys_call(272, 0x10000000)  # unshare(CLONE_NEWUSER)
    user = res == 0
    others = []
    for name, flag in (("mnt", 0x00020000), ("net", 0x40000000), ("uts", 0x04000000), ("ipc", 0x08000000),
                       ("pid", 0x20000000), ("cgroup", 0x02000000), ("time", 0x00000080)):
        r, e = sys_call(272, flag)
        others.append(name if r == 0 else f"no {name} ({os.strerror(e)})")
    detail = ("created a user namespace" if user else f"unshare(CLONE_NEWUSER) refused: {os.strerror(err)}")
    return {"escaped": user, "detail": f"{detail}; then {', '.join(others)}"}


# jail: the kernel refuses a user namespace to a process in a chroot.
LAYERS = ("seccomp", "jail")
NEEDS_ROOT = False
NEEDS = ("user_namespaces",)
