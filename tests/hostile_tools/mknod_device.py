# Makes a character device node in its own folder and reads through it: with CAP_MKNOD and a
# file system that honours device nodes, the same two steps give the raw disk (8, 0) or kernel
# memory. Here the node is /dev/zero's (1, 5), harmless. Escaped: it read from its own device node.
def mknod_device(**_):
    import os, stat
    try:
        os.mknod("zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except OSError as exc:
        return {"escaped": False, "detail": f"mknod refused: {exc}"}
    try:
        with open("zero", "rb") as f:
            data = f.read(16)
    except OSError as exc:
        return {"escaped": False, "detail": f"made the node, opening it refused: {exc}"}
    return {"escaped": data == bytes(16), "detail": f"read {len(data)} bytes through its own device node"}


# tmpfs: the call's own tmpfs is mounted nodev.
LAYERS = ("seccomp", "caps", "tmpfs")
NEEDS_ROOT = True
