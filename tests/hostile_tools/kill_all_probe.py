# kill(-1, SIGURG): a signal to every process it may signal, as kill(-1, SIGKILL) would end
# every process of its uid (for root, of the machine). SIGURG is one nothing minds (ignored unless
# handled), and the decoy counts it. The return value cannot tell (the kernel answers 0 even
# when it refused every process), so the host decides: escaped when the decoy received it.
def kill_all_probe(**_):
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
        os.kill(-1, signal.SIGURG)
    except OSError as exc:
        return {"escaped": False, "detail": f"kill(-1, SIGURG) refused: {exc}"}
    return {"escaped": False, "detail": "kill(-1, SIGURG) returned 0 (which it does even when every process refused)"}


# pid_namespace: kill(-1) skips the namespace's init and the caller, and nothing else is there.
# landlock: signals are scoped to the call's own Landlock domain (ABI 6).
LAYERS = ("seccomp", "landlock", "pid_namespace")
NEEDS_ROOT = False
