# Starts threads (small stacks) until the kernel or its limits refuse one, at most 1000, all
# alive at once, then lets them end: a bomb without a cap takes the machine's pids and memory.
# No layer is claimed: the call, the zygote and the calls after it must survive it, and the
# count is reported ("escaped" is informational: all 1000 started).
def thread_bomb(**_):
    import threading
    threading.stack_size(64 * 1024)
    release, started, stop = threading.Event(), [], "its goal (1000)"
    try:
        while len(started) < 1000:
            t = threading.Thread(target=release.wait, args=(30,), daemon=True)
            t.start()
            started.append(t)
    except (RuntimeError, MemoryError, OSError) as exc:
        stop = f"{type(exc).__name__}: {exc}"
    release.set()
    for t in started:
        t.join(5)
    return {"escaped": len(started) >= 1000, "detail": f"{len(started)} threads alive at once; stopped at {stop}"}


LAYERS = ()
NEEDS_ROOT = False
