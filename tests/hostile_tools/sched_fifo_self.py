# Makes its own process real-time (SCHED_FIFO, priority 99): a busy loop there would starve
# every ordinary process on its CPU. Needs CAP_SYS_NICE (or an RLIMIT_RTPRIO above 0). It goes
# back to SCHED_OTHER at once. Escaped: the change to SCHED_FIFO went through.
def sched_fifo_self(**_):
    import os
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))
    except OSError as exc:
        return {"escaped": False, "detail": f"SCHED_FIFO 99 refused: {exc}"}
    policy = os.sched_getscheduler(0)
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return {"escaped": policy == os.SCHED_FIFO, "detail": f"ran under policy {policy} (SCHED_FIFO is {os.SCHED_FIFO})"}


LAYERS = ("caps",)
NEEDS_ROOT = True
