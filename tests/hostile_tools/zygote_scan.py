# Looks for the pool's zygotes machine-wide, as the tool did: reads the address-space
# limit of every process (prlimit names any pid; pids 1-65535, its parent's and the decoy's) and
# lists those whose limit equals its parent's (the zygote's: a call lowers its own per call, so
# its own limit matches only calls running at that moment). Read-only: it changes nothing.
# Escaped: the limits of a process besides itself (and pid 1, a PID namespace's init) were
# read at all; that is the leak zygotes were found by. Counting only matches made the result
# depend on which other calls happened to be running (flaky).
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
    try:
        zygote = tuple(resource.prlimit(os.getppid(), resource.RLIMIT_AS))
    except (OSError, ValueError):
        zygote = None
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
        if tuple(limit) in (tuple(mine), zygote):
            found.append(pid)
    return {"escaped": other > 0, "detail": f"{other} other processes' limits read, {refused} refused; "
            f"{len(found)} with our own {mine[0] >> 20} MiB or our parent's limit {found[:8]}"}


LAYERS = ("seccomp", "pid_namespace")
NEEDS_ROOT = False
