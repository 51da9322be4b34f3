# Reads /proc/self/status for its effective capabilities (CapEff), the way a shell user checks
# for a privilege; /proc also shows every process of the host. Escaped: it read a non-zero CapEff.
def proc_status_caps(**_):
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            lines = {k: v.strip() for k, _, v in (line.partition(":") for line in f)}
    except OSError as exc:
        return {"escaped": False, "detail": f"/proc/self/status: {exc}"}
    eff = int(lines.get("CapEff", "0"), 16)
    return {"escaped": eff != 0, "detail": f"CapEff {eff:#x}, CapBnd {lines.get('CapBnd')}"}


LAYERS = ("landlock", "jail", "caps")
NEEDS_ROOT = True
