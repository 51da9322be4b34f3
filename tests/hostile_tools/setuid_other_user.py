# Becomes another user (setresuid to nobody, 65534, or its own uid + 1): with CAP_SETUID a call
# can take any uid, and with it that user's files and processes. Escaped: its uid changed.
def setuid_other_user(**_):
    import os
    before = os.getresuid()
    other = 65534 if before[1] != 65534 else before[1] + 1
    try:
        os.setresuid(other, other, other)
    except OSError as exc:
        return {"escaped": False, "detail": f"setresuid({other}) refused: {exc}"}
    return {"escaped": os.geteuid() == other, "detail": f"uids {before} -> {os.getresuid()}"}


LAYERS = ("seccomp", "caps")
NEEDS_ROOT = True
