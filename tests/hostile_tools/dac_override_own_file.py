# Reads a file whose mode says nobody may (a mode-000 file of its own folder): CAP_DAC_OVERRIDE
# ignores file modes, which on the host means every other user's files. Escaped: the read worked.
def dac_override_own_file(**_):
    import os
    with open("secret", "w") as f:
        f.write("mode 000")
    os.chmod("secret", 0)
    try:
        with open("secret") as f:
            got = f.read()
    except OSError as exc:
        return {"escaped": False, "detail": f"refused: {exc}"}
    return {"escaped": True, "detail": f"read a mode-000 file: {got!r}"}


LAYERS = ("caps",)
NEEDS_ROOT = True
