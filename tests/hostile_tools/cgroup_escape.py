# Leaves its memory cgroup (the cap on everything it holds): reads its cgroup in
# /proc/self/cgroup and writes its pid into the parent cgroup's cgroup.procs (the harness's own,
# never the machine's root). Escaped: the write was accepted.
def cgroup_escape(**_):
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
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError as exc:
        return {"escaped": False, "detail": f"/proc/self/cgroup: {exc}"}
    targets = []
    for _id, controllers, path in lines:
        if "memory" in controllers.split(","):
            targets.append(f"/sys/fs/cgroup/memory{os.path.dirname(path)}")
        elif controllers == "" and path != "/":
            targets.append(f"/sys/fs/cgroup{os.path.dirname(path)}")
    tried = []
    for where in targets:
        try:
            with open(os.path.join(where, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            return {"escaped": True, "detail": f"moved itself to {where}"}
        except OSError as exc:
            tried.append(f"{where}: {exc}")
    return {"escaped": False, "detail": f"cgroups {[l[2] for l in lines][:3]}; {tried or 'no memory cgroup to leave'}"}


LAYERS = ("landlock", "jail")
NEEDS_ROOT = True  # an ordinary user may move processes only between the cgroups delegated to it
