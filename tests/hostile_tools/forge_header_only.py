# A length header announcing 3 GB, then silence until killed.
def forge_header_only():
    import os, struct, time
    for fd in range(3, 64):
        try:
            os.write(fd, struct.pack(">I", 3_000_000_000) + b"[[[[")
        except OSError:
            pass
    time.sleep(60)
