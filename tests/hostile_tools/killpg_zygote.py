# killpg(the zygote's process group, SIGKILL), the group found with getpgid() of its parent or
# of itself: the zygote and everything it forked die. The tool dies too if the signal goes out,
# so the host decides: escaped when the zygote died.
def killpg_zygote(**_):
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
    group = 0
    for pid in (os.getppid(), 0):
        try:
            group = os.getpgid(pid)
        except OSError:
            continue
        if group > 1:
            break
    if group <= 1:
        return {"escaped": False, "detail": f"no process group to aim at (getpgid: {group})"}
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError as exc:
        return {"escaped": False, "detail": f"killpg({group}, SIGKILL) refused: {exc}"}
    return {"escaped": False, "detail": f"killpg({group}) returned and the call lives"}


# landlock: signals are scoped to the call's own Landlock domain (ABI 6). pid_namespace: the
# group's leader, outside the namespace, has no pid there (getpgid answers 0).
LAYERS = ("seccomp", "landlock", "pid_namespace")
NEEDS_ROOT = False
