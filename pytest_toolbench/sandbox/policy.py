"""Isolation layers applied before untrusted code runs (see the package docstring for the order).

Why several layers: a call runs under the harness's uid (root on a CI runner), so file
permissions protect little, and a Python audit hook alone is bypassable by determined code. The
kernel layers (namespaces, Landlock, the syscall allowlist in ``syscall_filter.py``, no
capabilities in ``privileges.py``, rlimits, a memory cgroup in ``cgroup.py``) are the hard
boundary; the audit hook gives clear, early error messages. The zygote applies namespaces and
rlimits once; each per-call child applies the rest (``worker.Zygote.confine_child``).

Stdlib only: this runs in the worker before anything else is imported.
"""

from __future__ import annotations

import ctypes
import errno
import math
import os
import resource
import stat
import sys
from typing import Any, Callable, Sequence

# --------------------------------------------------------------------------------------- rlimits


def apply_rlimits(memory_mb: int, file_size_mb: int) -> dict[str, Any]:
    """Address space, file size, no core dumps. Not RLIMIT_NPROC: it counts every process of
    the uid on the machine, so for an ordinary user 0 would stop the zygote's own forks (and
    root ignores it); the syscall filter refuses a call's fork instead."""
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb * mb, memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_mb * mb, file_size_mb * mb))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return {"memory_mb": memory_mb, "file_size_mb": file_size_mb, "core": 0,
            "open_files": CALL_OPEN_FILES, "processes": "fork refused by the syscall filter"}


#: File descriptors a call may hold (each one an inode, a pipe end or an epoll instance).
CALL_OPEN_FILES = 256


def limit_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (CALL_OPEN_FILES, CALL_OPEN_FILES))


def set_cpu_budget(seconds: float) -> None:
    """RLIMIT_CPU = CPU used so far + budget: SIGXCPU (fatal) if one call burns more."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    # A per-call child: the hard limit too (SIGKILL one second later), so no code can raise it.
    resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1 if hard == resource.RLIM_INFINITY else hard))


# ----------------------------------------------------------------------------- kernel helpers

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWNET, _CLONE_NEWIPC, _CLONE_NEWUTS = 0x40000000, 0x08000000, 0x04000000


def _no_new_privs() -> None:
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)):
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(NO_NEW_PRIVS): {os.strerror(err)}")


def die_with_parent() -> None:
    """PR_SET_PDEATHSIG(SIGKILL): a per-call child never outlives its zygote."""
    _libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(9), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))


def prefer_oom_kill() -> None:
    """oom_score_adj 1000: where memory runs out (the zygote's cgroup, shared with the zygote,
    or the machine), the OOM killer takes this call first, never the zygote or the harness.
    Raising one's own score needs no privilege. Before the jail: /proc is gone there."""
    try:
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as f:
            f.write("1000")
    except OSError:
        pass  # no /proc: the cgroup's limit still holds


def enter_namespaces() -> tuple[bool, str]:
    """unshare(CLONE_NEWNET | NEWIPC | NEWUTS): a fresh network namespace with only a downed
    loopback (no route anywhere), and private SysV IPC. Python 3.11 has no os.unshare."""
    if _libc.unshare(_CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        return False, f"unshare(CLONE_NEWNET) failed: {os.strerror(err)}"
    ipc = _libc.unshare(_CLONE_NEWIPC | _CLONE_NEWUTS) == 0
    return True, "fresh network namespace (no interfaces up)" + ("; private IPC/UTS namespaces" if ipc else "")


_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
_MNT_DETACH = 2


def enter_mount_namespace() -> tuple[bool, str]:
    """A private mount namespace for the zygote, so that it can give every call a tmpfs of its
    own (``mount_tmpfs``) and a jail that nobody outside sees. Needs root, or root of a user
    namespace entered first (``privileges.enter_user_namespace``)."""
    if _libc.unshare(_CLONE_NEWNS) != 0:
        return False, f"unshare(CLONE_NEWNS) failed: {os.strerror(ctypes.get_errno())}"
    # Our mounts must not propagate back to the namespace we came from.
    if _libc.mount(b"none", b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None) != 0:
        return False, f"making mounts private failed: {os.strerror(ctypes.get_errno())}"
    return True, "private mount namespace"


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    src = os.fsencode(source) if source is not None else None
    kind = fstype.encode() if fstype is not None else None
    if _libc.mount(src, os.fsencode(target), kind, ctypes.c_ulong(flags), data.encode() if data else None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source or ''} on {target}: {os.strerror(err)}")


def mount_tmpfs(path: str, size_bytes: int, inodes: int, mode: int = 0o700) -> None:
    """A fresh tmpfs on ``path`` holding at most ``size_bytes`` and ``inodes`` entries (the kernel
    answers ENOSPC past either); no devices, set-id or executables on it."""
    _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
           f"size={size_bytes},nr_inodes={inodes},mode={mode:04o}")


_MS_RDONLY, _MS_REMOUNT, _MS_BIND = 1, 32, 4096
# Flags a read-only remount must keep: in a user namespace the kernel refuses (EPERM) to clear
# a flag the source mount has ("locked" flags), so they are carried over from statvfs.
_KEPT_FLAGS = ((os.ST_NOSUID, _MS_NOSUID), (os.ST_NODEV, _MS_NODEV), (os.ST_NOEXEC, _MS_NOEXEC),
               (os.ST_NOATIME, 1 << 10), (os.ST_NODIRATIME, 1 << 11), (os.ST_RELATIME, 1 << 21))


def bind_read_only(source: str, target: str, device: bool = False) -> None:
    """``source`` (a directory or a file) seen at ``target`` too, read-only and without set-id;
    without device nodes unless ``device`` (``/dev/null`` itself is one). Not recursive: what
    another file system mounts beneath ``source`` stays out of sight."""
    _mount(source, target, None, _MS_BIND)
    _remount_read_only(target, device)


def _remount_read_only(target: str, device: bool = False) -> None:
    """The mount at ``target`` made read-only (this mount only: a bind of the same file system
    elsewhere stays as it was), keeping the flags it has."""
    have = os.statvfs(target).f_flag
    flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | (0 if device else _MS_NODEV)
    _mount(None, target, None, flags | sum(ms for st_flag, ms in _KEPT_FLAGS if have & st_flag))


def seal_jail(root: str, writable: str) -> None:
    """Make the jail's own tmpfs (``root``, built by :func:`build_jail`) read-only for good, and
    give the zygote a writable view of it at ``writable`` (an empty directory outside the jail),
    where it makes and removes the calls' mount points. Landlock refuses a call every write in
    the jail, but not ``chmod`` or ``utime`` (it does not govern file metadata): on a writable
    tmpfs a call could change the modes and times of the jail's own directories (``/``, the
    pool folder's skeleton), which outlive it, so the next call would find them (a channel from
    call to call) or be locked out of its own paths (``chmod('/', 0)``). Read-only, each answers
    ``EROFS``. Non-recursive bind: the read-only binds beneath ``root`` are not in the view."""
    _mount(root, writable, None, _MS_BIND)
    try:
        _remount_read_only(root)
    except OSError:
        detach(writable)
        raise


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


#: The jail's own tmpfs holds only directories, symlinks and mount points (per-call tmpfs
#: mount points included): a few hundred entries, no data.
JAIL_TMPFS_BYTES, JAIL_TMPFS_INODES = 1024 * 1024, 4096


def build_jail(root: str, read_paths: Sequence[str], link_paths: Sequence[str] = (),
               dirs: Sequence[str] = ()) -> list[str]:
    """A file-system root for the calls, to ``chroot`` into: a small tmpfs on ``root`` holding,
    at their own absolute paths, read-only bind mounts of ``read_paths`` (what Landlock lets a
    call read, ``/dev/null`` too), the symlinks met on the way to ``link_paths``
    (``/lib -> usr/lib``, ``/etc/localtime``: the loader and the time-zone code use those names)
    and the empty directories ``dirs`` (where the calls' own tmpfs are mounted). Landlock does not
    govern ``stat``, ``readlink`` or ``access`` and seccomp cannot filter by path: in the jail
    every other path simply does not exist. Returns the paths bound; on failure nothing stays
    mounted on ``root``."""
    mount_tmpfs(root, JAIL_TMPFS_BYTES, JAIL_TMPFS_INODES, 0o755)
    bound: list[str] = []
    try:
        for path in sorted(set(read_paths)):  # an ancestor sorts before what it holds
            if _under(path, bound):
                continue  # already seen through its ancestor's bind mount
            target = root + path
            st = os.stat(path)
            if stat.S_ISDIR(st.st_mode):
                os.makedirs(target, 0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o444))
            bind_read_only(path, target, device=stat.S_ISCHR(st.st_mode))
            bound.append(path)
        for path in link_paths:
            _mirror_links(root, os.path.abspath(path), bound)
        for path in dirs:
            os.makedirs(root + path, 0o755, exist_ok=True)
    except BaseException:
        try:
            detach(root)  # lazily: the bind mounts beneath go with it
        except OSError:
            pass
        raise
    return bound


def _mirror_links(root: str, path: str, bound: Sequence[str]) -> None:
    """Recreate under ``root`` each symlink :func:`links_on_the_way` finds."""
    for link, target in links_on_the_way(path, bound):
        os.makedirs(root + os.path.dirname(link), 0o755, exist_ok=True)
        if not os.path.lexists(root + link):
            os.symlink(target, root + link)


def links_on_the_way(path: str, bound: Sequence[str], depth: int = 0) -> list[tuple[str, str]]:
    """Each symlink (its path, its target as written) met on the way from ``/`` to ``path`` (and
    to their targets), when ``path`` leads into something bound; links inside a bound tree are
    the host's own and need nothing. A tree of binds (the jail, bubblewrap's root) holds only
    the real paths: without ``/lib64 -> usr/lib64`` no dynamically linked program loads there."""
    if depth > 8 or not _under(os.path.realpath(path), bound):
        return []
    out: list[tuple[str, str]] = []
    cur = os.sep
    for part in path.strip(os.sep).split(os.sep):
        nxt = os.path.join(cur, part)
        if _under(nxt, bound):
            break
        if not os.path.islink(nxt):
            cur = nxt
            continue
        target = os.readlink(nxt)
        out.append((nxt, target))
        out += links_on_the_way(os.path.normpath(os.path.join(cur, target)), bound, depth + 1)
        cur = os.path.realpath(nxt)
    return out


def jail_link_paths(package_dir: str) -> list[str]:
    """Paths whose symlinks the jail must show as the host does: the interpreter's prefixes and
    executable, its import path, the package, and :data:`SYSTEM_READ_PATHS`."""
    out = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, sys.executable, package_dir]
    out += [p for p in sys.path if p and os.path.isabs(p)]
    return [p for p in (*out, *SYSTEM_READ_PATHS) if p]


def detach(path: str) -> None:
    """Lazy unmount: the tmpfs and everything in it is freed at once, whatever it holds."""
    if _libc.umount2(os.fsencode(path), ctypes.c_int(_MNT_DETACH)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {path}: {os.strerror(err)}")


# ----------------------------------------------------------------------------------- Landlock

_LL_CREATE, _LL_ADD_RULE, _LL_RESTRICT = 444, 445, 446
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_WRITE_LIKE = sum(1 << b for b in (4, 5, 6, 7, 8, 9, 10, 11, 12))  # remove/make *
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
#: System files a Python process may read besides its installation: shared libraries for lazily
#: loaded extension modules, time zones, locales. None of them holds a secret of the harness.
SYSTEM_READ_PATHS = (
    "/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/usr/share/zoneinfo",
    "/usr/lib/locale", "/etc/localtime", "/etc/ld.so.cache", "/dev/urandom", "/dev/random", "/dev/zero",
)


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


#: Why the version query failed, by errno, and what helps: each cause has its own remedy, and
#: one generic line ("needs Linux 5.13 with landlock in the LSMs") sent a user whose container
#: refused the call to look at the kernel.
_LANDLOCK_ABSENT = {
    errno.ENOSYS: ("this kernel has no Landlock (landlock_create_ruleset: ENOSYS)",
                   "Landlock needs Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK"),
    errno.EOPNOTSUPP: ("Landlock is built into this kernel but not enabled (EOPNOTSUPP)",
                       "add 'landlock' to the active LSMs (cat /sys/kernel/security/lsm; boot with "
                       "lsm=...,landlock)"),
    errno.EPERM: ("landlock_create_ruleset was refused (EPERM): a seccomp profile forbids it, as older "
                  "container runtimes' default profiles do",
                  "allow landlock_create_ruleset, landlock_add_rule and landlock_restrict_self in the "
                  "container's seccomp profile (current Docker and Podman defaults allow them)"),
}


def landlock_status() -> tuple[int, str, str]:
    """(Landlock ABI, or 0; why not; what helps): the ABI from the kernel's version query, and
    where there is none, the cause its errno names."""
    abi = _libc.syscall(_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi > 0:
        return int(abi), "", ""
    err = ctypes.get_errno()
    why, helps = _LANDLOCK_ABSENT.get(err, (f"landlock_create_ruleset failed: {os.strerror(err)}", ""))
    return 0, why, helps


def landlock_abi() -> int:
    return landlock_status()[0]


def read_only_paths(package_dir: str, protected: Sequence[str]) -> list[str]:
    """What a tool may read: the Python installation (prefixes, stdlib, site-packages), the
    harness package itself (imported lazily by jobs), and :data:`SYSTEM_READ_PATHS`.

    A candidate that contains a ``protected`` path (the project, $HOME, the cache) is dropped, so
    a Python installed at ``/`` or in the project root never opens them up; the project's own
    ``.venv`` stays allowed because it is *inside*, not above, the project.
    """
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, package_dir]
    prefixes = {os.path.realpath(p) for p in candidates[:4]}
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else ""
        if real and (os.path.basename(real) in {"site-packages", "dist-packages"} or any(real.startswith(p + os.sep) for p in prefixes)):
            candidates.append(real)
    candidates += SYSTEM_READ_PATHS
    guarded = [os.path.realpath(p) for p in protected if p]
    out: list[str] = []
    for path in candidates:
        real = os.path.realpath(path)
        if real == "/" or real in out or not os.path.exists(real):
            continue
        if any(g == real or g.startswith(real.rstrip(os.sep) + os.sep) for g in guarded):
            continue
        out.append(real)
    return out


class Landlock:
    """Kernel-enforced file access for a per-call child: read-only on :func:`read_only_paths`,
    read-write on the call's own directory, nothing else (no ``/proc``, no project, no home),
    no execve, no TCP (ABI >= 4), no signals or abstract sockets outside (ABI >= 6).

    The zygote opens the read-only paths once (O_PATH fds); each child builds its own ruleset
    from them, so rules never accumulate across calls.
    """

    def __init__(self, read_paths: Sequence[str], max_abi: int | None = None) -> None:
        """``max_abi``: use no right of a later ABI (tests: an older kernel's Landlock)."""
        abi, self.absence, self.absence_help = landlock_status()
        self.abi = abi if max_abi is None else min(abi, max_abi)
        self.read: list[tuple[int, bool, str]] = []
        if self.abi:
            for path in read_paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                self.read.append((fd, os.path.isdir(path), path))
        fs = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_READ_DIR | _FS_WRITE_LIKE
        if self.abi >= 2:
            fs |= _FS_REFER
        if self.abi >= 3:
            fs |= _FS_TRUNCATE
        if self.abi >= 5:
            fs |= _FS_IOCTL_DEV
        self.handled_fs = fs

    def _rule(self, ruleset: int, fd: int, rights: int) -> None:
        rule = _PathBeneath(rights, fd)
        if _libc.syscall(_LL_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0)):
            raise OSError(ctypes.get_errno(), f"landlock_add_rule: {os.strerror(ctypes.get_errno())}")

    def apply(self, writable_dir: str) -> tuple[int, str]:
        """Restrict this process (and its threads' future); returns (ABI in force or 0, note)."""
        if not self.abi:
            return 0, self.absence or "Landlock unavailable in this kernel"
        abi, fs = self.abi, self.handled_fs
        attr = _RulesetAttr(fs, 0b11 if abi >= 4 else 0, 0b11 if abi >= 6 else 0)
        size = 24 if abi >= 6 else 16 if abi >= 4 else 8
        ruleset = _libc.syscall(_LL_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        if ruleset < 0:
            return 0, f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}"
        file_read = _FS_READ_FILE
        try:
            for fd, is_dir, _ in self.read:
                self._rule(ruleset, fd, (file_read | _FS_READ_DIR) if is_dir else file_read)
            own = os.open(writable_dir, os.O_PATH | os.O_CLOEXEC)
            try:
                self._rule(ruleset, own, fs & ~_FS_EXECUTE)
            finally:
                os.close(own)
            null = os.open(os.devnull, os.O_PATH | os.O_CLOEXEC)
            try:
                self._rule(ruleset, null, _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0))
            finally:
                os.close(null)
            _no_new_privs()
            if _libc.syscall(_LL_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)):
                return 0, f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}"
        except OSError as exc:
            return 0, str(exc)
        finally:
            os.close(ruleset)
        return abi, (
            f"reads only the Python installation and {len(self.read)} system/installation paths; "
            "writes only in the call's own directory; no /proc, no execve"
            + ("; no TCP" if abi >= 4 else "") + ("; signals scoped" if abi >= 6 else "")
        )

    def close_fds(self) -> None:
        for fd, _, _ in self.read:
            try:
                os.close(fd)
            except OSError:
                pass


# --------------------------------------------------------------------------------- audit hook

_BLOCKED_EVENTS = frozenset(
    {
        "os.system", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn",
        "os.startfile", "subprocess.Popen", "pty.spawn", "os.kill", "os.killpg",
        "signal.pthread_kill", "resource.setrlimit", "resource.prlimit", "os.link", "os.symlink",
        "os.chroot", "sys.remote_exec", "webbrowser.open",
    }
)
_BLOCKED_PREFIXES = ("socket.", "ctypes.", "_ctypes.")
_BLOCKED_IMPORTS = frozenset({"ctypes", "_ctypes"})
# event -> (positions of path arguments that must stay inside the writable dir, positions of dir_fd)
_PATH_EVENTS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "os.remove": ((0,), (1,)), "os.rmdir": ((0,), (1,)), "os.rename": ((0, 1), (2, 3)),
    "os.truncate": ((0,), ()), "os.chmod": ((0,), (2,)), "os.chown": ((0,), (3,)),
    "os.mkdir": ((0,), (2,)), "os.utime": ((0,), (3,)), "os.chflags": ((0,), ()),
    "os.lchflags": ((0,), ()), "os.setxattr": ((0,), ()), "os.removexattr": ((0,), ()),
    "shutil.rmtree": ((0,), (1,)), "shutil.copyfile": ((1,), ()), "shutil.copymode": ((1,), ()),
    "shutil.copystat": ((1,), ()), "shutil.copytree": ((1,), ()), "shutil.move": ((0, 1), ()),
    "shutil.chown": ((0,), ()), "shutil.make_archive": ((0,), ()),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


class AuditPolicy:
    """A ``sys.addaudithook`` policy. ``trusted`` lets the worker's own loop reset its CPU budget.

    An audit hook cannot be removed, and it fires for the untrusted code's imports too; it is a
    second line behind the kernel layers, not a security boundary on its own.
    """

    def __init__(self, writable_dir: str) -> None:
        self.root = os.path.realpath(writable_dir)
        self._trusted = False
        self.blocked = 0

    def trusted_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        self._trusted = True
        try:
            return fn(*args)
        finally:
            self._trusted = False

    def _inside(self, path: Any) -> bool:
        if isinstance(path, int):
            try:
                path = os.readlink(f"/proc/self/fd/{path}")
            except OSError:
                return False
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return real == self.root or real.startswith(self.root + os.sep) or real == os.devnull

    def _deny(self, event: str, what: str = "") -> None:
        self.blocked += 1
        raise PermissionError(f"sandbox policy: {event} blocked{': ' + what if what else ''}")

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writes = (isinstance(flags, int) and flags & _WRITE_FLAGS) or (
                isinstance(mode, str) and any(c in mode for c in "wax+")
            )
            if writes and not self._inside(path):
                self._deny("open for writing", str(path))
            return
        if event in _PATH_EVENTS:
            paths, dir_fds = _PATH_EVENTS[event]
            if any(i < len(args) and args[i] not in (None, -1) for i in dir_fds):  # -1: no dir_fd
                self._deny(event, "dir_fd-relative paths")
            for i in paths:
                if i < len(args) and not self._inside(args[i]):
                    self._deny(event, str(args[i]))
            return
        if event == "import":
            if args and args[0] in _BLOCKED_IMPORTS:
                self._deny("import", str(args[0]))
            return
        if event == "resource.setrlimit" and self._trusted:
            return
        if event in _BLOCKED_EVENTS or event.startswith(_BLOCKED_PREFIXES):
            self._deny(event)


def install_audit_hook(writable_dir: str) -> AuditPolicy:
    policy = AuditPolicy(writable_dir)
    sys.addaudithook(policy)
    # Once the hook is in, ctypes calls are refused; drop it from the modules table too.
    for name in ("ctypes", "_ctypes"):
        sys.modules.pop(name, None)
    return policy
