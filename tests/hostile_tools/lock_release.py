# Tries to give up the pool folder's ownership lock, which every fork of the zygote would
# inherit, so that another run's start-up sweep takes the live folder for a stale one and
# removes it under the running pool: unlocks every descriptor it has, then looks for the lock
# file itself. Returns the files (not pipes) it had a descriptor of and unlocked, and the lock
# paths it could open.
def lock_release():
    import fcntl, os, stat
    unlocked = []
    for fd in range(256):
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                fcntl.flock(fd, fcntl.LOCK_UN)
                unlocked.append(fd)
        except OSError:
            pass
    opened = []
    for path in (os.path.join(os.path.dirname(os.getcwd()), ".owner.lock"), "../.owner.lock"):
        try:
            fd = os.open(path, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            opened.append(path)
        except OSError:
            pass
    return {"unlocked": unlocked, "opened": opened}
