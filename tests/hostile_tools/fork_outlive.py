# Forks a process that outlives the call: the child leaves the session (setsid), names itself
# "tbo-<token>" (so the host can find it) and sleeps 15 s, while the call returns. The zygote ends
# only the call's own process. The host decides: escaped when such a process is still there after
# the call (the host then kills it).
def fork_outlive(token="", **_):
    import os, time
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
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
    except Exception as exc:  # the audit hook held, or there is no ctypes
        return {"escaped": False, "detail": f"no ctypes: {exc!r}"}
    libc.syscall.restype = ctypes.c_long

    def sys_call(nr, *args):  # (result, errno)
        ctypes.set_errno(0)
        res = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
        return res, (ctypes.get_errno() if res < 0 else 0)
    try:
        pid = os.fork()
    except OSError as exc:
        return {"escaped": False, "detail": f"fork refused: {exc}"}
    if pid == 0:
        try:
            os.setsid()
        except OSError:
            pass
        libc.prctl(15, ctypes.c_char_p(("tbo-" + token)[:15].encode()), 0, 0, 0)  # PR_SET_NAME
        time.sleep(15)
        os._exit(0)
    return {"escaped": False, "detail": f"forked {pid}; the host looks for it after the call"}


# pid_namespace is no cure: the namespace (and its init, which adopts the orphan) outlives the call.
LAYERS = ("seccomp",)
NEEDS_ROOT = False
