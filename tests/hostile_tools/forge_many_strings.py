# Writes its own reply frame on every pipe it holds, then exits before the harness's reply: the
# "content" is a list of many short strings (each under a per-string cap, 40 KB in all).
def forge_many_strings():
    import json, os, struct
    body = json.dumps({"ok": True, "value": {"content": ["ab"] * 8000, "raised": False}}).encode()
    frame = struct.pack(">I", len(body)) + body
    for fd in range(3, 64):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    os._exit(0)
