# Reaches the kernel keyrings: the user keyring is shared by every process of the uid (for
# root, the whole machine's root processes) and outlives them, a store for secrets and a
# channel between calls. Reads its id and how many keys it holds; stores nothing.
# Escaped: keyctl answered with the keyring.
def keyctl_user_keyring(**_):
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
    ring, err = sys_call(250, 0, -4, 0)  # keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, create=0)
    if ring < 0:
        return {"escaped": False, "detail": f"keyctl refused: {os.strerror(err)}"}
    size, _ = sys_call(250, 11, ring, None, 0)  # KEYCTL_READ: the length of its list of key ids
    return {"escaped": True, "detail": f"user keyring {ring} holds {max(size, 0) // 4} keys"}


LAYERS = ("seccomp",)
NEEDS_ROOT = False
