# Blocks the host's writes to a file it may read (`watched`, a standard-library file): a read
# lease (fcntl F_SETLEASE, F_RDLCK), which its owner may take on a file opened read-only.
# Anyone then opening the file to write waits for the lease to go (up to the kernel's
# lease-break-time, usually 45 s), or gets EWOULDBLOCK with O_NONBLOCK, which is how the host
# checks while it holds the lease for `seconds`. Escaped: the lease was taken.
def lease_block(seconds=1.5, watched="this.py", **_):
    import fcntl, os, signal, time
    path = os.path.join(os.path.dirname(os.__file__), os.path.basename(watched))
    breaks = []
    signal.signal(signal.SIGIO, lambda *args: breaks.append(1))
    try:
        fd = os.open(path, os.O_RDONLY)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except OSError as exc:
        return {"escaped": False, "detail": f"F_SETLEASE on {path} refused: {exc}"}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.02)
    os.close(fd)
    return {"escaped": True, "detail": f"held a read lease on {path} for {seconds} s; {len(breaks)} lease breaks asked"}


LAYERS = ("seccomp",)
NEEDS_ROOT = True  # a lease needs the file's owner (root owns the standard library) or CAP_LEASE
