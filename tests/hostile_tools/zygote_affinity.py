# Pins the zygote (its parent, found with getppid()) to one CPU: every later call inherits it.
# Escaped: the parent's affinity is that one CPU (or, on a one-CPU machine, the call went through).
def zygote_affinity(**_):
    import os
    parent = os.getppid()
    if parent <= 1:
        return {"escaped": False, "detail": f"no parent to aim at (getppid() = {parent})"}
    cpu = min(os.sched_getaffinity(0) or {0})
    try:
        before = os.sched_getaffinity(parent)
        os.sched_setaffinity(parent, {cpu})
        now = os.sched_getaffinity(parent)
    except OSError as exc:
        return {"escaped": False, "detail": f"re-pinning the parent {parent}: {exc}"}
    return {"escaped": now == {cpu}, "detail": f"the parent's CPUs: {sorted(before)} -> {sorted(now)}"}


# caps: the kernel refuses to change the scheduling of a process that holds a capability the
# caller lacks (a root harness's processes hold them all); an ordinary user's hold none.
LAYERS = ("seccomp", "pid_namespace", "caps")
NEEDS_ROOT = False
