# Writes 1 MiB files until the disk cap stops it (stops by itself at 96 MiB so that a sandbox
# without a cap is not filled): returns how much got written and the error that stopped it.
def disk_flood():
    import os
    written = 0
    try:
        while written < 96:
            with open(f"blob-{written}", "wb") as f:
                f.write(b"\0" * (1024 * 1024))
                f.flush()
                os.fsync(f.fileno())
            written += 1
    except OSError as exc:
        return {"written_mb": written, "error": str(exc)}
    return {"written_mb": written, "error": None}
