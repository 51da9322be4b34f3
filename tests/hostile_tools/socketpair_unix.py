# Makes a connected pair of unix sockets (socketpair): with it a process can pass file
# descriptors around (SCM_RIGHTS) and keep them in flight beyond its open-file limit.
# Escaped: the pair was created.
def socketpair_unix(**_):
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
        import _socket
        a, b = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except Exception as exc:
        return {"escaped": False, "detail": f"socketpair refused: {exc!r}"}
    a.close()
    b.close()
    return {"escaped": True, "detail": "created a unix socket pair"}


LAYERS = ("seccomp",)
NEEDS_ROOT = False
