# kill(0, SIGKILL): every process of its process group, which is the zygote's (each call is a
# fork of it), dies; the pool then has to start a new zygote, and a call in flight elsewhere in
# the group dies with it. The tool dies too, so the host decides: escaped when the zygote died.
def kill_group_zero(**_):
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
    try:
        os.kill(0, signal.SIGKILL)
    except OSError as exc:
        return {"escaped": False, "detail": f"kill(0, SIGKILL) refused: {exc}"}
    return {"escaped": False, "detail": "kill(0, SIGKILL) returned and the call lives: its group held only itself"}


# landlock: signals are scoped to the call's own Landlock domain (ABI 6).
LAYERS = ("seccomp", "landlock")
NEEDS_ROOT = False
