# A forged reply frame of 57 MB of short strings, written on every pipe it holds.
def forge_huge():
    import json, os, struct
    body = json.dumps({"ok": True, "value": {"content": ["abcdefgh"] * 5_000_000, "raised": False}}).encode()
    frame = struct.pack(">I", len(body)) + body
    for fd in range(3, 64):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    os._exit(0)
