# Forged frames of every bad kind, one per pipe: bytes that are not UTF-8, not JSON, an error
# reply whose detail is not text, a length header announcing more than is sent.
def forge_garbage():
    import os, struct
    bodies = [b"\xff\xfe\x00garbage", b"{not json", b'{"ok": false, "detail": {"x": [1]}}', b'{"ok": "yes"}']
    for i, fd in enumerate(range(3, 64)):
        body = bodies[i % len(bodies)]
        try:
            os.write(fd, struct.pack(">I", len(body)) + body)
        except OSError:
            pass
    os._exit(0)
