# Puts a process outside the run (`target_pid`, the decoy) under SCHED_IDLE, so that it only
# runs when nothing else wants the CPU: allowed on a process of the same uid without a
# capability. Escaped: the target's scheduling policy is SCHED_IDLE.
def sched_idle_other(target_pid=0, **_):
    import os
    if not target_pid:
        return {"escaped": False, "detail": "no target_pid given"}
    try:
        os.sched_setscheduler(target_pid, os.SCHED_IDLE, os.sched_param(0))
    except OSError as exc:
        return {"escaped": False, "detail": f"sched_setscheduler refused: {exc}"}
    try:
        now = os.sched_getscheduler(target_pid)
    except OSError as exc:
        return {"escaped": True, "detail": f"sched_setscheduler went through (sched_getscheduler: {exc})"}
    return {"escaped": now == os.SCHED_IDLE, "detail": f"the target's policy is now {now}"}


# caps: the kernel refuses to change the scheduling of a process that holds a capability the
# caller lacks (a root harness's processes hold them all); an ordinary user's hold none.
LAYERS = ("seccomp", "pid_namespace", "caps")
NEEDS_ROOT = False
