# SIGKILL to its parent, the zygote (getppid()): the pool must start another, and the call
# itself dies with it (its parent-death signal). The host decides: escaped when the zygote died.
def zygote_kill(**_):
    import os, signal
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
    parent = os.getppid()
    if parent <= 1:
        return {"escaped": False, "detail": f"no parent to aim at (getppid() = {parent})"}
    try:
        os.kill(parent, signal.SIGKILL)
    except OSError as exc:
        return {"escaped": False, "detail": f"kill({parent}, SIGKILL) refused: {exc}"}
    return {"escaped": False, "detail": f"kill({parent}, SIGKILL) returned and the call lives"}


LAYERS = ("seccomp", "landlock", "pid_namespace")
NEEDS_ROOT = False
