# A forged reply whose value is a list where the harness expects {"content": str, ...}.
def forge_wrong_shape():
    import os, struct
    body = b'{"ok": true, "value": [1, 2, 3]}'
    for fd in range(3, 64):
        try:
            os.write(fd, struct.pack(">I", len(body)) + body)
        except OSError:
            pass
    os._exit(0)
