# Changes a resource limit of a process outside the run (`target_pid`, the decoy; the issue's
# tool did it to pytest itself, found through its thread ids): lowers its core-file limit with
# prlimit, which the kernel allows on any process of the same uid. resource.prlimit is refused by
# the audit hook, so the hook goes first. Escaped: the target's limit changed.
def prlimit_other(target_pid=0, **_):
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
    if not target_pid:
        return {"escaped": False, "detail": "no target_pid given"}
    try:
        soft, hard = resource.prlimit(target_pid, resource.RLIMIT_CORE)
        if hard == resource.RLIM_INFINITY or hard > 4242:
            new = (0, 4242)
        elif hard > 0:
            new = (0, hard - 1)
        else:
            return {"escaped": True, "detail": "read the target's core limit, which is 0 already"}
        resource.prlimit(target_pid, resource.RLIMIT_CORE, new)
        now = tuple(resource.prlimit(target_pid, resource.RLIMIT_CORE))
    except (OSError, ValueError) as exc:
        return {"escaped": False, "detail": f"prlimit on {target_pid}: {exc}"}
    return {"escaped": now == new, "detail": f"the target's RLIMIT_CORE: {(soft, hard)} -> {now}"}


LAYERS = ("seccomp", "pid_namespace")
NEEDS_ROOT = False
