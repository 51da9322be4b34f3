# Renices a process outside the run (`target_pid`: the decoy the test started) to 19, as a tool
# slowing the harness would: a call shares its uid with the harness, and the kernel lets a
# process raise the nice value of any process of its own uid without a capability.
# Escaped: the setpriority call went through (the host also reads the decoy's nice value).
def renice_other(target_pid=0, **_):
    import os
    if not target_pid:
        return {"escaped": False, "detail": "no target_pid given"}
    try:
        os.setpriority(os.PRIO_PROCESS, target_pid, 19)
    except OSError as exc:
        return {"escaped": False, "detail": f"setpriority refused: {exc}"}
    try:
        now = os.getpriority(os.PRIO_PROCESS, target_pid)
    except OSError as exc:
        return {"escaped": True, "detail": f"setpriority went through (getpriority: {exc})"}
    return {"escaped": now == 19, "detail": f"the target's nice value is now {now}"}


# caps: the kernel refuses to change the scheduling of a process that holds a capability the
# caller lacks (a root harness's processes hold them all); an ordinary user's hold none.
LAYERS = ("seccomp", "pid_namespace", "caps")
NEEDS_ROOT = False
