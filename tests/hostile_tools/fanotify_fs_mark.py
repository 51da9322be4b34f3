# Watches every file opened on a whole file system: a fanotify mark with FAN_MARK_FILESYSTEM,
# placed through a path the call may read (the standard library's folder, a read-only bind
# mount of the host's file system), reporting the name of each file opened or read there by
# any process of the machine. Listens for `seconds`, opening nothing itself meanwhile.
# Escaped: it saw events caused by a process other than itself (the names are returned).
def fanotify_fs_mark(seconds=1.5, **_):
    import os, struct, time
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
    libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
    libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
    # FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_NONBLOCK | FAN_CLOEXEC
    fd = libc.fanotify_init(0x0 | 0xC00 | 0x2 | 0x1, os.O_RDONLY)
    if fd < 0:
        return {"escaped": False, "detail": f"fanotify_init refused: {os.strerror(ctypes.get_errno())}"}
    where = os.path.dirname(os.__file__)
    mask = 0x1 | 0x10 | 0x20  # FAN_ACCESS | FAN_CLOSE_NOWRITE | FAN_OPEN
    # FAN_MARK_ADD | FAN_MARK_FILESYSTEM; AT_FDCWD
    if libc.fanotify_mark(fd, 0x1 | 0x100, mask, -100, where.encode()) < 0:
        err = ctypes.get_errno()
        os.close(fd)
        return {"escaped": False, "detail": f"fanotify_mark(FAN_MARK_FILESYSTEM, {where}) refused: {os.strerror(err)}"}
    own, names, others = os.getpid(), [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            buf = os.read(fd, 65536)
        except BlockingIOError:
            time.sleep(0.02)
            continue
        off = 0
        while off + 24 <= len(buf):
            event_len, _vers, _res, meta_len, _mask, _efd, pid = struct.unpack_from("=IBBHQii", buf, off)
            if event_len < 24:
                break
            if pid != own:
                others += 1
                info = off + meta_len
                while info + 4 <= off + event_len:
                    kind, _pad, length = struct.unpack_from("=BBH", buf, info)
                    if kind == 2 and length > 20:  # FAN_EVENT_INFO_TYPE_DFID_NAME: fsid, handle, name
                        handle_bytes = struct.unpack_from("=I", buf, info + 12)[0]
                        start = info + 20 + handle_bytes
                        name = buf[start: info + length].split(b"\0", 1)[0].decode("utf-8", "replace")
                        if name and name not in names:
                            names.append(name)
                    if length == 0:
                        break
                    info += length
            off += event_len
    os.close(fd)
    return {"escaped": others > 0, "detail": f"{others} events of other processes on the whole file system, "
            f"{len(names)} names: {names[:12]}"}


LAYERS = ("seccomp", "caps")
NEEDS_ROOT = True
