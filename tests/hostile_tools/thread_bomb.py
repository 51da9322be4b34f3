# Starts threads (small stacks) until the kernel or its limits refuse one, at most 1000, all
# alive at once, then lets them end: a bomb without a cap takes the machine's pids and memory.
# No layer is claimed: the call, the zygote and the calls after it must survive it, and the
# count is reported ("escaped" is informational: all 1000 started).
# _thread, not threading: at the memory cap a new thread can fail (MemoryError) before it says
# it started, and threading.Thread.start() then waits for it forever (the call ran into its
# 30 s wall-clock limit). Here every wait has a bound: 2 s for a new thread to run, 8 s for
# starting them all, 5 s for them to end once released; each thread holds until released or
# 20 s (so all it started are alive at once), and the call ends well within its 30 s.
def thread_bomb(**_):
    import _thread, time
    _thread.stack_size(64 * 1024)
    slots = bytearray(1000)  # per thread: 0 not running (yet), 1 alive and held, 2 released, 3 gave up
    gate, ready = _thread.allocate_lock(), _thread.allocate_lock()
    gate.acquire()
    ready.acquire()

    def hold(i):
        slots[i] = 1
        ready.release()  # running: the next one may start
        if gate.acquire(True, 20):
            gate.release()  # the next one through
            slots[i] = 2
        else:
            slots[i] = 3

    started, stop, budget = 0, "its goal (1000)", time.monotonic() + 8
    try:
        while started < 1000:
            if time.monotonic() > budget:
                stop = "its time budget (8 s)"
                break
            _thread.start_new_thread(hold, (started,))
            started += 1
            if not ready.acquire(True, 2):
                stop = "a thread that never ran (2 s)"
                break
    except (RuntimeError, MemoryError, OSError) as exc:
        stop = f"{type(exc).__name__}: {exc}"
    alive = slots.count(1)  # all held at this moment: none is released before the gate opens
    gate.release()
    end = time.monotonic() + 5
    while slots.count(1) and time.monotonic() < end:
        time.sleep(0.01)
    return {"escaped": alive >= 1000,
            "detail": f"{alive} threads alive at once ({started} started); stopped at {stop}"}


LAYERS = ()
NEEDS_ROOT = False
