"""Sandbox zygote: ``python -m pytest_toolbench.sandbox.worker CONFIG_JSON``.

Started by :mod:`pytest_toolbench.sandbox.pool` as a fresh interpreter (never a fork of pytest,
which has threads and holds the API key in memory) with a scrubbed environment. It imports the
harness jobs once, enters its own network namespace, checks that every per-call layer really
holds (a probe child tries to read ``/proc/1/environ``, the project, the home directory, to open
a socket and to write outside), reports that, then serves requests forever:

    a child forked ahead of time confines itself (Landlock, seccomp, audit hook, CPU limit) in a
    fresh directory and waits -> request: the zygote hands it the job and payload; it runs the
    trusted job on the untrusted payload, writes its reply to a private pipe and ``_exit``s ->
    the zygote validates the reply, caps its strings, answers the pool with the request's id,
    reaps the child and forks the next one (while the pool and the model are busy).

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
import shutil
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

from pytest_toolbench.sandbox import policy, protocol

JOB_PREFIX = "pytest_toolbench."
#: Layers without which tools are refused (unless the pool was started insecure).
REQUIRED_LAYERS = ("landlock", "seccomp")


def resolve_job(job: str) -> Callable[[dict], Any]:
    """Only trusted harness code: ``pytest_toolbench.<module>:<function>``."""
    module_name, sep, func_name = job.partition(":")
    if not sep or not module_name.startswith(JOB_PREFIX) or not func_name.isidentifier():
        raise ValueError(f"job must be 'pytest_toolbench.<module>:<function>', got {job!r}")
    func = getattr(importlib.import_module(module_name), func_name)
    if not callable(func):
        raise TypeError(f"job {job!r} is not callable")
    return func


class Zygote:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.fd_in, self.fd_out = config["fd_in"], config["fd_out"]
        self.tmpdir = config["tmpdir"]
        self.cap = int(config["limits"].get("output_cap", 0))
        self.cpu_seconds = float(config["limits"]["cpu_seconds"])
        self.disabled = set(config.get("disable_layers", ()))
        self.jobs: dict[str, Callable[[dict], Any]] = {}
        self.calls = 0
        self._pending: tuple[int, str] | None = None
        self._spare: tuple[int, int, int, str] | None = None
        self._last_status = 0
        self.strict = False  # set once the probe has verified every required layer
        self.seccomp = policy.Seccomp()
        read_paths = policy.read_only_paths(config["package_dir"], config.get("protected", ()))
        self.landlock = policy.Landlock(read_paths)
        self.info: dict[str, Any] = {"read_only_paths": read_paths}

    # ------------------------------------------------------------------ per-call child
    def confine_child(self, workdir: str, audit: bool = True) -> policy.AuditPolicy | None:
        """Runs in the forked child, before any untrusted code. Raises if a required layer fails
        although the start-up probe verified it (never silently runs a tool with less); in
        insecure mode the layers are applied best effort."""
        policy.die_with_parent()
        os.chdir(workdir)
        os.environ.update(HOME=workdir, TMPDIR=workdir)
        tempfile.tempdir = None
        policy.set_cpu_budget(self.cpu_seconds)
        if "landlock" not in self.disabled:
            abi, note = self.landlock.apply(workdir)
            if not abi and self.strict:
                raise OSError(f"Landlock: {note}")
        self.landlock.close_fds()
        if "seccomp" not in self.disabled:
            ok, note = self.seccomp.apply()
            if not ok and self.strict:
                raise OSError(f"seccomp: {note}")
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        sys.stdout = sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
        return policy.install_audit_hook(workdir) if audit else None

    def _child(self, request_fd: int, reply_fd: int, workdir: str, audit: bool) -> None:
        """Never returns: the child ends with ``os._exit`` so no thread or atexit survives.

        Confines itself first, then waits for its one request: children are forked ahead of
        time (one spare per zygote), so fork and confinement are off the call's critical path.
        """
        status = 0
        try:
            os.close(self.fd_in)
            os.close(self.fd_out)
            self.confine_child(workdir, audit)
            request = protocol.recv(request_fd)
            os.close(request_fd)
            job = request["job"]
            fn = self.jobs.get(job) or resolve_job(job)
            pristine = dict(vars(builtins))
            try:
                value = fn(request["payload"])
                vars(builtins).update(pristine)  # our own reply code needs a working len(), str()...
                data = protocol.encode({"ok": True, "value": protocol.cap_strings(value, self.cap)})
            except BaseException as exc:  # the trusted job raised: report it as data
                vars(builtins).update(pristine)
                data = protocol.encode({"ok": False, "detail": f"{type(exc).__name__}: {exc}"})
            protocol.write_all(reply_fd, data)
        except BaseException:  # noqa: BLE001 - the zygote reports "no reply" with our exit status
            status = 70
        os._exit(status)

    def _fork_child(self, audit: bool = True) -> tuple[int, int, int, str]:
        """A confined child waiting for a request: (pid, request fd, reply fd, its directory)."""
        self.calls += 1
        workdir = os.path.join(self.tmpdir, f"call-{self.calls}")
        os.mkdir(workdir, 0o700)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        # Everything the zygote holds goes to the permanent generation: the child's collections
        # then never touch (and copy-on-write) those pages; a fork stays ~1 ms instead of ~20.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            os.close(req_w)
            os.close(rep_r)
            self._child(req_r, rep_w, workdir, audit)
        os.close(req_r)
        os.close(rep_w)
        return pid, req_w, rep_r, workdir

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
    def call(self, job: str, payload: Any, timeout_s: float, audit: bool = True) -> dict[str, Any]:
        """Run one request in a fresh child; returns {"status", "value", "detail"}."""
        self.reap()
        if job not in self.jobs:
            try:
                self.jobs[job] = resolve_job(job)
            except Exception as exc:  # a harness bug: report it, stay alive
                return {"status": "crashed", "detail": f"cannot load job {job}: {type(exc).__name__}: {exc}"}
            self._discard_spare()  # forked before the import: would import it again per call
        if audit and self._spare is not None:
            child, self._spare = self._spare, None
        else:
            child = self._fork_child(audit)
        pid, req_w, read_fd, workdir = child
        self._pending = (pid, workdir)
        start = time.monotonic()
        try:
            protocol.send(req_w, {"job": job, "payload": payload})
        except OSError:
            pass  # the child died waiting; its exit status is reported below
        finally:
            os.close(req_w)
        try:
            data, state = self._read_reply(read_fd, start + timeout_s)
        finally:
            os.close(read_fd)
        if state != "eof":  # a whole reply (the child is done) or a hang: end it now
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        if state == "timeout":
            return {"status": "timeout", "detail": f"no result after {timeout_s:g} s wall clock; call killed"}
        if state == "eof":  # the child ended without a whole reply: say how it ended
            self.reap()
            end = protocol.exit_text(os.waitstatus_to_exitcode(self._last_status))
            why = "sent no reply" if not data else "sent a truncated reply"
            return {"status": "crashed", "detail": f"the call {why}; its process {end}"}
        try:
            reply = protocol.decode_frame(data)
        except protocol.ProtocolError as exc:
            return {"status": "crashed", "detail": f"the call sent a malformed reply ({exc})"}
        if not isinstance(reply, dict) or not reply.get("ok"):
            detail = reply.get("detail") if isinstance(reply, dict) else None
            return {"status": "crashed", "detail": f"job {job} raised {protocol.cap_text(str(detail), self.cap)}"}
        return {"status": "ok", "value": protocol.cap_strings(reply.get("value"), self.cap)}

    def reap(self) -> None:
        """Wait for the last call's child and remove its directory (after the pool has its
        answer, so the child's teardown is off the critical path)."""
        if self._pending is None:
            return
        pid, workdir = self._pending
        self._pending = None
        _, self._last_status = os.waitpid(pid, 0)
        shutil.rmtree(workdir, ignore_errors=True)

    @staticmethod
    def _read_reply(fd: int, deadline: float) -> tuple[bytes, str]:
        """The child's reply frame: (bytes, "frame") once whole, ("eof") if the child closed the
        pipe first, ("timeout") at the deadline or on a flood."""
        buf = bytearray()
        need = protocol.HEADER_BYTES
        while True:
            wait = deadline - time.monotonic()
            if wait <= 0:
                return b"", "timeout"
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                return b"", "timeout"
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return bytes(buf), "eof"
            buf += chunk
            if need == protocol.HEADER_BYTES and len(buf) >= need:
                need += int.from_bytes(buf[: protocol.HEADER_BYTES], "big")
                if need > protocol.MAX_MESSAGE_BYTES + protocol.HEADER_BYTES:
                    return b"", "timeout"  # a flood: treated like a hang (the child is killed)
            if len(buf) >= need > protocol.HEADER_BYTES:
                return bytes(buf[:need]), "frame"

    def probe(self) -> None:
        """A child confined like every call checks what really holds; results go into info."""
        checks = {
            "verified_proc_environ_refused": "open('/proc/1/environ','rb').read()",
            "verified_parent_cmdline_refused": f"open('/proc/{os.getppid()}/cmdline','rb').read()",
            "verified_socket_refused": "__import__('_socket').socket(2, 1).close()",
            "verified_sysv_ipc_refused": "_sysv_ipc()",
            "verified_write_outside_refused": f"open({os.path.join(self.tmpdir, 'probe')!r},'w').close()",
        }
        for i, path in enumerate(self.config.get("protected", ())):
            checks[f"verified_protected_{i}_refused"] = f"__import__('os').listdir({path!r})"
        source = _SYSV_IPC_PROBE + "def f():\n    out = {}\n"
        for key, expr in checks.items():
            source += f"    try:\n        {expr}\n        out[{key!r}] = False\n    except Exception:\n        out[{key!r}] = True\n"
        source += "    return out\n"
        # Without the audit hook: this checks the kernel layers alone.
        got = self.call("pytest_toolbench.sandbox.jobs:run_source", {"source": source, "entry": "f"}, 30.0, audit=False)
        self.reap()
        if got["status"] != "ok" or got["value"]["error"]:
            raise RuntimeError(f"sandbox self-check failed: {got.get('detail') or got['value']}")
        self.info.update(got["value"]["value"])

    def startup(self) -> dict[str, Any]:
        info = self.info
        limits = self.config["limits"]
        if self.config.get("network_isolation", True) and "namespaces" not in self.disabled:
            info["network_namespace"], info["network_namespace_note"] = policy.enter_namespaces()
        else:
            info["network_namespace"], info["network_namespace_note"] = False, "disabled by caller"
        info["rlimits"] = policy.apply_rlimits(limits["memory_mb"], limits["file_size_mb"])
        info["landlock_abi"] = 0 if "landlock" in self.disabled else self.landlock.abi
        info["seccomp"] = "seccomp" not in self.disabled and self.seccomp.available
        info["landlock_note"] = "disabled by caller" if "landlock" in self.disabled else ""
        info["seccomp_note"] = "disabled by caller" if "seccomp" in self.disabled else self.seccomp.note
        info["bubblewrap"] = bool(self.config.get("bubblewrap"))
        self.probe()
        info["audit_hook"] = True
        info["per_call_process"] = "fork of a pre-imported zygote; exits after the call"
        missing = []
        if not info["landlock_abi"] or not all(v for k, v in info.items() if k.startswith("verified_") and k != "verified_socket_refused"):
            missing.append("landlock")
        if not info["seccomp"] or not (info.get("verified_socket_refused") and info.get("verified_sysv_ipc_refused")):
            missing.append("seccomp")
        info["missing_layers"] = missing
        # The per-layer flags say what held, as missing_layers does (issue 23: "seccomp: true"
        # beside a missing seccomp): a filter that loaded but whose probe calls were not refused
        # is not in force; the note says why.
        if "seccomp" in missing and info["seccomp"]:
            info["seccomp"], info["seccomp_filter_loaded"] = False, True
            info["seccomp_note"] = info["seccomp_note"] or (
                "filter loaded, but the probe's socket() or SysV IPC call was not refused")
        if "landlock" in missing and info["landlock_abi"] and not info["landlock_note"]:
            failed = sorted(k for k, v in info.items() if k.startswith("verified_") and not v
                            and k not in ("verified_socket_refused", "verified_sysv_ipc_refused"))
            info["landlock_note"] = (f"Landlock ABI {info['landlock_abi']} loaded, but the probe "
                                     f"found {', '.join(failed) or 'a check'} false")
        info["kernel_isolation"] = self.strict = not missing
        info["insecure"] = bool(missing) and bool(limits.get("insecure"))
        return info

    def serve(self) -> int:
        while True:
            try:
                request = protocol.recv(self.fd_in)
            except protocol.ChannelClosed:
                return 0
            started = time.monotonic()
            result = self.call(request["job"], request["payload"], float(request["timeout_s"]))
            # The call as the zygote saw it (child hand-off to reply), free of the harness's GIL.
            result["worker_ms"] = (time.monotonic() - started) * 1e3
            protocol.send(self.fd_out, {"id": request.get("id"), **result})
            self.prepare()


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


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    fd_out = config["fd_out"]
    os.chdir(config["tmpdir"])
    sys.stdin = None  # type: ignore[assignment]
    try:
        for module in config.get("preload", ()):
            importlib.import_module(module)
        zygote = Zygote(config)
        info = zygote.startup()
    except BaseException as exc:  # report why, then die: the pool turns this into an error
        protocol.send(fd_out, {"type": "fatal", "detail": "".join(traceback.format_exception(exc))})
        return 1
    if info["missing_layers"] and not config["limits"].get("insecure"):
        notes = "; ".join(f"{k}: {info.get(f'{k}_note') or 'not verified'}" for k in info["missing_layers"])
        protocol.send(fd_out, {"type": "refused", "isolation": info, "detail": (
            f"kernel isolation unavailable ({notes}); refusing to run untrusted tool code. "
            "Pass --sandbox-insecure to run tools with the audit hook only (the report will say so)"
        )})
        return 1
    zygote.prepare()
    protocol.send(fd_out, {"type": "ready", "pid": os.getpid(), "python": sys.version, "isolation": info})
    return zygote.serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
