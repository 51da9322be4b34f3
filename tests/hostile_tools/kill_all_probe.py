# kill(-1, 0): signal 0 to every process it may signal (nothing is delivered: the kernel only
# checks the permission; with SIGKILL the same call kills every process of its uid, for root
# every process of the machine). Escaped: the kernel found at least one process it could signal.
def kill_all_probe(**_):
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
        os.kill(-1, 0)
    except OSError as exc:
        return {"escaped": False, "detail": f"kill(-1, 0) refused: {exc}"}
    return {"escaped": True, "detail": "kill(-1, 0) succeeded: some process outside the call may be signalled"}


# pid_namespace: kill(-1) skips the namespace's init and the caller, and nothing else is there.
LAYERS = ("seccomp", "landlock", "pid_namespace")
NEEDS_ROOT = False
