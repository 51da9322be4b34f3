# A forged reply whose value is nested just under the JSON decoder's limit: walking it
# recursively after decoding overflows the stack of whoever does.
def forge_deep_value():
    import os, struct
    body = b'{"ok": true, "value": {"content": ' + b"[" * 970 + b"]" * 970 + b', "raised": false}}'
    for fd in range(3, 64):
        try:
            os.write(fd, struct.pack(">I", len(body)) + body)
        except OSError:
            pass
    os._exit(0)
