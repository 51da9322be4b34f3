# Signals the harness itself (`harness_pid`, the pytest process): kill(pid, 0), which delivers
# nothing but passes every permission check a real signal would (SIGSTOP or SIGKILL there
# would stop or end the whole run). Escaped: the kernel let it signal the harness.
def signal_pytest(harness_pid=0, **_):
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
    if not harness_pid:
        return {"escaped": False, "detail": "no harness_pid given"}
    try:
        os.kill(harness_pid, 0)
    except OSError as exc:
        return {"escaped": False, "detail": f"kill({harness_pid}, 0) refused: {exc}"}
    return {"escaped": True, "detail": f"kill({harness_pid}, 0) allowed: it may signal the harness"}


LAYERS = ("seccomp", "landlock", "pid_namespace")
NEEDS_ROOT = False
