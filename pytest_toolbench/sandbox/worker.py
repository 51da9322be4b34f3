"""Sandbox zygote: ``python -m pytest_toolbench.sandbox.worker CONFIG_JSON``.

Started by :mod:`pytest_toolbench.sandbox.pool` as a fresh interpreter (never a fork of pytest,
which has threads and holds the API key in memory) with a scrubbed environment. It imports the
harness jobs once, enters its own network namespace, checks that every per-call layer really
holds (a probe child tries to read ``/proc/1/environ``, the project, the home directory, to open
a socket and to write outside), reports that, then serves requests until its pool goes away (then it removes its own folder):

    a child forked ahead of time confines itself (chroot into the jail, Landlock, seccomp, audit
    hook, CPU limit) in a fresh directory (its own size- and inode-limited tmpfs) and waits ->
    request: the zygote reads the header (id, job, timeout) and streams the payload bytes to the
    child unread; it runs the trusted job on the untrusted payload, writes its reply to a private
    pipe and ``_exit``s -> the zygote forwards the reply bytes unread with a header of its own (status,
    exit text, timing), zeroes its buffers, reaps the child, unmounts its directory and forks the
    next one (while the pool and the model are busy). The pool parses, checks and caps the reply.

So no state (builtins, ``decimal`` contexts, patched modules, threads, files) outlives a call,
the zygote itself never runs untrusted code, and a tool that breaks the child's machinery
(``os._exit``, closing fds, replacing ``sys.stdout``...) is a "crashed" call, not a dead worker.
The zygote enforces the wall-clock limit itself, so a timeout costs one child, not a restart.

Stdlib only, plus the job modules named in the config (imported before any untrusted code).
"""

from __future__ import annotations

import builtins
import gc
import importlib
import json
import os
import select
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Sequence

from pytest_toolbench.sandbox import cgroup, cleanup, policy, privileges, protocol, syscall_filter

JOB_PREFIX = "pytest_toolbench."
#: Layers without which tools are refused (unless the pool was started insecure).
REQUIRED_LAYERS = ("landlock", "seccomp")


def resolve_job(job: str, job_modules: Sequence[str] = ()) -> Callable[[dict], Any]:
    """Only trusted code: ``pytest_toolbench.<module>:<function>``, or a function of one of the
    ``job_modules`` the pool was started with (modules its run's benchmarks declared)."""
    module_name, sep, func_name = job.partition(":")
    trusted = module_name.startswith(JOB_PREFIX) or module_name in job_modules
    if not sep or not trusted or not func_name.isidentifier():
        raise ValueError(f"job must be 'pytest_toolbench.<module>:<function>' or a function of a "
                         f"declared job module, got {job!r}")
    func = getattr(importlib.import_module(module_name), func_name)
    if not callable(func):
        raise TypeError(f"job {job!r} is not callable")
    return func


def _exception_text(exc: BaseException) -> str:
    """``Type: text`` of what a job raised. The exception may be the tool's own, whose
    ``__str__`` raises (or returns a str subclass with code of its own): that is still a tool
    error with a reason, not a child that dies without a reply ("exited with status 70")."""
    try:
        name = str.__str__(type(exc).__name__)  # a plain str: no __format__ of the tool's
    except BaseException:  # noqa: BLE001 - a hostile metaclass
        name = "an exception"
    try:
        text = str.__str__(str(exc))
    except BaseException:  # noqa: BLE001 - its own text raised
        return f"{name} (its text could not be rendered: its __str__ raised)"
    return f"{name}: {text}"


MB = cgroup.MB  # one definition: the cgroup limit and the zygote's own sizes agree
#: How often the zygote measures a call's directory when no tmpfs caps it (the fallback).
_WATCH_S = 0.05


class Zygote:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.fd_in, self.fd_out = config["fd_in"], config["fd_out"]
        # Held (shared with the pool) while this zygote lives: a pool that starts later sweeps a
        # sandbox folder only once nobody holds its lock (owned_folders.sweep_stale).
        self.lock_fd: int | None = config.get("lock_fd")
        # Under bwrap only: the host's temp dir (O_PATH), where an abandoning zygote removes its
        # folder, which is a mount point in bwrap's namespace (rmdir there: EBUSY). Closed in
        # every child like the pool's pipes: no call may hold a handle on the host's tree.
        self.parent_fd: int | None = config.get("parent_fd")
        self.tmpdir = os.path.realpath(config["tmpdir"])
        self.jail: str | None = None  # the calls' file-system root, once built (_setup_jail)
        self.jail_rw: str | None = None  # the zygote's writable view of the (read-only) jail
        limits = config["limits"]
        self.cap = int(limits.get("output_cap", 0))
        self.cpu_seconds = float(limits["cpu_seconds"])
        self.disk_bytes = int(limits.get("disk_mb", 256)) * MB
        self.disk_inodes = int(limits.get("disk_inodes", 10000))
        self.disabled = set(config.get("disable_layers", ()))
        self.jobs: dict[str, Callable[[dict], Any]] = {}
        self.calls = 0
        self._pending: tuple[int, str] | None = None
        self._spare: tuple[int, int, int, str] | None = None
        self._last_status = 0
        self.strict = False  # set once the probe has verified every required layer
        self.tmpfs = False  # each call's directory is its own size- and inode-limited tmpfs
        self.seccomp = syscall_filter.SyscallFilter()
        self.last_cap = privileges.last_capability()  # /proc is gone once in the jail
        self.pidns = privileges.PidNamespace()
        self.cgroup: cgroup.CallCgroup | None = None
        self.confined: dict[str, Any] = {}  # in a call's child: what its confinement holds
        self.inherited_caps: dict[str, bool] = {}  # the bounding set and securebits, narrowed once
        read_paths = policy.read_only_paths(config["package_dir"], config.get("protected", ()))
        # The declared job modules' folders (or files), checked by the pool: read-only as well.
        self.job_modules: tuple[str, ...] = tuple(config.get("job_modules", ()))
        self.job_paths: list[str] = [p for p in config.get("job_paths", ()) if os.path.exists(p)]
        read_paths += [p for p in self.job_paths if p not in read_paths]
        self.read_paths = read_paths
        self.landlock = policy.Landlock(read_paths, max_abi=2 if "landlock_truncation" in self.disabled else None)
        self.info: dict[str, Any] = {"read_only_paths": read_paths}
        # Every byte of a call (payload in, reply out) passes through these buffers, allocated
        # once and zero-filled after each call: the zygote never turns call data into Python
        # objects, so no later child (a fork of the zygote) can find an earlier call's payload,
        # tool source or result in the objects or the heap it inherits.
        self.reply_limit = protocol.reply_limit(self.cap)
        self._reply = bytearray(protocol.HEADER_BYTES + self.reply_limit)
        self._chunk = bytearray(1 << 16)
        self._zeros = memoryview(bytes(max(len(self._reply), len(self._chunk))))
        self._small = bytearray(protocol.SPLIT_BYTES)
        self._used = 0  # bytes of the reply buffer the last call filled

    # ------------------------------------------------------------------ per-call child
    def confine_child(self, workdir: str, audit: bool = True) -> policy.AuditPolicy | None:
        """Runs in the forked child, before any untrusted code. Raises if a required layer fails
        although the start-up probe verified it (never silently runs a tool with less); in
        insecure mode the layers are applied best effort. The order matters: /proc is gone
        once in the jail, the jail needs the zygote's privileges, Landlock needs no_new_privs,
        the capabilities go before the syscall filter (which refuses capset), and the filter
        comes last. (No cgroup step: the child is born in the zygote's.)"""
        policy.die_with_parent()
        policy.prefer_oom_kill()  # born in the zygote's cgroup: this call, not the zygote, goes
        if self.jail:
            # From here on no path outside the jail exists for this process: stat, readlink,
            # access and listdir, which Landlock does not govern, find nothing there to probe.
            # Landlock's rules hold the same inodes, seen through the jail's bind mounts.
            os.chroot(self.jail)
        os.chdir(workdir)
        os.environ.update(HOME=workdir, TMPDIR=workdir)
        tempfile.tempdir = None
        policy.set_cpu_budget(self.cpu_seconds)
        policy.limit_open_files()
        if "landlock" not in self.disabled:
            abi, note = self.landlock.apply(workdir)
            if not abi and self.strict:
                raise OSError(f"Landlock: {note}")
        self.landlock.close_fds()
        if "caps" not in self.disabled:
            self.confined["capabilities"] = {**self.inherited_caps, **privileges.drop_capabilities()}
        self.confined["pid"] = os.getpid()  # as the call sees itself: small in its namespace
        if "seccomp" not in self.disabled:
            ok, note = self.seccomp.apply()
            if not ok and self.strict:
                raise OSError(f"seccomp: {note}")
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        sys.stdout = sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
        audit = audit and "audit_hook" not in self.disabled
        return policy.install_audit_hook(workdir) if audit else None

    def _held_fds(self) -> tuple[int, ...]:
        """The zygote's own descriptors besides the pool's pipes (the folder's lock, the host's
        temp dir under bwrap), which no child keeps."""
        return tuple(fd for fd in (self.lock_fd, self.parent_fd) if fd is not None)

    def confine_init(self) -> None:
        """The PID namespace's idle init: it runs no tool code, but a call shares its namespace,
        so it holds as little as a call (jail, no capabilities, no pipes of the pool)."""
        policy.die_with_parent()
        for fd in (self.fd_in, self.fd_out, *self._held_fds()):
            os.close(fd)
        if self.jail:
            os.chroot(self.jail)
            os.chdir("/")
        if "caps" not in self.disabled:
            privileges.drop_capabilities()

    def _child(self, request_fd: int, reply_fd: int, workdir: str, audit: bool) -> None:
        """Never returns: the child ends with ``os._exit`` so no thread or atexit survives.

        Confines itself first, then waits for its one request: children are forked ahead of
        time (one spare per zygote), so fork and confinement are off the call's critical path.
        Its reply is only a proposal: the pool parses, checks and caps it.
        """
        status = 0
        try:
            for fd in (self.fd_in, self.fd_out, *self._held_fds(), *(self._spare[1:3] if self._spare else ())):
                os.close(fd)  # the pool's pipes and folder lock, and another call's, are no tool's business
            self._spare = None
            self.confine_child(workdir, audit)
            header, body = protocol.recv_split(request_fd)
            os.close(request_fd)
            job = header["job"]
            fn = self.jobs.get(job) or resolve_job(job, self.job_modules)
            payload = json.loads(body.decode("utf-8"))
            del body
            pristine = dict(vars(builtins))
            try:
                value = fn(payload)
                vars(builtins).update(pristine)  # our own reply code needs a working len(), str()...
                # Capped here too only to keep the reply small; the pool checks and caps it again.
                # (The start-up probe, the one call without the audit hook, reports every check uncut.)
                if audit:
                    data = protocol.encode({"ok": True, "value": self._precap(job, value)})
                else:  # the start-up probe: what the confinement held, as the child saw it
                    data = protocol.encode({"ok": True, "value": value, "confinement": self.confined})
            except BaseException as exc:  # the trusted job raised: report it as data
                vars(builtins).update(pristine)
                detail = protocol.cap_text(_exception_text(exc), self.cap)
                data = protocol.encode({"ok": False, "detail": detail})
            protocol.write_all(reply_fd, data)
        except BaseException:  # noqa: BLE001 - the zygote reports "no reply" with our exit status
            status = 70
        os._exit(status)

    def _precap(self, job: str, value: Any) -> Any:
        """The job's own reply check (``<function>_reply``), as the pool will run it."""
        module_name, _, func = job.partition(":")
        check = getattr(sys.modules.get(module_name), f"{func}_reply", None)
        try:
            return check(value, self.cap) if callable(check) else protocol.cap_total(value, self.cap)
        except (ValueError, TypeError):
            return value  # the pool reports the wrong shape

    def _fork_child(self, audit: bool = True) -> tuple[int, int, int, str]:
        """A confined child waiting for a request: (pid, request fd, reply fd, its directory as
        the zygote reaches it). The child sees its directory at ``<tmpdir>/call-N``; with a jail
        that path lies in the jail, which the zygote reaches under its root."""
        self.calls += 1
        workdir = os.path.join(self.tmpdir, f"call-{self.calls}")
        hostdir = self.jail + workdir if self.jail else workdir
        os.mkdir(self._writable(hostdir), 0o700)  # the jail is read-only: made through its view
        if self.tmpfs:
            try:
                policy.mount_tmpfs(hostdir, self.disk_bytes, self.disk_inodes)
            except OSError:
                os.rmdir(self._writable(hostdir))
                raise
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        # Everything the zygote holds goes to the permanent generation: the child's collections
        # then never touch (and copy-on-write) those pages, which keeps a fork cheap.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            os.close(req_w)
            os.close(rep_r)
            self._child(req_r, rep_w, workdir, audit)
        os.close(req_r)
        os.close(rep_w)
        return pid, req_w, rep_r, hostdir

    def _writable(self, path: str) -> str:
        """``path`` in the jail as the zygote changes it: through its writable view (the
        calls see the jail read-only, so they cannot change its directories' modes or times)."""
        if self.jail and self.jail_rw and path.startswith(self.jail + os.sep):
            return self.jail_rw + path[len(self.jail):]
        return path

    def prepare(self) -> None:
        """Fork the next call's child now, while the pool and the model are busy elsewhere."""
        self.reap()
        if self._spare is None:
            self._spare = self._fork_child()

    def _discard_spare(self) -> None:
        if self._spare is not None:
            pid, req_w, rep_r, workdir = self._spare
            self._spare = None
            for fd in (req_w, rep_r):
                os.close(fd)
            self._pending = (pid, workdir)
            self.reap()  # it exits on EOF of its request pipe

    # --------------------------------------------------------------------------- zygote
    def call(self, job: str, body_len: int, feed: Callable[[int | None], None], timeout_s: float,
             audit: bool = True) -> tuple[str, str, int]:
        """Run one request in a fresh child: (status, detail, reply size). ``feed(fd)`` writes
        the request body to the child's pipe (``feed(None)``: there is no child, consume it
        anyway). A whole reply frame (status "ok") lies in ``self._reply[:HEADER_BYTES + size]``
        until ``wipe()``; its body is unparsed, the pool checks it."""
        self.reap()
        if job not in self.jobs:
            try:
                self.jobs[job] = resolve_job(job, self.job_modules)
            except Exception as exc:  # a harness bug: report it, stay alive
                feed(None)
                return "crashed", f"cannot load job {job}: {type(exc).__name__}: {exc}", 0
            self._discard_spare()  # forked before the import: would import it again per call
        if audit and self._spare is not None:
            child, self._spare = self._spare, None
        else:
            child = self._fork_child(audit)
        pid, req_w, read_fd, workdir = child
        self._pending = (pid, workdir)
        start = time.monotonic()
        try:
            head = json.dumps({"job": job}).encode()
            try:
                protocol.write_all(req_w, protocol.split_prefix(head, body_len))
            except OSError:
                feed(None)  # the child died waiting; its exit status is reported below
            else:
                feed(req_w)
        finally:
            os.close(req_w)
        try:
            size, state = self._read_reply(read_fd, start + timeout_s, workdir)
        finally:
            os.close(read_fd)
        if state != "eof":  # a whole reply (the child is done), a hang or a breach: end it now
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        if state == "timeout":
            return "timeout", f"no result after {timeout_s:g} s wall clock; call killed", 0
        if state == "flood":
            return "crashed", f"the call's reply exceeds {self.reply_limit} bytes; call killed", 0
        if state.startswith("disk:"):
            return "crashed", f"the call used {state[5:]} (the sandbox's disk cap); call killed", 0
        if state == "eof":  # the child ended without a whole reply: say how it ended
            self.reap()
            end = protocol.exit_text(os.waitstatus_to_exitcode(self._last_status))
            why = "sent no reply" if not size else "sent a truncated reply"
            return "crashed", f"the call {why}; its process {end}", 0
        return "ok", "", size

    def wipe(self) -> None:
        """Zero what the last call left in the reply buffer."""
        used, self._used = min(self._used, len(self._reply)), 0
        memoryview(self._reply)[:used] = self._zeros[:used]

    def reap(self) -> None:
        """Wait for the last call's child and remove its directory (after the pool has its
        answer, so the child's teardown is off the critical path). Never raises: the directory
        holds whatever the tool built (a tmpfs is simply detached, whatever it holds)."""
        if self._pending is None:
            return
        pid, workdir = self._pending
        self._pending = None
        _, self._last_status = os.waitpid(pid, 0)
        problem = None
        if self.tmpfs:
            try:
                policy.detach(workdir)
            except OSError as exc:
                problem = str(exc)
        problem = cleanup.remove_tree(self._writable(workdir)) or problem
        if problem:
            print(f"sandbox: clean-up of {workdir}: {problem}", file=sys.stderr, flush=True)

    def _read_reply(self, fd: int, deadline: float, workdir: str) -> tuple[int, str]:
        """Read the child's reply frame into ``self._reply``: (body size, "frame") once whole,
        (bytes read, "eof") if the child closed the pipe first, "timeout" at the deadline,
        "flood" past the reply limit, "disk:<what>" when the directory (no tmpfs) outgrew the
        disk cap. Raises ``ChannelClosed`` as soon as the pool's request pipe closes: the pool
        sends nothing while it waits for a reply, so that is its harness gone (SIGKILLed, say),
        and the call is abandoned at once rather than at its timeout."""
        buf = memoryview(self._reply)
        have, need = 0, protocol.HEADER_BYTES
        watch = not self.tmpfs
        while True:
            wait = deadline - time.monotonic()
            if wait <= 0:
                return 0, "timeout"
            ready, _, _ = select.select([fd, self.fd_in], [], [], min(wait, _WATCH_S) if watch else wait)
            if self.fd_in in ready:
                raise protocol.ChannelClosed("the pool's request pipe closed during a call")
            if not ready:
                if watch:
                    over = cleanup.usage(workdir, self.disk_bytes, self.disk_inodes)
                    if over:
                        return 0, f"disk:{over}"
                continue
            if have >= len(buf):
                return 0, "flood"
            got = os.readv(fd, [buf[have:]])
            if not got:
                return have, "eof"
            have += got
            self._used = have
            if need == protocol.HEADER_BYTES and have >= need:
                size = int.from_bytes(buf[: protocol.HEADER_BYTES], "big")
                if size > self.reply_limit:
                    return 0, "flood"
                need += size
            if have >= need > protocol.HEADER_BYTES:
                return need - protocol.HEADER_BYTES, "frame"

    # ----------------------------------------------------------------- pool side of a call
    def _read_into(self, view: memoryview) -> None:
        while view:
            got = os.readv(self.fd_in, [view])
            if not got:
                raise protocol.ChannelClosed("pipe closed")
            view = view[got:]

    def _stream_body(self, length: int) -> Callable[[int | None], None]:
        """A feed that copies the request body from the pool's pipe to the child's, through the
        reusable chunk buffer (zeroed afterwards); if the child is gone it is read and dropped,
        so the pool's pipe stays in step."""
        def feed(fd: int | None) -> None:
            chunk = memoryview(self._chunk)
            left = length
            try:
                while left:
                    n = min(left, len(chunk))
                    self._read_into(chunk[:n])
                    left -= n
                    if fd is not None:
                        try:
                            protocol.write_all(fd, chunk[:n])
                        except OSError:
                            fd = None
            finally:
                chunk[:] = self._zeros[: len(chunk)]
        return feed

    def probe(self) -> None:
        """A child confined like every call checks what really holds; results go into info."""
        checks = {
            "verified_proc_environ_refused": "open('/proc/1/environ','rb').read()",
            "verified_parent_cmdline_refused": f"open('/proc/{os.getppid()}/cmdline','rb').read()",
            "verified_write_outside_refused": f"open({os.path.join(self.tmpdir, 'probe')!r},'w').close()",
        }
        for i, path in enumerate(self.config.get("protected", ())):
            checks[f"verified_protected_{i}_refused"] = f"__import__('os').listdir({path!r})"
        checks["verified_host_paths_hidden"] = f"_all_hidden({self._hidden_probe_paths()!r})"
        if self.jail:  # its root: a mode or time set there would outlive the call
            checks["verified_jail_read_only"] = "__import__('os').utime('/')"
        checks.update({
            "verified_socket_refused": "__import__('_socket').socket(2, 1).close()",
            "verified_sysv_ipc_refused": "_sysv_ipc()",
            "verified_pipe_refused": "[__import__('os').close(fd) for fd in __import__('os').pipe()]",
            "verified_memfd_refused": "__import__('os').close(__import__('os').memfd_create('probe'))",
            "verified_kernel_log_refused": "_kernel_log()",
            "verified_fanotify_refused": "_fanotify()",
            # the zygote and the harness (outside a PID namespace, or named by a filter that
            # refuses other pids) and pid 1 (the namespace's init, or the host's)
            "verified_other_pids_refused": f"_other_pids({[os.getpid(), os.getppid(), 1]!r})",
        })
        source = _SYSV_IPC_PROBE + _HIDDEN_PROBE + _KERNEL_PROBES + "def f():\n    out = {}\n"
        for key, expr in checks.items():
            source += f"    try:\n        {expr}\n        out[{key!r}] = False\n    except Exception:\n        out[{key!r}] = True\n"
        source += "    return out\n"
        # Without the audit hook: this checks the kernel layers alone.
        body = json.dumps({"source": source, "entry": "f"}).encode()

        def feed(fd: int | None) -> None:
            if fd is not None:
                protocol.write_all(fd, body)
        host_pid = self._spare[0] if self._spare else None
        status, detail, size = self.call("pytest_toolbench.sandbox.jobs:run_source", len(body), feed, 30.0, audit=False)
        host_pid = self._pending[0] if self._pending else host_pid
        self.reap()
        got: Any = None
        confinement: Any = {}
        if status == "ok":  # the probe's own reply, no call data: parsed here
            reply = protocol.decode_frame(bytes(self._reply[: protocol.HEADER_BYTES + size]))
            self.wipe()
            got = reply.get("value") if reply.get("ok") else reply.get("detail")
            confinement = reply.get("confinement") or {}
        if not isinstance(got, dict) or got.get("error"):
            raise RuntimeError(f"sandbox self-check failed: {detail or got}")
        self.info.update(got["value"])
        caps = confinement.get("capabilities")
        self.info["verified_no_capabilities"] = bool(caps) and not caps["effective"] and not caps["permitted"]
        self.info["capabilities"] = caps or {"note": "disabled by caller"}
        seen = confinement.get("pid")
        self.info["verified_pid_namespace"] = self.pidns.init_pid is not None and seen not in (None, host_pid)

    # Which probe results each required layer answers for.
    _SECCOMP_CHECKS = ("verified_socket_refused", "verified_sysv_ipc_refused", "verified_pipe_refused",
                       "verified_memfd_refused", "verified_kernel_log_refused", "verified_fanotify_refused",
                       "verified_other_pids_refused")
    _NOT_LANDLOCK = (*_SECCOMP_CHECKS, "verified_host_paths_hidden", "verified_jail_read_only",
                     "verified_no_capabilities", "verified_pid_namespace")

    def startup(self) -> dict[str, Any]:
        info = self.info
        limits = self.config["limits"]
        info["privileged_start"] = os.geteuid() == 0
        # The cgroup first (the host's cgroup file system, with the harness's own privileges),
        # then a user namespace where this account needs one (it must come before the others),
        # then the mounts, the network and the PID namespace.
        self._setup_cgroup()
        self._setup_mounts()
        self._setup_jail()
        if not self.jail:  # the host's tree: chmod and utime would reach any file of this uid,
            # and so would truncation where Landlock does not govern it (ABI < 3)
            self.seccomp = syscall_filter.SyscallFilter(file_metadata=False,
                                                        file_truncation=self._landlock_governs_truncation())
        if self.config.get("network_isolation", True) and "namespaces" not in self.disabled:
            info["network_namespace"], info["network_namespace_note"] = policy.enter_namespaces()
        else:
            info["network_namespace"], info["network_namespace_note"] = False, "disabled by caller"
        if "caps" not in self.disabled:  # after the namespaces: the init and every call inherit it
            self.inherited_caps = privileges.narrow_inheritance(self.last_cap)
        self._setup_pid_namespace()
        info["rlimits"] = policy.apply_rlimits(limits["memory_mb"], limits["file_size_mb"])
        info["landlock_abi"] = 0 if "landlock" in self.disabled else self.landlock.abi
        info["seccomp"] = "seccomp" not in self.disabled and self.seccomp.available
        info["landlock_note"] = "disabled by caller" if "landlock" in self.disabled else self.landlock.absence
        if "landlock" not in self.disabled and self.landlock.absence_help:
            info["landlock_help"] = self.landlock.absence_help
        info["seccomp_note"] = "disabled by caller" if "seccomp" in self.disabled else self.seccomp.note
        info["bubblewrap"] = bool(self.config.get("bubblewrap"))
        self.probe()
        info["audit_hook"] = True
        info["per_call_process"] = "fork of a pre-imported zygote; exits after the call"
        missing = []
        landlock_checks = [v for k, v in info.items() if k.startswith("verified_") and k not in self._NOT_LANDLOCK]
        if not info["landlock_abi"] or not all(landlock_checks):
            missing.append("landlock")
        if not info["seccomp"] or not all(info.get(k) for k in self._SECCOMP_CHECKS):
            missing.append("seccomp")
        if "caps" not in self.disabled and not info.get("verified_no_capabilities"):
            missing.append("caps")
        info["missing_layers"] = missing
        if self.jail and not info.get("verified_host_paths_hidden"):
            info["filesystem_view"] = "host"
            info["filesystem_view_note"] = "a jail was built, but the probe could stat host paths from it"
        elif self.jail and not info.get("verified_jail_read_only"):
            info["filesystem_view"] = "host"
            info["filesystem_view_note"] = "a jail was built, but the probe could change its root's times"
        if self.pidns.init_pid is not None and not info["verified_pid_namespace"]:
            info["pid_namespace"], info["pid_namespace_note"] = False, "entered, but the probe saw its host pid"
        # The per-layer flags say what held, as missing_layers does (never "seccomp: true"
        # beside a missing seccomp): a filter that loaded but whose probe calls were not refused
        # is not in force; the note says why.
        if "seccomp" in missing and info["seccomp"]:
            failed = [k for k in self._SECCOMP_CHECKS if not info.get(k)]
            info["seccomp"], info["seccomp_filter_loaded"] = False, True
            info["seccomp_note"] = info["seccomp_note"] or (
                f"filter loaded, but the probe found {', '.join(failed)} false")
        if "landlock" in missing and info["landlock_abi"] and not info["landlock_note"]:
            failed = sorted(k for k, v in info.items() if k.startswith("verified_") and not v
                            and k not in self._NOT_LANDLOCK)
            info["landlock_note"] = (f"Landlock ABI {info['landlock_abi']} loaded, but the probe "
                                     f"found {', '.join(failed) or 'a check'} false")
        if "caps" in missing:
            info["caps_note"] = f"capabilities left in the call: {info.get('capabilities')}"
        info["absent_layers"] = self._absent_layers()
        info["kernel_isolation"] = self.strict = not missing
        info["insecure"] = bool(missing) and bool(limits.get("insecure"))
        return info

    def _absent_layers(self) -> dict[str, str]:
        """Optional layers this machine did not give, each with why (the required ones are
        ``missing_layers``); the README says what each one costs."""
        info, out = self.info, {}
        if not info.get("pid_namespace"):
            out["pid_namespace"] = info.get("pid_namespace_note", "")
        if not info.get("network_namespace"):
            out["network_namespace"] = info.get("network_namespace_note", "")
        if info.get("filesystem_view") != "jail":
            out["jail"] = info.get("filesystem_view_note", "")
        if info.get("disk_cap", {}).get("mechanism") != "tmpfs":
            out["tmpfs"] = info.get("disk_cap", {}).get("note", "")
        if info.get("memory_cap", {}).get("mechanism") != "cgroup":
            out["cgroup"] = info.get("memory_cap", {}).get("note", "")
        return out

    def _setup_cgroup(self) -> None:
        """A memory cgroup for the calls (``cgroup.create``) that the zygote moves into for
        good, so that every call is born in it (no migration, and its grace period, per call);
        else the address-space limit, the tmpfs size and a filter that refuses pipes and memfds
        hold a call's memory."""
        limits = self.config["limits"]
        limit = cgroup.allowance_bytes(limits["memory_mb"], limits.get("disk_mb", 256))
        note = "disabled by caller"
        zygote = cgroup.resident_bytes()  # counted too: the zygote lives in the cgroup
        if self.config.get("cgroup_fd") is not None:  # under bwrap: the pool places it
            self.cgroup, note = self._cgroup_from_pool(zygote)
        elif "cgroup" not in self.disabled:
            delegated = self.config.get("delegated_cgroup")
            cgroup.sweep(delegated)
            group, note = cgroup.create(cgroup.zygote_name(), limit + zygote, delegated)
            if group is not None:
                try:
                    cgroup.enter(group)
                except OSError as exc:
                    group.remove()
                    group, note = None, f"cannot move the zygote into {group.path}: {exc.strerror or exc}"
            self.cgroup = group
        if self.cgroup is not None:
            self.info["memory_cap"] = {"mechanism": "cgroup", "version": self.cgroup.version,
                                       "limit_mb": limit // MB,
                                       "zygote_mb": zygote // MB,
                                       "path": self.cgroup.path, "note": (
                "every page a call holds counts (pipes, memfds and its tmpfs included); past the "
                "limit the kernel kills the call. The zygote lives in it too (calls are born "
                "there) and the limit holds its resident size on top" + (
                    "" if self.cgroup.home_procs else
                    "; made by the pool on the host's side, which moved the zygote in "
                    "(bubblewrap's root has no /sys)") + (
                    f"; the delegated cgroup was not used: {note}" if note else ""))}
        else:
            self.info["memory_cap"] = {"mechanism": "rlimit", "limit_mb": int(limits["memory_mb"]), "note": (
                f"no memory cgroup ({note}): the call's address space is limited, its tmpfs "
                "is size-capped, and the syscall filter refuses pipes, memfds and shared memory")}

    def _cgroup_from_pool(self, zygote: int) -> tuple[cgroup.CallCgroup | None, str]:
        """Under bubblewrap (no /sys here, and a pid of 2 that names nothing on the host), the
        pool makes the cgroup and moves this process in (``cgroup.place``), then answers on
        ``cgroup_fd`` and closes it; this waits for that before forking anything, and checks
        that it really lives there. The zygote keeps no handle on the cgroup."""
        fd = int(self.config["cgroup_fd"])
        answer: dict[str, Any] = {}
        try:
            protocol.send(self.fd_out, {"type": "cgroup", "pid": os.getpid(), "resident": zygote})
            data = b""
            while chunk := os.read(fd, 4096):
                data += chunk
            answer = json.loads(data) if data else {"note": "the pool gave no answer"}
        except ValueError as exc:
            answer = {"note": f"the pool's answer is not JSON ({exc})"}
        finally:
            os.close(fd)
        path = answer.get("path")
        if not path:
            return None, str(answer.get("note") or "the pool made none")
        if not cgroup.holds_self(path):
            return None, f"the pool placed the zygote in {path}, but /proc/self/cgroup does not name it"
        return cgroup.CallCgroup(path, int(answer["version"])), str(answer.get("note") or "")

    def _setup_mounts(self) -> None:
        """The zygote's own mount namespace (per-call tmpfs and the jail live in it): directly
        where this process may (root), else in a user namespace where the machine allows an
        ordinary user one (tried in a throw-away child first: entering is irreversible); else
        a disk watchdog, and calls see the host's tree. ``user_namespace`` says which."""
        cap = {"disk_mb": self.disk_bytes // MB, "disk_inodes": self.disk_inodes}
        info = self.info
        info["user_namespace"], info["user_namespace_note"] = False, "not needed (privileged start)"
        if "tmpfs" in self.disabled:
            ok, note = False, "disabled by caller"
        else:
            ok, note = policy.enter_mount_namespace()
            if not ok:
                if "user_namespace" in self.disabled:
                    info["user_namespace_note"] = "disabled by caller"
                else:
                    trial = os.path.join(self.tmpdir, "userns-check")
                    os.mkdir(trial, 0o700)
                    try:
                        usable, why = privileges.probe_user_namespace(trial)
                    finally:
                        os.rmdir(trial)
                    if usable:
                        usable, why = privileges.enter_user_namespace()
                    info["user_namespace"], info["user_namespace_note"] = usable, why
                    if usable:
                        ok, note = policy.enter_mount_namespace()
                    else:
                        note = f"{note}; no usable user namespace: {why}"
        if ok:
            trial = os.path.join(self.tmpdir, "tmpfs-check")
            os.mkdir(trial, 0o700)
            try:
                policy.mount_tmpfs(trial, self.disk_bytes, self.disk_inodes)
                policy.detach(trial)
            except OSError as exc:
                ok, note = False, str(exc)
            finally:
                cleanup.remove_tree(trial)
        self.tmpfs = ok
        if ok:
            self.info["disk_cap"] = {"mechanism": "tmpfs", **cap, "note": (
                "each call's directory is a private tmpfs (ENOSPC past the size or inode limit), "
                "lazily unmounted after the call")}
        else:
            self.info["disk_cap"] = {"mechanism": "watchdog", **cap, "note": (
                f"no per-call tmpfs ({note}); the zygote measures the call's directory every "
                f"{_WATCH_S * 1e3:g} ms and kills a call over the cap")}

    def _setup_pid_namespace(self) -> None:
        info = self.info
        if "pid_namespace" in self.disabled:
            info["pid_namespace"], info["pid_namespace_note"] = False, "disabled by caller"
            return
        ok = self.pidns.enter(self.confine_init)
        info["pid_namespace"] = ok
        info["pid_namespace_note"] = self.pidns.note if ok else (
            f"no PID namespace ({self.pidns.note}): the syscall filter refuses every call that "
            "names another process's pid")

    def _setup_jail(self) -> None:
        """The calls' file-system root (``policy.build_jail``), built once in the zygote's own
        mount namespace: read-only binds of exactly what Landlock lets a call read, at the same
        paths, and the skeleton of this folder where each call's tmpfs is mounted. Where no
        mount namespace can be had the calls see the host's tree (Landlock still refuses its
        contents, but stat/readlink/access answer): ``filesystem_view`` says which."""
        info = self.info
        if "jail" in self.disabled:
            note = "disabled by caller"
        elif not self.tmpfs:
            note = f"needs a private mount namespace ({self.info['disk_cap']['note']})"
        else:
            root = os.path.join(self.tmpdir, "jail")
            os.mkdir(root, 0o700)
            try:
                bound = policy.build_jail(root, [*self.read_paths, os.devnull],
                                          [*policy.jail_link_paths(self.config["package_dir"]), *self.job_paths],
                                          [self.tmpdir])
                # Read-only for the calls (Landlock does not govern chmod/utime); the zygote
                # makes the calls' mount points through a writable view outside it.
                writable = os.path.join(self.tmpdir, "jail-rw")
                os.mkdir(writable, 0o700)
                try:
                    policy.seal_jail(root, writable)
                except OSError:
                    try:
                        policy.detach(root)  # its binds go with it
                    except OSError:
                        pass
                    os.rmdir(writable)
                    raise
            except OSError as exc:
                note = f"building it failed: {exc}"
                cleanup.remove_tree(root)
            else:
                self.jail_rw = writable
                self.jail, note = root, (
                    f"each call is chrooted into a tmpfs holding read-only binds of {len(bound)} paths "
                    "(the Python installation, the package, system libraries and time zones, "
                    "/dev/null, /dev/urandom...) and its own directory; nothing else exists for it, "
                    "and the jail's own directories are read-only (no mode or time a call sets "
                    "outlives it)")
                info["jail_binds"] = bound
        info["filesystem_view"] = "jail" if self.jail else "host"
        info["filesystem_view_note"] = note if self.jail else (
            f"no jail ({note}): calls see the host's paths (Landlock refuses their contents, "
            "not stat/readlink/access of them; chmod and utime, which Landlock does not govern "
            "either, are refused by the syscall filter"
            + ("" if self._landlock_governs_truncation() else
               f", and so is truncation but through a descriptor open for writing (Landlock "
               f"ABI {self.landlock.abi}: no truncation right before ABI 3)") + ")")

    def _landlock_governs_truncation(self) -> bool:
        """Whether Landlock refuses a call truncating a file it may only read (ABI 3, Linux 6.2)."""
        return "landlock" not in self.disabled and self.landlock.abi >= 3

    def _hidden_probe_paths(self) -> list[str]:
        """Host paths the jail must hide from the probe: this folder's own files, and each
        protected folder (or, where the jail holds something beneath it, an entry of it that
        it does not hold)."""
        held = [*self.read_paths, os.devnull, self.tmpdir]
        out = [os.path.join(self.tmpdir, n) for n in sorted(os.listdir(self.tmpdir))
               if n not in ("jail",) and not n.startswith("call-")][:3]
        for path in self.config.get("protected", ()):
            if not any(h == path or h.startswith(path.rstrip(os.sep) + os.sep) for h in held):
                out.append(path)
                continue
            try:
                names = sorted(os.listdir(path))
            except OSError:
                continue
            for name in names:
                entry = os.path.join(path, name)
                if not any(h == entry or h.startswith(entry + os.sep) for h in held):
                    out.append(entry)
                    break
        return out

    def abandon(self) -> None:
        """The pool is gone (its harness was killed: EOF or EPIPE on the pool's pipes), so
        nobody else will remove this zygote's folder: kill the call in flight and the spare
        child, unmount what was mounted, remove the whole folder (lock file included, while it
        is still held), and let the caller exit. Never raises."""
        for child in (self._pending, self._spare):
            if child is not None:
                try:
                    os.kill(child[0], 9)
                except ProcessLookupError:
                    pass
        try:
            self.reap()
            self._discard_spare()
        except Exception as exc:  # noqa: BLE001 - the folder goes regardless
            print(f"sandbox: abandoning: {exc}", file=sys.stderr, flush=True)
        self.pidns.close()
        if self.cgroup is not None:
            self.cgroup.remove()
        for mount in (self.jail_rw, self.jail):
            if mount:
                try:
                    policy.detach(mount)  # the binds and call tmpfs beneath go with it
                except OSError:
                    pass
        cleanup.remove_tree(self.tmpdir)
        if self.parent_fd is not None:  # bwrap's bind of the folder: removed on the host's side
            try:
                os.rmdir(os.path.basename(self.tmpdir), dir_fd=self.parent_fd)
            except OSError:
                pass  # not empty, or gone: a later pool's sweep takes what is left

    def _serve_one(self) -> bool:
        """One request from the pool; False once the pool has gone. The zygote reads only the
        request's header; the payload and the reply cross it as bytes in its zeroed buffers."""
        small = memoryview(self._small)
        try:
            self._read_into(small)
        except protocol.ChannelClosed:
            return False
        header_len, body_len = protocol.unpack_split(small)
        head = bytearray(header_len)
        self._read_into(memoryview(head))
        header = json.loads(head.decode("utf-8"))  # id, job, timeout: no call data
        started = time.monotonic()
        status, detail, size = self.call(str(header["job"]), body_len, self._stream_body(body_len),
                                         float(header["timeout_s"]))
        # The call as the zygote saw it (child hand-off to reply), free of the harness's GIL.
        out = {"id": header.get("id"), "status": status, "detail": detail,
               "worker_ms": (time.monotonic() - started) * 1e3}
        body = memoryview(self._reply)[protocol.HEADER_BYTES: protocol.HEADER_BYTES + size]
        try:
            protocol.write_all(self.fd_out, protocol.split_prefix(json.dumps(out).encode(), size))
            protocol.write_all(self.fd_out, body)
        finally:
            body.release()
            self.wipe()
        return True

    def serve(self) -> int:
        """Until the pool goes away; then the zygote removes its own folder and exits."""
        try:
            while self._serve_one():
                self.prepare()  # forks from a state that holds nothing of the call just served
        except (protocol.ChannelClosed, BrokenPipeError):
            pass  # the pool's pipes: its harness is gone
        self.abandon()
        return 0


# Each raises when the kernel refused it (as it must in a call), returns if it got through.
_KERNEL_PROBES = """
def _kernel_log():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(64)
    if libc.klogctl(3, buf, 64) < 0:
        raise PermissionError(ctypes.get_errno())

def _fanotify():
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(300, 0, os.O_RDONLY)
    if fd < 0:
        raise PermissionError(ctypes.get_errno())
    os.close(fd)

def _other_pids(pids):
    import os, resource
    for pid in pids:
        if pid == os.getpid():  # its own pid (a number the zygote saw in another pid namespace)
            continue
        for attempt in (lambda: os.kill(pid, 0), lambda: os.getpriority(os.PRIO_PROCESS, pid),
                        lambda: os.sched_getaffinity(pid), lambda: resource.prlimit(pid, resource.RLIMIT_CORE)):
            try:
                attempt()
            except OSError:
                continue
            return
    raise PermissionError("every pid refused")
"""

# Raises when none of the paths exists (lstat: FileNotFoundError), returns if one does.
_HIDDEN_PROBE = """
def _all_hidden(paths):
    import os
    for path in paths:
        try:
            os.lstat(path)
        except FileNotFoundError:
            continue
        return
    raise FileNotFoundError(len(paths))
"""

# Raises when shmget, msgget and semget are all refused; otherwise removes what it made (IPC_RMID).
_SYSV_IPC_PROBE = """
def _sysv_ipc():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    shm, msg, sem = libc.shmget(0, 4096, 0o1600), libc.msgget(0, 0o1600), libc.semget(0, 1, 0o1600)
    if shm >= 0:
        libc.shmctl(shm, 0, None)
    if msg >= 0:
        libc.msgctl(msg, 0, None)
    if sem >= 0:
        libc.semctl(sem, 0, 0)
    if max(shm, msg, sem) < 0:
        raise PermissionError(ctypes.get_errno())
"""


#: What gives a machine each required layer (in the refusal's one line).
_LAYER_HELP = {
    "landlock": "Landlock needs Linux 5.13 or later with 'landlock' in the active LSMs "
                "(cat /sys/kernel/security/lsm; boot with lsm=...,landlock)",
    "seccomp": "seccomp filters need a kernel built with CONFIG_SECCOMP_FILTER on x86_64",
    "caps": "the call kept a capability it should not hold: report this as a bug",
}


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    fd_out = config["fd_out"]
    # The environment is the pool's allowlist; bwrap's --chdir adds PWD, which calls inherit.
    os.environ.pop("PWD", None)
    os.chdir(config["tmpdir"])
    sys.stdin = None  # type: ignore[assignment]
    zygote: Zygote | None = None
    try:
        for module in config.get("preload", ()):
            importlib.import_module(module)
        zygote = Zygote(config)
        info = zygote.startup()
    except protocol.ChannelClosed:  # the pool went away during the probe
        assert zygote is not None
        zygote.abandon()
        return 0
    except BaseException as exc:  # report why, then die: the pool turns this into an error
        try:
            protocol.send(fd_out, {"type": "fatal", "detail": f"{type(exc).__name__}: {exc}",
                                   "traceback": "".join(traceback.format_exception(exc))})
        except BrokenPipeError:  # nobody to tell, nobody to clean up after us
            if zygote is not None:
                zygote.abandon()
            else:
                cleanup.remove_tree(config["tmpdir"])
        return 1
    if info["missing_layers"] and not config["limits"].get("insecure"):
        notes = "; ".join(f"{k}: {info.get(f'{k}_note') or 'not verified'}" for k in info["missing_layers"])
        helps = "; ".join(info.get(f"{k}_help") or _LAYER_HELP[k] for k in info["missing_layers"] if k in _LAYER_HELP)
        try:
            protocol.send(fd_out, {"type": "refused", "isolation": info, "detail": (
                f"kernel isolation unavailable ({notes}); refusing to run untrusted tool code. "
                f"What helps: {helps}; or pass --sandbox-insecure to run tools with the audit hook "
                "only (the report will say so)"
            )})
        except BrokenPipeError:
            zygote.abandon()
        return 1
    zygote.prepare()
    try:
        protocol.send(fd_out, {"type": "ready", "pid": os.getpid(), "python": sys.version, "isolation": info})
    except BrokenPipeError:  # the pool went away while this zygote started
        zygote.abandon()
        return 0
    return zygote.serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
