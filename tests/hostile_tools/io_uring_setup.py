# Sets up an io_uring: its operations (open, read, write, connect, socket...) run in the kernel
# without the system calls a seccomp filter inspects, and it has been a rich source of kernel
# bugs. Closes it again. Escaped: io_uring_setup returned a ring.
def io_uring_setup(**_):
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
    params = ctypes.create_string_buffer(120)
    fd, err = sys_call(425, 4, params)  # io_uring_setup(4 entries)
    if fd < 0:
        return {"escaped": False, "detail": f"io_uring_setup refused: {os.strerror(err)}"}
    os.close(fd)
    return {"escaped": True, "detail": "set up an io_uring"}


LAYERS = ("seccomp",)
NEEDS_ROOT = False
NEEDS = ("io_uring",)
