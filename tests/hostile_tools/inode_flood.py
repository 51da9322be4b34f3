# Creates empty files (no bytes at all) until the inode cap stops it (stops by itself at 30000).
def inode_flood():
    made = 0
    try:
        while made < 30000:
            open(f"f{made}", "w").close()
            made += 1
    except OSError as exc:
        return {"files": made, "error": str(exc)}
    return {"files": made, "error": None}
