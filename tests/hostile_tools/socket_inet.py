# Opens an internet socket (AF_INET, TCP) through _socket once the audit hook is disabled, and
# tries to reach the harness's host on 127.0.0.1:22: a socket is the way to send what it can
# read to anyone. Escaped: the socket was created (whether it could connect is reported).
def socket_inet(**_):
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
        sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    except Exception as exc:
        return {"escaped": False, "detail": f"socket(AF_INET) refused: {exc!r}"}
    sock.settimeout(0.5)
    try:
        sock.connect(("127.0.0.1", 22))
        reached = "connected to 127.0.0.1:22"
    except OSError as exc:
        reached = f"connect: {exc}"
    sock.close()
    return {"escaped": True, "detail": f"created an AF_INET socket; {reached}"}


LAYERS = ("seccomp",)
NEEDS_ROOT = False
