"""A memory cgroup for a zygote's calls: every page a call holds counts, pipes, memfds and its
tmpfs included (RLIMIT_AS counts only its address space).

Where it comes from: cgroup v2 (``memory.max``, ``memory.swap.max``, ``pids.max``) in a
``toolbench-sandbox`` folder at the root of the unified hierarchy, or cgroup v1's memory
hierarchy (``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes``) under the harness's own
memory cgroup. Either needs write access there: root has it, an ordinary user only where a
cgroup was delegated to it (then ``TOOLBENCH_SANDBOX_CGROUP`` names that folder: tried first,
and refused unless it lies beneath the cgroup2 mount). Without it
the report says so, and the call's memory is held by the measured equivalent: its address-space
limit, a tmpfs of bounded size, and a system-call filter that refuses pipes and memfds.

One cgroup per zygote, reused by its calls (one at a time). The zygote moves itself in once,
at start, so each call's child is born in it. A child that moved itself in instead (as before)
paid one kernel grace period per call: a cgroup migration waits for RCU, 10-15 ms of wall clock
on these machines whenever the last migration was more than a few ms ago, which was most of a
call's worker-timed latency. The zygote's own pages then count as well: the zygote makes the
limit its calls' allowance plus its own resident size (``resident_bytes``), and a call's child
asks to be the OOM killer's first choice (``policy.prefer_oom_kill``). The zygote
moves back out and removes the cgroup when it exits; a pool that kills its zygote removes it
(``remove_killed``), and a later pool removes any that dead zygotes left (``sweep``).

Under bubblewrap the zygote can do none of this: bwrap's root has no ``/sys``, and its pid there
(2) names nothing on the host. The pool does it from the host's side instead (``place``): it
makes the cgroup, named after the zygote's *host* pid and start time (so ``sweep`` and
``remove_killed`` know it as any other), and moves the zygote in, which waits for that before it
forks anything; the zygote gets no new file system view and no handle on the cgroup, and cannot
leave it (the pool removes it when it kills the zygote, else a later ``sweep``). Stdlib only.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass

ENV_VAR = "TOOLBENCH_SANDBOX_CGROUP"
MB = 1 << 20
PREFIX = "toolbench-sandbox"
#: Threads a call may run (cgroup v2's pids controller; RLIMIT_AS bounds them elsewhere).
PIDS_MAX = 64


@dataclass
class CallCgroup:
    path: str
    version: int
    #: ``cgroup.procs`` of the cgroup the zygote came from, where it goes back before removing;
    #: "" for one the pool placed it in (under bwrap), which the zygote can neither leave nor
    #: reach: the pool removes it, or a later ``sweep``.
    home_procs: str = ""

    @property
    def procs(self) -> str:
        return os.path.join(self.path, "cgroup.procs")

    def oom_kills(self) -> int:
        """How many of this cgroup's processes the kernel killed for memory so far."""
        name, key = ("memory.events", "oom_kill") if self.version == 2 else ("memory.oom_control", "oom_kill")
        try:
            with open(os.path.join(self.path, name), encoding="ascii") as f:
                for line in f:
                    k, _, v = line.partition(" ")
                    if k == key:
                        return int(v)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Back to where the zygote came from (rmdir refuses a cgroup with a process in it),
        then remove the cgroup. Never raises: a later pool's ``sweep`` removes what is left."""
        if not self.home_procs:  # placed by the pool: not in this process's view
            return
        try:
            _write(self.home_procs, "0")
            os.rmdir(self.path)
        except OSError:
            pass


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fs type, super options) of every cgroup file system."""
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, rfields = left.split(), right.split()
                if len(rfields) >= 3 and rfields[0] in ("cgroup", "cgroup2"):
                    out.append((fields[4].replace("\\040", " "), rfields[0], rfields[2]))
    except OSError:
        pass
    return out


def _own_cgroups() -> dict[str, str]:
    """controller list (or "" for v2) -> this process's cgroup path."""
    out = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                out[controllers] = path
    except OSError:
        pass
    return out


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def _words(path: str) -> list[str]:
    with open(path, encoding="ascii") as f:
        return f.read().split()


def delegated_folder() -> str | None:
    """The delegated cgroup ``TOOLBENCH_SANDBOX_CGROUP`` names in the harness's environment.
    The pool hands it to its zygote in the zygote's config (``create``'s and ``sweep``'s
    ``delegated``): the zygote's environment is the pool's allowlist, which calls inherit, and
    without it the variable never reached the only process that makes the cgroup."""
    return os.environ.get(ENV_VAR) or None


def _v2_folder(mount: str, delegated: str | None) -> str:
    """Where this harness's v2 cgroups live: a delegated folder, or ``toolbench-sandbox`` at the
    root of the unified hierarchy."""
    return delegated or os.path.join(mount, PREFIX)


def _v1_folder(mount: str, own: dict[str, str]) -> str:
    """Where this harness's v1 memory cgroups live: beside it, under its own memory cgroup."""
    rel = next((p for c, p in own.items() if "memory" in c.split(",")), "/")
    return os.path.join(mount, rel.lstrip("/"))


def _enable_controllers(folder: str, wanted: list[str]) -> None:
    """Hand ``wanted`` controllers to ``folder``'s children (its ``cgroup.subtree_control``);
    nothing to write where they are already handed on."""
    try:
        enabled = _words(os.path.join(folder, "cgroup.subtree_control"))
    except OSError:
        enabled = []
    missing = [c for c in wanted if c not in enabled]
    if not missing:
        return
    try:
        _write(os.path.join(folder, "cgroup.subtree_control"), " ".join(f"+{c}" for c in missing))
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            raise
        # cgroup v2's "no internal processes" rule: a cgroup other than the real root that holds
        # processes cannot hand a controller to its children. It is what a container's own
        # cgroup root, or a delegated cgroup the user's shell lives in, answers.
        raise OSError(errno.EBUSY, f"{folder} holds processes, so it cannot hand the memory "
                      f"controller to a child cgroup (cgroup v2 allows that only to a cgroup with "
                      f"no process in it): name an empty cgroup in {ENV_VAR}") from exc


def _v2_base(mount: str, delegated: str | None) -> str:
    """A folder under which leaf cgroups with the memory controller may hold processes: a
    delegated folder, or ``toolbench-sandbox`` at the root of the unified hierarchy, with the
    memory (and pids) controllers handed to its children."""
    if delegated:
        # A folder elsewhere (a typo, a plain directory) would take the limit files as ordinary
        # files and the zygote would report a memory cgroup that limits nothing.
        if os.path.commonpath([os.path.realpath(delegated), os.path.realpath(mount)]) != os.path.realpath(mount):
            raise OSError(f"{ENV_VAR}={delegated} is not beneath the cgroup2 mount {mount}")
    folder = delegated or mount
    controllers = _words(os.path.join(folder, "cgroup.controllers"))
    if "memory" not in controllers:
        # A systemd delegation without the memory controller (``Delegate=`` naming others), or
        # a unified hierarchy whose memory controller is bound to a v1 mount.
        raise OSError(f"the memory controller is not available in {folder} (its cgroup.controllers: "
                      f"{' '.join(controllers) or 'none'})")
    wanted = [c for c in ("memory", "pids") if c in controllers]
    # Handed on by whoever delegated the folder, or here: a delegated folder with nothing in its
    # cgroup.subtree_control gave every child cgroup no memory.max, and the zygote fell back to
    # the address-space limit.
    _enable_controllers(folder, wanted)
    if delegated:
        return delegated
    base = _v2_folder(mount, None)
    os.makedirs(base, exist_ok=True)
    _enable_controllers(base, wanted)
    return base


def create(name: str, limit_bytes: int, delegated: str | None = None) -> tuple[CallCgroup | None, str]:
    """A cgroup for one zygote's calls, limited to ``limit_bytes`` of memory (and no swap), under
    the ``delegated`` folder where one is given (cgroup v2); (the cgroup, why a delegated folder
    was not used or "") or (None, why not)."""
    reasons = []
    own = _own_cgroups()
    mounts = _mounts()
    if delegated:  # the folder the user named first, also where a v1 memory mount comes before it
        mounts.sort(key=lambda m: m[1] != "cgroup2")
    for mount, fstype, opts in mounts:
        try:
            if fstype == "cgroup2":
                base = _v2_base(mount, delegated)
                path = os.path.join(base, name)
                os.mkdir(path, 0o755)
                try:
                    _write(os.path.join(path, "memory.max"), str(limit_bytes))
                    if os.path.exists(os.path.join(path, "memory.swap.max")):
                        _write(os.path.join(path, "memory.swap.max"), "0")
                    if os.path.exists(os.path.join(path, "pids.max")):
                        _write(os.path.join(path, "pids.max"), str(PIDS_MAX))
                except OSError:
                    os.rmdir(path)
                    raise
                home = os.path.join(mount, own.get("", "/").lstrip("/"), "cgroup.procs")
                return CallCgroup(path, 2, home), ""
            if "memory" in opts.split(","):
                folder = _v1_folder(mount, own)
                path = os.path.join(folder, f"{PREFIX}-{name}")
                os.mkdir(path, 0o755)
                try:
                    _write(os.path.join(path, "memory.limit_in_bytes"), str(limit_bytes))
                    memsw = os.path.join(path, "memory.memsw.limit_in_bytes")
                    if os.path.exists(memsw):
                        _write(memsw, str(limit_bytes))
                except OSError:
                    os.rmdir(path)
                    raise
                return CallCgroup(path, 1, os.path.join(folder, "cgroup.procs")), "; ".join(
                    r for r in reasons if delegated and r.startswith("cgroup2"))
        except OSError as exc:
            reasons.append(f"{fstype} at {mount}: {exc.strerror or exc}")
    return None, "; ".join(reasons) or "no cgroup file system with a memory controller is mounted"


def enter(cgroup: CallCgroup) -> None:
    """Move the calling process into ``cgroup``."""
    _write(cgroup.procs, "0")


def allowance_bytes(memory_mb: int, disk_mb: int) -> int:
    """What a call may hold: its memory, its tmpfs and 64 MiB of slack (the zygote's resident
    size comes on top, where the zygote lives in the cgroup)."""
    return (int(memory_mb) + int(disk_mb) + 64) * MB


def place(pid: int, limit_bytes: int) -> tuple[CallCgroup | None, str]:
    """From the host's side, for a zygote that cannot make its own cgroup (under bubblewrap):
    remove dead zygotes' cgroups, make one named after process ``pid`` (as this process sees
    it) limited to ``limit_bytes``, and move that process in; its children are born there.
    (the cgroup, as ``create``) or (None, why not); never leaves a cgroup it could not move
    ``pid`` into."""
    delegated = delegated_folder()
    sweep(delegated)
    group, note = create(zygote_name(pid), limit_bytes, delegated)
    if group is None:
        return None, note
    try:
        _write(group.procs, str(pid))
    except OSError as exc:
        try:
            os.rmdir(group.path)
        except OSError:
            pass
        return None, f"cannot move the zygote into {group.path}: {exc.strerror or exc}"
    return CallCgroup(group.path, group.version), note


def holds_self(path: str) -> bool:
    """Whether this process lives in the cgroup ``path`` (a host path) names: its folder's name
    (a pid and start time, unique on the machine) ends a line of ``/proc/self/cgroup``, where a
    cgroup namespace shows the path from its own root."""
    name = "/" + os.path.basename(path.rstrip("/"))
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            return any(line.rstrip("\n").endswith(name) for line in f)
    except OSError:
        return False


def resident_bytes() -> int:
    """The calling process's resident set, in bytes (0 where /proc cannot say). For the zygote
    that lives in its cgroup, the most of its pages that can come to be charged there: a page
    is charged to the cgroup that faults it, and the zygote faults a copy of a page it touches
    after a fork."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (tells a live pid from a reused one)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def zygote_name(pid: int | None = None) -> str:
    """``<pid>-<start time>`` of the zygote: unique on this machine while it lives."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{_start_time(pid) or 0}"


def _owner_alive(name: str) -> bool:
    pid, _, start = name.partition("-")
    try:
        return _start_time(int(pid)) == start
    except ValueError:
        return True  # not ours to judge


def remove_killed(path: str, zygote_pid: int, wait_s: float = 1.0) -> None:
    """Remove the cgroup of a zygote the pool has just killed and reaped (it never got to
    remove its own): retried for up to ``wait_s`` while its children, killed with it, finish
    exiting. Only a folder named after that zygote; never raises (``sweep`` is the fallback)."""
    name = os.path.basename(path)
    if not name.removeprefix(f"{PREFIX}-").startswith(f"{zygote_pid}-"):
        return
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return
        time.sleep(0.005)


def sweep(delegated: str | None = None) -> None:
    """Remove the cgroups of zygotes that are gone (its name holds its pid and start time), in
    the ``delegated`` folder too where one is given. Never raises; rmdir refuses a populated
    cgroup anyway."""
    own = _own_cgroups()
    for mount, fstype, opts in _mounts():
        if fstype == "cgroup2":
            folder, prefix = _v2_folder(mount, delegated), ""
        elif "memory" in opts.split(","):
            folder, prefix = _v1_folder(mount, own), f"{PREFIX}-"
        else:
            continue
        try:
            names = [n for n in os.listdir(folder) if n.startswith(prefix)]
        except OSError:
            continue
        for n in names:
            path = os.path.join(folder, n)
            core = n[len(prefix):]
            if not core[:1].isdigit() or not os.path.isdir(path) or _owner_alive(core):
                continue
            try:
                os.rmdir(path)
            except OSError:
                pass
