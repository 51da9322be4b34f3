# Holds memory outside the call's address-space limit in pipe buffers: pipes grown to 1 MiB
# (F_SETPIPE_SZ), filled without anyone reading, the writing end closed (the buffer stays while
# the reading end is open). Aims at `limit_mb` (all the memory a call may hold) + 128 MiB, at
# most 1.5 GiB; without a privilege a user's pipes stay small past 64 MiB in all.
# Escaped: it held more than `limit_mb` in pipe buffers.
def pipe_hoard(limit_mb=1024, **_):
    import fcntl, os
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
    import resource
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 1 << 16), hard))
    except (OSError, ValueError):
        pass
    goal, held, keep, stop = min(limit_mb + 128, 1536) << 20, 0, [], "its goal"
    chunk = b"\x01" * (1 << 16)
    while held < goal:
        try:
            r, w = os.pipe()
        except OSError as exc:
            stop = f"pipe(): {exc}"
            break
        keep.append(r)
        try:
            size = fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
        except OSError:
            size = 1 << 16
        os.set_blocking(w, False)
        n = 0
        try:
            while n < size:
                n += os.write(w, chunk[: size - n])
        except (BlockingIOError, OSError):
            pass
        os.close(w)
        held += n
    return {"escaped": held > limit_mb << 20, "detail": f"held {held >> 20} MiB in {len(keep)} pipes "
            f"(cap {limit_mb} MiB); stopped at {stop}"}


# caps: without CAP_SYS_RESOURCE/CAP_SYS_ADMIN a user's pipes are held to 2 pages each past
# 64 MiB (fs.pipe-user-pages-soft), and the call's open files are few.
LAYERS = ("seccomp", "cgroup", "caps")
NEEDS_ROOT = True
