# Reads the kernel log (syslog(SYSLOG_ACTION_READ_ALL), glibc's klogctl, through ctypes once
# the audit hook is disabled): host-wide state, addresses and messages of other processes.
# Escaped: it read bytes of the log (their count and first line are returned).
def kernel_log(**_):
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
    size = libc.klogctl(10, None, 0)  # SYSLOG_ACTION_SIZE_BUFFER
    if size <= 0:
        size = 1 << 16
    buf = ctypes.create_string_buffer(size)
    got = libc.klogctl(3, buf, size)  # SYSLOG_ACTION_READ_ALL
    if got < 0:
        return {"escaped": False, "detail": f"klogctl(READ_ALL) refused: {os.strerror(ctypes.get_errno())}"}
    first = buf.raw[:got].split(b"\n", 1)[0][:100].decode("utf-8", "replace")
    return {"escaped": got > 0, "detail": f"read {got} bytes of the kernel log; first line: {first!r}"}


# caps: with kernel.dmesg_restrict=1 (the usual setting) reading it needs CAP_SYSLOG.
LAYERS = ("seccomp", "caps")
NEEDS_ROOT = True
