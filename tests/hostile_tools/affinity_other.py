# Pins a process outside the run (`target_pid`, the decoy) to one CPU: sched_setaffinity on a
# process of the same uid needs no capability. Escaped: the target's affinity is that one CPU.
def affinity_other(target_pid=0, **_):
    import os
    if not target_pid:
        return {"escaped": False, "detail": "no target_pid given"}
    cpu = max(os.sched_getaffinity(0) or {0})
    try:
        before = os.sched_getaffinity(target_pid)
        os.sched_setaffinity(target_pid, {cpu})
        now = os.sched_getaffinity(target_pid)
    except OSError as exc:
        return {"escaped": False, "detail": f"refused: {exc}"}
    if len(before) < 2:
        return {"escaped": True, "detail": f"sched_setaffinity went through (the target had one CPU: {sorted(before)})"}
    return {"escaped": now == {cpu}, "detail": f"the target's CPUs: {sorted(before)} -> {sorted(now)}"}


# caps: the kernel refuses to change the scheduling of a process that holds a capability the
# caller lacks (a root harness's processes hold them all); an ordinary user's hold none.
LAYERS = ("seccomp", "pid_namespace", "caps")
NEEDS_ROOT = False
