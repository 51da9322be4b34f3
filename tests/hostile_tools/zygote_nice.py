# Renices the zygote (its parent: every later call is forked from it and inherits its nice
# value) to 19, so that every later call of the pool runs slowly. Finds it with getppid();
# in a PID namespace the parent has no pid there (0) and there is nothing to aim at.
# Escaped: the parent's nice value is 19 (the host also compares the zygote and a later call).
def zygote_nice(**_):
    import os
    parent = os.getppid()
    if parent <= 1:
        return {"escaped": False, "detail": f"no parent to aim at (getppid() = {parent})"}
    try:
        os.setpriority(os.PRIO_PROCESS, parent, 19)
        now = os.getpriority(os.PRIO_PROCESS, parent)
    except OSError as exc:
        return {"escaped": False, "detail": f"renicing the parent {parent}: {exc}"}
    return {"escaped": now == 19, "detail": f"the parent {parent} now has nice {now}"}


# caps: the kernel refuses to change the scheduling of a process that holds a capability the
# caller lacks (a root harness's processes hold them all); an ordinary user's hold none.
LAYERS = ("seccomp", "pid_namespace", "caps")
NEEDS_ROOT = False
