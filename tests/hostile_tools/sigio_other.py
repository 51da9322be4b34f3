# Has the kernel signal a process outside the run (`target_pid`, the decoy) for it: F_SETOWN
# names that process as the owner of its reply pipe, F_SETSIG picks the signal (SIGURG here;
# SIGKILL works the same) and O_ASYNC asks for it whenever the pipe has room again, which the
# zygote brings about by reading the byte it writes (its reply is spoilt: the host decides).
# Only fcntl and write are used. Escaped: the decoy received the signal.
def sigio_other(target_pid=0, **_):
    import fcntl, os, signal, stat, time
    if not target_pid:
        return {"escaped": False, "detail": "no target_pid given"}
    pipes = []
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                pipes.append(fd)
        except OSError:
            pass
    if not pipes:
        return {"escaped": False, "detail": "no pipe open for writing"}
    armed, refused = [], []
    for fd in pipes:
        try:
            fcntl.fcntl(fd, fcntl.F_SETOWN, target_pid)
            fcntl.fcntl(fd, 10, int(signal.SIGURG))  # F_SETSIG
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
            armed.append(fd)
        except OSError as exc:
            refused.append(f"{fd}: {exc}")
    for fd in armed:
        os.write(fd, b"\0")
    time.sleep(0.3)
    return {"escaped": False, "detail": f"armed SIGURG to {target_pid} on pipes {armed}; refused {refused}"}


# pid_namespace: F_SETOWN cannot name a pid outside it. landlock: a signal sent for a file is
# scoped like any other (ABI 6; Linux 6.12). seccomp: F_SETOWN names another pid, which the
# filter must refuse where neither of the others is there (an ordinary user without user
# namespaces on a kernel before 6.12, e.g. Ubuntu 24.04's 6.8).
LAYERS = ("landlock", "pid_namespace", "seccomp")
NEEDS_ROOT = False
