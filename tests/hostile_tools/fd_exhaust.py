# Opens files until it cannot (raising its own open-file limit to the hard limit first, at most
# 2^20): the kernel's file tables are shared with the whole machine. No layer is claimed: the
# call, the zygote and the calls after it must survive it, and the count is reported
# ("escaped" is informational: more than 4096 open at once).
def fd_exhaust(**_):
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
    import resource
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 1 << 20), hard))
    except (OSError, ValueError):
        pass
    fds, stop = [], "its goal"
    try:
        while len(fds) < 1 << 20:
            fds.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as exc:
        stop = str(exc)
    for fd in fds:
        os.close(fd)
    return {"escaped": len(fds) > 4096, "detail": f"{len(fds)} files open at once; stopped at {stop}"}


LAYERS = ()
NEEDS_ROOT = False
