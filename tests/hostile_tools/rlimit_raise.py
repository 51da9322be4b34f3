# Raises its own hard limits back (address space and CPU time to unlimited): what caps a call's
# memory and time where no cgroup does. Needs CAP_SYS_RESOURCE (which a root harness in a
# container may lack: then it cannot be shown). Escaped: a hard limit went up.
def rlimit_raise(**_):
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
    raised, refused = [], []
    for name in ("RLIMIT_AS", "RLIMIT_CPU"):
        which = getattr(resource, name)
        soft, hard = resource.getrlimit(which)
        if hard == resource.RLIM_INFINITY:
            continue
        try:
            resource.setrlimit(which, (soft, resource.RLIM_INFINITY))
            raised.append(name)
        except (OSError, ValueError) as exc:
            refused.append(f"{name}: {exc}")
    return {"escaped": bool(raised), "detail": f"raised {raised}; refused {refused}"}


LAYERS = ("caps",)
NEEDS_ROOT = True
NEEDS = ("CAP_SYS_RESOURCE",)
