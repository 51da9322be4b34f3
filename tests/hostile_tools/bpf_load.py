# Creates an eBPF object (an array map with bpf(BPF_MAP_CREATE)): the door to loading programs
# into the kernel, a large attack surface and a way to watch the machine. Closes it again.
# Escaped: the kernel created the map.
def bpf_load(**_):
    import os, struct
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
    attr = ctypes.create_string_buffer(struct.pack("=IIII", 2, 4, 8, 1), 72)  # ARRAY, key 4, value 8, 1 entry
    fd, err = sys_call(321, 0, attr, 72)  # bpf(BPF_MAP_CREATE)
    if fd < 0:
        return {"escaped": False, "detail": f"bpf(BPF_MAP_CREATE) refused: {os.strerror(err)}"}
    os.close(fd)
    return {"escaped": True, "detail": "created an eBPF map"}


# caps: with kernel.unprivileged_bpf_disabled (the usual setting) bpf needs CAP_BPF.
LAYERS = ("seccomp", "caps")
NEEDS_ROOT = True
