# Looks for what an earlier call sent or returned (the marker "TOOLBENCH-SECRET-" + "31337",
# never written whole here) in every object the garbage collector knows, frozen ones included,
# and in every frame on the stack and its variables.
def secret_scan():
    import gc, sys
    head, tail = "TOOLBENCH-SECRET-", "31337"
    bhead, btail = head.encode(), tail.encode()
    found = []

    def has(v):
        if isinstance(v, str):
            i = v.find(head)
            while i >= 0:
                if v.startswith(tail, i + len(head)):
                    return True
                i = v.find(head, i + 1)
        elif isinstance(v, (bytes, bytearray, memoryview)):
            b = bytes(v)
            i = b.find(bhead)
            while i >= 0:
                if b.startswith(btail, i + len(bhead)):
                    return True
                i = b.find(bhead, i + 1)
        return False

    def scan(obj, where, depth=0):
        if depth > 6:
            return
        if has(obj):
            found.append(where)
        elif isinstance(obj, dict):
            for k, v in list(obj.items()):
                scan(k, where, depth + 1)
                scan(v, where, depth + 1)
        elif isinstance(obj, (list, tuple, set, frozenset)):
            for v in list(obj):
                scan(v, where, depth + 1)

    frame = sys._getframe()
    while frame is not None:
        scan(dict(frame.f_locals), f"frame {frame.f_code.co_name}")
        frame = frame.f_back
    gc.unfreeze()
    for obj in gc.get_objects():
        if isinstance(obj, (dict, list, tuple, set, frozenset)):
            scan(obj, f"gc {type(obj).__name__}")
        elif hasattr(obj, "__dict__") and isinstance(getattr(obj, "__dict__", None), dict):
            scan(obj.__dict__, f"gc {type(obj).__name__}.__dict__")
    return sorted(set(found))
