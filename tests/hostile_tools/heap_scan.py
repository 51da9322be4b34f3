# Reads the memory it inherited from the zygote (heap and the regions around live objects) with
# ctypes, through pwrite() to a file of its own (EFAULT instead of a crash where nothing is
# mapped; a pipe would do too, but the syscall filter refuses pipes), looking
# for what an earlier call sent or returned ("TOOLBENCH-SECRET-" + "31337", never whole here).
# Needs ctypes, which the audit hook refuses: run with that hook off.
def heap_scan():
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sbrk.restype = ctypes.c_void_p
    libc.malloc.restype = ctypes.c_void_p
    head, tail = b"TOOLBENCH-SECRET-", b"31337"
    page = 1 << 16
    fd = os.open("scan", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)

    def read(addr):
        n = libc.pwrite(fd, ctypes.c_void_p(addr), page, 0)
        return os.pread(fd, n, 0) if n > 0 else None

    seeds = [libc.sbrk(0), libc.malloc(1 << 20), libc.malloc(64), id(head), id(os), id(ctypes)]
    seen, hits, scanned = set(), 0, 0
    for seed in seeds:
        if not seed:
            continue
        base = seed - seed % page
        for step in (-page, page):
            addr = base if step > 0 else base - page
            for _ in range(4096):  # 256 MiB each way at most
                if addr in seen or addr <= 0:
                    break
                seen.add(addr)
                data = read(addr)
                if data is None:
                    break
                scanned += len(data)
                i = data.find(head)
                while i >= 0:
                    if data.startswith(tail, i + len(head)):
                        hits += 1
                    i = data.find(head, i + 1)
                addr += step
    return {"hits": hits, "scanned_mb": scanned >> 20}
