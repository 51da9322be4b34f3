# Stops a process outside the run (`target_pid`, the decoy) through a pidfd: pidfd_open, then
# pidfd_send_signal(SIGSTOP), the calls a blocklist of kill() would miss.
# Escaped: the signal was accepted (the host also sees the decoy stopped).
def pidfd_signal_other(target_pid=0, **_):
    import os, signal
    if not target_pid:
        return {"escaped": False, "detail": "no target_pid given"}
    try:
        fd = os.pidfd_open(target_pid)
    except OSError as exc:
        return {"escaped": False, "detail": f"pidfd_open refused: {exc}"}
    try:
        signal.pidfd_send_signal(fd, signal.SIGSTOP)
    except OSError as exc:
        return {"escaped": False, "detail": f"pidfd_send_signal refused: {exc}"}
    finally:
        os.close(fd)
    return {"escaped": True, "detail": f"SIGSTOP sent to {target_pid} through a pidfd"}


LAYERS = ("seccomp", "landlock", "pid_namespace")
NEEDS_ROOT = False
