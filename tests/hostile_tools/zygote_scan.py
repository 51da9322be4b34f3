# Looks for the pool's zygotes machine-wide, as the tool did: every process whose
# address-space limit (read with prlimit, which names any pid) equals its own is a zygote of
# some run, its own parent included (pids 1-65535, its parent's and the decoy's). Read-only: it
# changes nothing it finds.
# Escaped: at least one process besides itself (and pid 1) answered with that limit.
def zygote_scan(target_pid=0, **_):
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
    import os, resource, threading
    mine = resource.getrlimit(resource.RLIMIT_AS)
    own = {os.getpid(), 1} | {t.native_id for t in threading.enumerate()}
    found, refused, other = [], 0, 0
    for pid in sorted(set(range(1, 65536)) | {os.getppid(), target_pid} - {0}):
        if pid in own:
            continue
        try:
            limit = resource.prlimit(pid, resource.RLIMIT_AS)
        except ProcessLookupError:
            continue
        except (OSError, ValueError):
            refused += 1
            continue
        other += 1
        if tuple(limit) == tuple(mine):
            found.append(pid)
    return {"escaped": bool(found), "detail": f"{len(found)} processes with our {mine[0] >> 20} MiB limit "
            f"{found[:8]}; {other} other limits read, {refused} refused"}


LAYERS = ("seccomp", "pid_namespace")
NEEDS_ROOT = False
