# Writes a file in /dev/shm (the machine's shared-memory tmpfs, outside its own folder; the name
# is the harness's, /dev/shm/toolbench-attack-<token>, which the host checks for and removes):
# a file there outlives the call, takes the host's RAM and is read by anyone.
# Escaped: the file was written.
def dev_shm_write(token="", **_):
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
    path = "/dev/shm/toolbench-attack-" + token
    try:
        with open(path, "wb") as f:
            f.write(b"left by a tool call\n")
    except OSError as exc:
        return {"escaped": False, "detail": f"writing {path}: {exc}"}
    return {"escaped": True, "detail": f"wrote {path}"}


LAYERS = ("landlock", "jail")
NEEDS_ROOT = False
