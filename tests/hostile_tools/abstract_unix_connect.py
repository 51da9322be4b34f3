# Connects to an abstract unix socket of the host (the harness listens on
# "\0toolbench-canary-<token>"; an X server, D-Bus or a container runtime listen the same way):
# abstract names are not files, so file rules do not see them.
# Escaped: the connection was accepted (the host also sees it arrive).
def abstract_unix_connect(token="", **_):
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
    if not token:
        return {"escaped": False, "detail": "no token given"}
    try:
        import _socket
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except Exception as exc:
        return {"escaped": False, "detail": f"socket(AF_UNIX) refused: {exc!r}"}
    try:
        sock.connect("\0toolbench-canary-" + token)
    except OSError as exc:
        return {"escaped": False, "detail": f"connect refused: {exc}"}
    finally:
        sock.close()
    return {"escaped": True, "detail": "connected to the harness's abstract socket"}


# namespaces: abstract sockets belong to a network namespace. landlock: abstract unix sockets
# are scoped to the call's own Landlock domain (ABI 6).
LAYERS = ("seccomp", "namespaces", "landlock")
NEEDS_ROOT = False
