"""Warm pool of sandbox zygotes that run untrusted code for the harness.

Why a pool: a ToolHop sample makes several tool calls and a run makes thousands; a fresh
interpreter per call costs tens of milliseconds, a fork of a warm, pre-imported zygote about a
millisecond. Why processes (not threads): only a process can be killed on a wall-clock timeout,
and only a process can be confined by the kernel. Zygotes are spawned as
``python -m pytest_toolbench.sandbox.worker`` with a scrubbed environment, never forked from
pytest (which runs threads and holds the API key); each call runs in a fresh fork of one (see
worker.py), so nothing a call does reaches the next.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal, Sequence

from pytest_toolbench import owned_folders
from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import cleanup, protocol
from pytest_toolbench.sandbox.interface import SandboxOutcome
from pytest_toolbench.sandbox.isolation_report import isolation_state

__all__ = ["SandboxOutcome", "SandboxStartError", "ToolSandbox", "JobModule"]

log = logging.getLogger(__name__)

_HARNESS_JOB_RE = re.compile(r"^pytest_toolbench(\.[A-Za-z_][A-Za-z0-9_]*)+:[A-Za-z_][A-Za-z0-9_]*$")
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_STARTUP_TIMEOUT_S = 60.0
#: Environment variables a worker inherits (everything else, API keys included, is dropped).
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
#: Extra wall-clock seconds the pool waits beyond a call's own limit (which the zygote enforces)
#: before it declares the zygote itself hung and kills it.
_ZYGOTE_GRACE_S = 5.0
#: Kernel layers a test may pretend are unavailable (``ToolSandbox(disable_layers=...)``).
#: ``landlock_truncation``: Landlock as Linux 5.13-6.1 has it (ABI 2 at most: no truncation right).
LAYERS = ("landlock", "seccomp", "namespaces", "tmpfs", "jail", "audit_hook",
          "caps", "pid_namespace", "cgroup", "user_namespace", "landlock_truncation")
#: Name of every pool folder (``<tempdir>/toolbench-sandbox-*``), which sweep_stale_folders knows.
FOLDER_PREFIX = "toolbench-sandbox-"
_CLOSED = object()  # in the slot queue once the pool is closed: wakes every caller waiting there
_live_pools: weakref.WeakSet[ToolSandbox] = weakref.WeakSet()


class SandboxStartError(RuntimeError):
    """A worker could not be started: an infrastructure problem, not a tool failure."""


def _delegated_cgroup() -> str | None:
    from pytest_toolbench.sandbox import cgroup  # here: the harness's start-up never needs it

    return cgroup.delegated_folder()


def protected_paths() -> list[str]:
    """Folders no tool may read and no read-only rule may open up: the harness's working
    directory (the project, its ``.toolbench`` cache), the package root and the home directory."""
    out: list[str] = []
    # An installed (not editable) package lives in site-packages, which tools may read.
    root = [] if os.path.basename(_PACKAGE_ROOT) in {"site-packages", "dist-packages"} else [_PACKAGE_ROOT]
    for path in (os.getcwd(), *root, os.path.expanduser("~")):
        real = os.path.realpath(path)
        if os.path.isdir(real) and real != "/" and real not in out:
            out.append(real)
    return out


class JobModule:
    """A module outside this package whose functions may run as sandbox jobs (one a registered
    benchmark declares in ``sandbox_modules``): where the zygote imports it from, and the one
    path a call may read of it (its top-level package's folder, or the module's own file)."""

    def __init__(self, name: str, import_root: str, read_path: str) -> None:
        self.name, self.import_root, self.read_path = name, import_root, read_path

    @classmethod
    def locate(cls, name: str) -> JobModule:
        """Found on this process's import path without importing it (a package's ``__init__``
        is not run here); ``ValueError`` with one line where it cannot serve: not a module
        name, not found, inside this package (its jobs need no declaration), or lying in a
        folder that holds the project, the package or the home directory (a call would read
        them)."""
        if not _MODULE_RE.match(name):
            raise ValueError(f"sandbox job module {name!r} is not a module name")
        if name == "pytest_toolbench" or name.startswith("pytest_toolbench."):
            raise ValueError(f"sandbox job module {name!r} is part of the harness: declare only "
                             "a benchmark's own modules")
        top = name.partition(".")[0]
        try:
            spec = find_spec(top)
        except (ImportError, ValueError) as exc:
            raise ValueError(f"sandbox job module {name!r}: {exc}") from exc
        if spec is None:
            raise ValueError(f"sandbox job module {name!r} is not on the import path")
        if spec.submodule_search_locations:  # a package: its folder, imported from its parent
            folders = list(spec.submodule_search_locations)
            if len(folders) != 1:
                raise ValueError(f"sandbox job module {name!r}: a namespace package spread over "
                                 f"{len(folders)} folders; give it an __init__.py")
            read_path = os.path.realpath(folders[0])
        elif spec.origin and os.path.isfile(spec.origin):
            read_path = os.path.realpath(spec.origin)
        else:
            raise ValueError(f"sandbox job module {name!r} is not a source file or package "
                             f"({spec.origin})")
        for guarded in protected_paths():
            if guarded == read_path or guarded.startswith(read_path.rstrip(os.sep) + os.sep):
                raise ValueError(f"sandbox job module {name!r} lies at {read_path}, which holds "
                                 f"{guarded}: a call would read it; move the module into a folder "
                                 "of its own")
        return cls(name, os.path.dirname(read_path), read_path)


def harness_job(job: str) -> bool:
    """``pytest_toolbench.<module>:<function>``: trusted code of this package."""
    return bool(_HARNESS_JOB_RE.match(job))


def check_job(job: str, modules: Sequence[str]) -> None:
    """A job names trusted code: this package's, or a function of a declared job module;
    anything else (a name read from data, a module nobody declared) is a ``ValueError``."""
    if harness_job(job):
        return
    module, sep, func = job.partition(":")
    if sep and module in modules and func.isidentifier():
        return
    declared = f" or one of the declared modules {sorted(modules)}" if modules else ""
    raise ValueError(f"job must be 'pytest_toolbench.<module>:<function>'{declared} "
                     f"('<module>:<function>'), got {job!r}")


def bubblewrap_argv(tmpdir: str, read_paths: Sequence[str],
                    links: Sequence[tuple[str, str]] = ()) -> list[str] | None:
    """``bwrap`` in front of the zygote when it is on PATH: a new mount namespace holding only the
    Python installation, the package, the temp dir, a private /proc and /dev; new user, pid, IPC,
    UTS and network namespaces. An extra layer: Landlock and seccomp still apply inside. No
    --die-with-parent: that follows the *thread* that started it (a pool thread); the zygote
    exits on its own when the pool's pipe closes. ``links``: (path, target) of the symlinks on
    the way to what is bound (``/lib64 -> usr/lib64``: the loader of every program is named by
    that path, so without it ``bwrap`` cannot even exec the interpreter)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    argv = [bwrap, "--unshare-all", "--dev", "/dev", "--proc", "/proc"]
    for path in read_paths:
        argv += ["--ro-bind", path, path]
    for link, target in dict(links).items():
        argv += ["--symlink", target, link]
    argv += ["--bind", tmpdir, tmpdir, "--chdir", tmpdir, "--"]
    return argv


def _bwrap_read_paths(job_paths: Sequence[str] = ()) -> list[str]:
    from pytest_toolbench.sandbox.policy import read_only_paths  # ctypes: only when bwrap is used

    paths = read_only_paths(os.path.join(_PACKAGE_ROOT, "pytest_toolbench"), protected_paths())
    paths += [p for p in job_paths if p not in paths]  # the declared job modules, read-only
    extra = [os.path.realpath(p) for p in ("/usr", "/bin", "/etc/ld.so.cache") if os.path.exists(p)]
    out: list[str] = []
    # Each bind is recursive: a path beneath another is bound already. Bound again, it is a
    # mount of its own beneath the other, and inside an ordinary user's namespace such a child
    # mount is locked, so the zygote's non-recursive jail bind of the outer path (/usr, where
    # the interpreter is the system's) fails with EINVAL and the calls lose their jail.
    for path in sorted({p for p in [*paths, *extra] if not p.startswith("/dev/")}):
        if not any(path == o or path.startswith(o.rstrip(os.sep) + os.sep) for o in out):
            out.append(path)
    return out


def _bwrap_links(read_paths: Sequence[str], job_paths: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The symlinks bubblewrap's root must show on the way to ``read_paths``: the same ones the
    zygote's jail mirrors (the interpreter, its prefixes and import path, the system paths)."""
    from pytest_toolbench.sandbox import policy  # ctypes: only when bwrap is used

    wanted = [*policy.jail_link_paths(os.path.join(_PACKAGE_ROOT, "pytest_toolbench")), *job_paths]
    out: list[tuple[str, str]] = []
    for path in wanted:
        out += [link for link in policy.links_on_the_way(os.path.abspath(path), read_paths) if link not in out]
    return out


def host_pid(root: int, inner: int) -> int:
    """The pid, in this process's PID namespace, of the descendant of ``root`` that is ``inner``
    in its own namespace (the zygote that ``bwrap``, process ``root``, started as its pid 2);
    ``root`` where none is found. Read from ``/proc/<pid>/status`` (``NSpid``: its pid in each
    namespace, the innermost last) down the ``children`` lists."""
    todo, seen = [root], set()
    while todo:
        pid = todo.pop(0)
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
                nspid = next((line.split()[1:] for line in f if line.startswith("NSpid:")), [])
            if pid != root and len(nspid) > 1 and nspid[-1] == str(inner):
                return pid
            with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
                todo += [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            continue
    return root


_checkers: dict[str, Any] = {}


def _reply_checker(job: str) -> Any:
    """The job's own reply check, ``<function>_reply(value, cap)`` beside it in its module
    (raises ValueError/TypeError on a value of the wrong shape, returns it capped), or the
    generic total cap."""
    if job not in _checkers:
        module_name, _, func = job.partition(":")
        try:
            checker = getattr(import_module(module_name), f"{func}_reply", None)
        except Exception:  # noqa: BLE001 - the zygote reports a job that cannot load
            checker = None
        _checkers[job] = checker if callable(checker) else protocol.cap_total
    return _checkers[job]


def check_reply(job: str, body: bytes, cap: int) -> tuple[Literal["ok", "crashed"], Any, str]:
    """(status, value, detail) from the reply body a call's child sent: anything it may have
    written (a forged frame, bytes that are not UTF-8 or JSON, nesting deeper than the decoder
    takes, an envelope or value of the wrong shape, too much text) is a failed call with a
    one-line reason, never an exception in the harness."""
    try:
        reply = protocol.parse_body(body)
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            raise ValueError("not a {'ok': bool, ...} object")
        if not reply["ok"]:
            detail = reply.get("detail")
            if not isinstance(detail, str):
                raise ValueError("an error reply without a text detail")
            return "crashed", None, f"job {job} raised {protocol.cap_text(detail, cap)}"
        return "ok", _reply_checker(job)(reply.get("value"), cap), ""
    except (protocol.ProtocolError, ValueError, TypeError, KeyError, RecursionError) as exc:
        why = protocol.cap_text(str(exc), 200)
        return "crashed", None, f"the call sent a malformed reply ({why})"


class _Worker:
    """One worker process and its two pipes. Used by one thread at a time (owned via the pool)."""

    _ids = itertools.count(1)

    def __init__(
        self,
        limits: SandboxLimits,
        network_isolation: bool,
        preload: Sequence[str],
        disable_layers: Sequence[str] = (),
        use_bubblewrap: bool = True,
        register: Any = None,
        job_modules: Sequence[JobModule] = (),
    ) -> None:
        """``register(worker)``, if given, is called before the process starts, so that a
        ``close()`` from another thread can kill a worker that is still starting.
        ``job_modules``: the declared modules outside this package the zygote may import."""
        if not sys.platform.startswith("linux"):
            # The zygote is built on Linux alone (prctl, unshare, Landlock's and seccomp's
            # system calls by number): elsewhere it would die on its first such call, or make
            # an unrelated system call of the same number, and an insecure run would too.
            raise SandboxStartError(
                f"refusing to run untrusted tool code on {sys.platform}: the tool sandbox needs Linux "
                "(Landlock, seccomp and namespaces confine each call), with or without "
                "--sandbox-insecure; run ToolHop in a Linux container or VM (the other benchmarks "
                "run no tool code)")
        self.job_modules = tuple(job_modules)
        self._kill_lock = threading.Lock()
        self._tail: str | None = None
        self._req_w = self._rep_r = self._cgroup_w = -1
        # Under bwrap: (path, zygote's host pid) of the memory cgroup this pool made for it.
        self._cgroup: tuple[str, int] | None = None
        # Locked before it carries the name another run's sweep looks for, and held by this
        # pool and shared with the zygote: the folder is a live one while either of them
        # lives, so no other run's sweep ever removes it.
        try:
            self.tmpdir, self._lock_fd = owned_folders.make_locked_folder(tempfile.gettempdir(), FOLDER_PREFIX)
        except OSError as exc:
            raise SandboxStartError(f"cannot make the sandbox folder in {tempfile.gettempdir()}: {exc}") from exc
        self._stderr_path = os.path.join(self.tmpdir, ".worker-stderr")
        self.output_cap = limits.output_cap
        self.reply_limit = protocol.reply_limit(limits.output_cap)
        try:
            if register is not None:
                register(self)
            hello = self._start(limits, network_isolation, preload, disable_layers, use_bubblewrap)
        except BaseException:
            # A failed start, or Ctrl-C / SIGTERM while it starts: no process, pipe or temp folder
            # is left behind (kill() is idempotent; a failure below may have called it already).
            self.kill()
            raise
        # The zygote's pid as the host sees it: under bwrap, hello's pid is its number in bwrap's
        # PID namespace (2), and self.proc is bwrap itself, which a signal to the zygote misses.
        self.pid: int = hello["pid"] if self.proc.pid == hello["pid"] else host_pid(self.proc.pid, hello["pid"])
        self.info: dict[str, Any] = {"python": hello["python"], **hello["isolation"]}

    def _start(self, limits: SandboxLimits, network_isolation: bool, preload: Sequence[str],
               disable_layers: Sequence[str], use_bubblewrap: bool) -> dict[str, Any]:
        """Start the zygote and return its hello (``SandboxStartError`` if it will not run)."""
        env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
        roots = [_PACKAGE_ROOT, *dict.fromkeys(m.import_root for m in self.job_modules)]
        env.update(
            HOME=self.tmpdir,
            TMPDIR=self.tmpdir,
            PYTHONPATH=os.pathsep.join(roots),
            PYTHONDONTWRITEBYTECODE="1",
            PYTHONHASHSEED="0",
            PYTHONIOENCODING="utf-8",
        )
        env.setdefault("PATH", os.defpath)
        env.setdefault("LANG", "C.UTF-8")
        argv = [sys.executable, "-m", "pytest_toolbench.sandbox.worker"]
        job_paths = list(dict.fromkeys(m.read_path for m in self.job_modules))
        wrap = None
        if use_bubblewrap:
            bound = _bwrap_read_paths(job_paths)
            wrap = bubblewrap_argv(self.tmpdir, bound, _bwrap_links(bound, job_paths))
        config: dict[str, Any] = {
            "tmpdir": self.tmpdir,
            "limits": limits.model_dump(),
            "network_isolation": network_isolation,
            "preload": list(preload),
            "package_dir": os.path.join(_PACKAGE_ROOT, "pytest_toolbench"),
            # Declared job modules: the zygote imports and runs only these besides the package's,
            # and a call reads their folders (Landlock, the jail's read-only binds) and no more.
            "job_modules": [m.name for m in self.job_modules],
            "job_paths": job_paths,
            "protected": protected_paths(),
            "disable_layers": list(disable_layers),
            # TOOLBENCH_SANDBOX_CGROUP: the zygote's environment is an allowlist its calls inherit
            "delegated_cgroup": _delegated_cgroup(),
        }
        if wrap is not None:
            argv = wrap + argv
            config["bubblewrap"] = True
        held = [self._lock_fd]
        if wrap is not None:
            # Inside bwrap the folder is a mount point, which the zygote cannot rmdir when it
            # abandons it (its harness SIGKILLed): it removes it through this fd of the host's
            # temp dir instead, so no empty folder waits a day for a sweep.
            try:
                parent_fd = os.open(os.path.dirname(self.tmpdir), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as exc:
                raise SandboxStartError(f"cannot open {os.path.dirname(self.tmpdir)}: {exc}") from exc
            held.append(parent_fd)
            config["parent_fd"] = parent_fd
            if "cgroup" not in disable_layers:
                # bwrap's root has no /sys and the zygote's pid there names nothing on the host:
                # this pool makes its memory cgroup and moves it in, and says so on this pipe.
                cgroup_r, self._cgroup_w = os.pipe()
                held.append(cgroup_r)
                config["cgroup_fd"] = cgroup_r
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        config.update(fd_in=req_r, fd_out=rep_w, lock_fd=self._lock_fd)
        try:
            with open(self._stderr_path, "wb") as stderr, self._kill_lock:
                if self._tail is not None:
                    raise SandboxStartError("sandbox closed while a worker was starting")
                self.proc = subprocess.Popen(
                    [*argv, json.dumps(config)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                    cwd=self.tmpdir,
                    env=env,
                    pass_fds=(req_r, rep_w, *held),
                    start_new_session=True,  # own process group: a timeout kills all of it
                )
        except OSError as exc:
            raise SandboxStartError(f"cannot start sandbox worker: {exc}") from exc
        finally:  # the worker's ends of the pipes: it holds its own copies (or never started)
            os.close(req_r)
            os.close(rep_w)
            if "parent_fd" in config:
                os.close(config["parent_fd"])
            if "cgroup_fd" in config:
                os.close(config["cgroup_fd"])
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        try:
            hello = protocol.recv(self._rep_r, deadline)
            if hello.get("type") == "cgroup" and self._cgroup_w >= 0:
                self._place_in_cgroup(hello, limits)
                hello = protocol.recv(self._rep_r, deadline)
        except (TimeoutError, EOFError, protocol.ProtocolError) as exc:
            tail = self.kill()
            if tail:
                log.warning("sandbox worker failed to start; its stderr ends:\n%s", tail)
            last = next((line for line in reversed(tail.splitlines()) if line.strip()), "no output")
            raise SandboxStartError(
                f"sandbox worker failed to start ({type(exc).__name__}): {last.strip()}") from exc
        if hello.get("type") == "refused":
            raise SandboxStartError(f"sandbox: {hello.get('detail')}")
        if hello.get("type") != "ready":
            if hello.get("traceback"):
                log.warning("sandbox worker failed to start:\n%s", hello["traceback"])
            raise SandboxStartError(
                f"sandbox worker failed to start: {hello.get('detail', hello)} (its traceback is in the "
                "log; a machine without the sandbox's kernel layers can run tools with "
                "--sandbox-insecure)")
        return hello

    def _place_in_cgroup(self, ask: dict[str, Any], limits: SandboxLimits) -> None:
        """The zygote under bwrap asks for its memory cgroup and waits: make it on the host's
        side, named after the zygote's host pid, move the zygote in (its calls, forked later,
        are born there) and answer on its cgroup pipe, with the cgroup or why none."""
        from pytest_toolbench.sandbox import cgroup  # here: the harness's start-up never needs it

        with self._kill_lock:  # kill() closes it too, from another thread (a close() mid-start)
            fd, self._cgroup_w = self._cgroup_w, -1
        if fd < 0:
            return
        try:
            zygote = host_pid(self.proc.pid, int(ask["pid"]))
            if zygote == self.proc.pid:
                answer: dict[str, Any] = {"note": "the pool did not find the zygote's host pid"}
            else:
                limit = cgroup.allowance_bytes(limits.memory_mb, limits.disk_mb) + int(ask.get("resident", 0))
                group, note = cgroup.place(zygote, limit)
                if group is None:
                    answer = {"note": note}
                else:
                    with self._kill_lock:
                        killed = self._tail is not None
                        if not killed:
                            self._cgroup = (group.path, zygote)
                    if killed:  # the pool closed meanwhile: nobody else knows this one
                        cgroup.remove_killed(group.path, zygote)
                    answer = {"path": group.path, "version": group.version, "note": note}
        except (KeyError, TypeError, ValueError) as exc:
            answer = {"note": f"the zygote's request was malformed ({exc})"}
        try:
            protocol.write_all(fd, json.dumps(answer).encode())
        except OSError:
            pass  # the zygote is gone: the next recv says so
        finally:
            os.close(fd)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, job: str, payload: dict, timeout_s: float) -> tuple[SandboxOutcome, bool]:
        """Returns the outcome and whether this zygote may be reused. The zygote forks a child
        per call and enforces ``timeout_s`` itself; the pool only guards against a hung zygote.
        The child's reply crosses the zygote unread: it is parsed, checked against the job's
        reply shape and capped here, in the harness, so nothing a tool writes on its pipe can
        pass the cap, break the caller or kill the zygote."""
        request_id = next(self._ids)
        start = time.monotonic()
        body = protocol.json_bytes(payload)
        try:
            protocol.send_split(self._req_w, {"id": request_id, "job": job, "timeout_s": timeout_s}, body)
            del body
            header, reply = protocol.recv_split(self._rep_r, start + timeout_s + _ZYGOTE_GRACE_S, self.reply_limit)
        except TimeoutError:
            # The zygote enforces the call's own limit; past it and the grace, the zygote
            # itself is stopped (SIGSTOP from outside) or hung: not the tool's doing.
            self.kill()
            return SandboxOutcome(
                status="unavailable",
                detail=(f"the sandbox worker gave no answer {timeout_s + _ZYGOTE_GRACE_S:g} s after "
                        "the call began (stopped or hung); killed and replaced"),
                duration_s=time.monotonic() - start,
            ), False
        except (OSError, EOFError, ValueError, protocol.ProtocolError) as exc:
            # A dead zygote: BrokenPipe on send, EOF on receive. Reap it to learn why; its
            # stderr goes to the log, never into the detail a model is shown.
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            # The zygote never runs tool code and no call can reach it: its death is the
            # harness's problem (killed from outside, out of memory), not the tool's.
            detail = f"sandbox worker died: {protocol.exit_text(self.proc.returncode)}"
            if isinstance(exc, protocol.ProtocolError):
                detail = f"sandbox worker sent a malformed reply: {exc}"
            tail = self.kill()
            if tail:
                log.warning("sandbox worker %s: %s; its stderr ends:\n%s", self.pid, detail, tail)
            return SandboxOutcome(status="unavailable", detail=detail, duration_s=time.monotonic() - start), False
        duration = time.monotonic() - start
        if header.get("id") != request_id or header.get("status") not in ("ok", "timeout", "crashed"):
            self.kill()
            return SandboxOutcome(status="unavailable", detail="sandbox reply out of sequence", duration_s=duration), False
        worker_ms = header.get("worker_ms")
        status, value, detail = header["status"], None, str(header.get("detail") or "")
        if status == "ok":
            status, value, detail = check_reply(job, reply, self.output_cap)
        return SandboxOutcome(
            status=status, value=value, detail=detail, duration_s=duration,
            worker_s=worker_ms / 1e3 if isinstance(worker_ms, (int, float)) else None,
        ), True

    def kill(self) -> str:
        """Kill the whole process group, reap it, remove the temp dir; returns the stderr tail.

        Idempotent and safe to race (close() from one thread, a timed-out call in another): the fds
        must be closed exactly once, or a number reused by another worker's pipe gets closed.
        """
        with self._kill_lock:
            if self._tail is None:
                self._tail = self._kill_once()
            return self._tail

    def _kill_once(self) -> str:
        # Only while unreaped: after a reap the group id could belong to someone else.
        if hasattr(self, "proc") and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
                log.warning("sandbox worker %s did not die", self.proc.pid)
            # Killed, the zygote cannot remove its memory cgroup: an empty one left under the
            # harness's own cgroup until some later pool's sweep (never, if the harness's cgroup
            # is a CI job's) is litter that can block its parent's removal.
            path = getattr(self, "info", {}).get("memory_cap", {}).get("path")
            if path and self._cgroup is None and self.proc.returncode is not None:
                from pytest_toolbench.sandbox import cgroup  # here: the harness's start-up never needs it

                cgroup.remove_killed(path, self.proc.pid)
        # One this pool made (under bwrap), the zygote can never remove: whoever ended it (this
        # kill, or its own death, reaped by a call), bwrap has exited, so its namespace is gone.
        if self._cgroup is not None and hasattr(self, "proc") and self.proc.returncode is not None:
            from pytest_toolbench.sandbox import cgroup

            cgroup.remove_killed(*self._cgroup)
            self._cgroup = None
        if self._cgroup_w >= 0:  # a start cut short before the zygote asked
            os.close(self._cgroup_w)
            self._cgroup_w = -1
        tail = ""
        try:
            with open(self._stderr_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self._stderr_path) - 2000))
                tail = f.read().decode("utf-8", "replace").strip()
        except OSError:
            pass
        for fd in (self._req_w, self._rep_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._req_w = self._rep_r = -1
        # remove_tree: no tool's tree (mode 000 folders, deep nesting) defeats it
        fd, self._lock_fd = self._lock_fd, -1
        problem = owned_folders.release_folder(self.tmpdir, fd, cleanup.remove_tree)
        if problem:
            log.warning("sandbox: could not remove %s: %s", self.tmpdir, problem)
        return tail


class ToolSandbox:
    """Thread-safe facade: ``run(job, payload, timeout_s)`` on a warm, confined worker; a
    :class:`~pytest_toolbench.sandbox.interface.SandboxRunner`.

    ``job`` names trusted code: the harness's (``pytest_toolbench.<module>:<function>``) or a
    function of one of ``job_modules`` (the modules the run's benchmarks declare); untrusted
    input travels inside ``payload`` and is handled by that function in the worker.
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        network_isolation: bool = True,
        preload: Sequence[str] = (),
        disable_layers: Sequence[str] = (),
        use_bubblewrap: bool = True,
        job_modules: Sequence[str] = (),
    ) -> None:
        """``disable_layers`` (tests only): kernel layers to treat as unavailable, to check
        that the pool refuses to run tools without them unless ``limits.insecure``.
        ``job_modules``: modules outside this package (a benchmark's ``sandbox_modules``) whose
        functions may run as jobs; each is imported by every zygote before its first call
        (a module that will not import stops the start) and its folder is readable to calls."""
        self.limits = limits or SandboxLimits()
        # The outcome's validator is built here, on the owner's thread: its first instances are
        # made on asyncio's executor threads, several calls at once, and pydantic before 2.14's
        # rebuild lock builds a deferred model unsafely there (8 threads at once: 2.11.4 failed
        # every trial, using the parent's validator; 2.12.0 1-4 trials in 200).
        SandboxOutcome.model_rebuild()
        unknown = set(disable_layers) - set(LAYERS)
        if unknown:
            raise ValueError(f"unknown sandbox layers {sorted(unknown)}; known: {LAYERS}")
        self.disable_layers = tuple(disable_layers)
        self.use_bubblewrap = use_bubblewrap
        if self.limits.workers < 1:
            raise ValueError("SandboxLimits.workers must be >= 1")
        self.network_isolation = network_isolation
        self.job_modules = tuple(JobModule.locate(name) for name in dict.fromkeys(job_modules))
        self.job_module_names = tuple(m.name for m in self.job_modules)
        self.preload = tuple(dict.fromkeys([*preload, *self.job_module_names]))
        for module in self.preload:
            if not module.startswith("pytest_toolbench.") and module not in self.job_module_names:
                raise ValueError(f"preload module must be under pytest_toolbench. or a declared "
                                 f"job module: {module!r}")
        # Idle slots: a started worker, or None (start lazily). LIFO keeps the hottest workers busy.
        self._slots: queue.LifoQueue[_Worker | None] = queue.LifoQueue()
        for _ in range(self.limits.workers):
            self._slots.put(None)
        self._live: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._info: dict[str, Any] | None = None
        self._warned = False
        _live_pools.add(self)
        sweep_stale_folders()

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> ToolSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill every worker (busy and starting ones too: their callers get "crashed" or an
        error at once) and wake every caller waiting for a slot (``RuntimeError``); idempotent.
        Safe from a signal handler's thread: whatever the tools are doing, no thread of the
        caller stays blocked in the sandbox, so an interrupted run can exit."""
        with self._lock:
            self._closed = True
            workers = list(self._live)
            self._live.clear()
        self._slots.put(_CLOSED)
        for worker in workers:
            worker.kill()

    def worker_pids(self) -> list[int]:
        with self._lock:
            return sorted(w.pid for w in self._live if hasattr(w, "info"))  # started ones

    def _register(self, worker: _Worker) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("ToolSandbox is closed")
            self._live.add(worker)

    def _start_worker(self, args: tuple[Any, ...], use_bubblewrap: bool) -> _Worker:
        """A started worker; one that failed to start (bwrap refused where the machine allows no
        user namespace, before the pool falls back) is killed by its own start and forgotten
        here, so the pool keeps no dead worker among its live ones."""
        registered: list[_Worker] = []

        def register(worker: _Worker) -> None:
            self._register(worker)
            registered.append(worker)

        try:
            return _Worker(*args, use_bubblewrap, register=register, job_modules=self.job_modules)
        except BaseException:
            with self._lock:
                self._live.difference_update(registered)
            raise

    def _spawn(self) -> _Worker:
        args = (self.limits, self.network_isolation, self.preload, self.disable_layers)
        try:
            worker = self._start_worker(args, self.use_bubblewrap)
        except SandboxStartError as exc:
            if not self.use_bubblewrap or shutil.which("bwrap") is None or "refusing" in str(exc):
                raise
            log.warning("sandbox: bubblewrap failed (%s); continuing with the in-process layers", exc)
            self.use_bubblewrap = False
            worker = self._start_worker(args, False)
        with self._lock:
            if self._closed:
                worker.kill()
                raise RuntimeError("ToolSandbox is closed")
            if self._info is None:
                self._info = worker.info
        if not self._warned and worker.info.get("insecure"):
            self._warned = True
            log.warning(
                "sandbox: RUNNING INSECURE (--sandbox-insecure): %s not in force; untrusted tool code "
                "is contained by the audit hook only",
                ", ".join(worker.info.get("missing_layers", [])),
            )
        return worker

    def _retire(self, worker: _Worker) -> None:
        with self._lock:
            self._live.discard(worker)

    # ---------------------------------------------------------------------- calls
    def run(self, job: str, payload: dict, timeout_s: float) -> SandboxOutcome:
        """Run ``job(payload)`` in a worker; blocks while all workers are busy."""
        check_job(job, self.job_module_names)
        if self._closed:
            raise RuntimeError("ToolSandbox is closed")
        worker = self._slots.get()
        if worker is _CLOSED or self._closed:
            self._slots.put(worker)  # wakes the next waiter too
            raise RuntimeError("ToolSandbox is closed")
        keep = False
        try:
            if worker is None or not worker.alive:
                if worker is not None:
                    self._retire(worker)
                    worker.kill()
                worker = None
                try:
                    worker = self._spawn()
                except SandboxStartError as exc:
                    if self._info is None:  # the first start: the run stops, one line
                        raise
                    return SandboxOutcome(status="unavailable", detail=f"a new sandbox worker would not start: {exc}")
            outcome, keep = worker.call(job, payload, timeout_s)
            if self._closed:
                keep = False
            outcome.detail = protocol.cap_text(outcome.detail, self.limits.output_cap)
            return outcome
        finally:
            # Whatever went wrong above (a harness bug included), the slot goes back: the worker
            # if it is sound, else None so that the next caller starts a fresh one.
            try:
                if worker is not None and not keep:
                    self._retire(worker)
                    worker.kill()
            finally:
                self._slots.put(worker if keep else None)

    async def arun(self, job: str, payload: dict, timeout_s: float) -> SandboxOutcome:
        from pytest_toolbench.models.call_log import current_call_log

        started = time.perf_counter()
        # The reply check's module is imported here, on the caller's thread (pytest's), not in
        # the executor while pytest works: its import makes loggers (tqdm, requests), and
        # pytest walks the logger registry (runtime/logger_registry.py). Only a job that may
        # run: an undeclared one is refused before any module it names is imported.
        check_job(job, self.job_module_names)
        _reply_checker(job)
        outcome = await asyncio.to_thread(self.run, job, payload, timeout_s)
        log = current_call_log()
        if log is not None:  # the call on its worker, and the whole wait (queue for a slot too)
            log.sandbox_ms.append(outcome.duration_s * 1e3)
            log.sandbox_wait_ms.append((time.perf_counter() - started) * 1e3)
            if outcome.worker_s is not None:
                log.sandbox_worker_ms.append(outcome.worker_s * 1e3)
        return outcome

    def describe(self) -> dict[str, Any]:
        """Limits and the isolation layers actually in force (starts one worker if none ran yet)."""
        if self._info is None and not self._closed:
            self.run("pytest_toolbench.sandbox.jobs:ping", {}, _STARTUP_TIMEOUT_S)
        info = dict(self._info or {})
        return {
            "limits": self.limits.model_dump(),
            "insecure": bool(info.get("insecure")),
            "kernel_isolation": bool(info.get("kernel_isolation")),
            "network_isolation_requested": self.network_isolation,
            "isolation": info,
            "python": sys.version.split()[0],
            "executable": sys.executable,
            "start": "zygote per slot (python -m pytest_toolbench.sandbox.worker), one fork per call",
            "ipc": ("length-prefixed JSON over dedicated pipe fds; the zygote forwards payload and "
                    "reply as opaque bytes; the reply is parsed, checked and capped in the harness; "
                    "worker stdout/stderr discarded"),
        }

    def isolation_state(self) -> dict[str, Any]:
        """The isolation actually in force, compact and JSON-able, for the run's report."""
        return isolation_state(self.describe())


def sweep_stale_folders() -> list[str]:
    """Remove the sandbox folders that earlier harness processes left in the temp dir and that
    nobody owns any more (harness and zygote both killed); a live pool's folder, in this
    process or another run's, holds its lock and is never touched. Never raises."""
    removed = owned_folders.sweep_stale(tempfile.gettempdir(), FOLDER_PREFIX, cleanup.remove_tree)
    if removed:
        log.info("sandbox: removed %d stale folder(s) of earlier runs: %s", len(removed), ", ".join(removed))
    return removed


def close_all() -> None:
    """Close every open ToolSandbox of this process (for a SIGTERM/SIGINT handler: no thread
    then stays blocked waiting for a sandbox slot or a tool's reply)."""
    for pool in list(_live_pools):
        pool.close()
