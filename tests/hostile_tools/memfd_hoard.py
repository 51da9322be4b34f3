# Holds memory outside the call's address-space limit in memfds: anonymous files written (not
# mapped) 8 MiB each, under the file-size limit, kept open. Aims at `limit_mb` (all the memory a
# call may hold) + 128 MiB, at most 1.5 GiB. Escaped: it held more than `limit_mb` in memfds.
def memfd_hoard(limit_mb=1024, **_):
    import os
    goal, held, fds, stop = min(limit_mb + 128, 1536) << 20, 0, [], "its goal"
    chunk = b"\x01" * (1 << 20)
    try:
        while held < goal:
            fd = os.memfd_create("hoard")
            fds.append(fd)
            for _ in range(8):
                held += os.write(fd, chunk)
    except OSError as exc:
        stop = f"{exc}"
    return {"escaped": held > limit_mb << 20, "detail": f"held {held >> 20} MiB in {len(fds)} memfds "
            f"(cap {limit_mb} MiB); stopped at {stop}"}


LAYERS = ("seccomp", "cgroup")
NEEDS_ROOT = False
