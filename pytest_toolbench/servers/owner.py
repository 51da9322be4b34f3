"""The owner of the run's managed vLLM server: starts it on the first request, stops it at the end.

The controller (the xdist controller, or the only process with ``-n 0``) owns the
:class:`~pytest_toolbench.servers.vllm_server.VLLMServer` through a :class:`ServerOwner`, whose
thread waits for the request file a client writes on its first cache miss
(models/lazy_server.py says why the start is lazy) and answers in the same folder. The owner
thread forks the server and lives until it is stopped, so the server's parent-death signal still
fires if pytest dies.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from pytest_toolbench.fileio import atomic_write_bytes
from pytest_toolbench.models.lazy_server import FAILED_FILE, POLL_S, READY_FILE, REQUEST_FILE, ServerAnswer


class ServerOwner:
    """Controller side: starts ``server`` on the first request, stops it at the end."""

    def __init__(self, server: Any, rendezvous: Path, *, progress: Any = None, label: str = "") -> None:
        self.server = server
        self.rendezvous = Path(rendezvous)
        self.progress = progress  # runtime/startup_progress.StartupProgress, or None
        self.label = label or f"starting vLLM for {getattr(server, 'served_model_name', 'the model')}"
        self.startup_s: float | None = None
        self.error: str | None = None
        self._asked = threading.Event()
        self._stop = threading.Event()
        self._ready = threading.Event()  # set when started or failed
        self._thread: threading.Thread | None = None

    # -- controller API ------------------------------------------------------------------------
    def watch(self) -> None:
        """Start the owner thread (it does nothing until the server is asked for)."""
        self.rendezvous.mkdir(parents=True, exist_ok=True)
        for name in (REQUEST_FILE, READY_FILE, FAILED_FILE):  # a reused folder must not answer
            (self.rendezvous / name).unlink(missing_ok=True)
        self._thread = threading.Thread(target=self._run, name="toolbench-vllm-owner", daemon=True)
        self._thread.start()

    def ask(self) -> None:
        """Start the server now, in the background (a miss is certain: servers/managed.py)."""
        self._asked.set()

    def start_now(self, timeout_s: float | None = None) -> str:
        """Ask for the server and wait (the eager path); raises RuntimeError if it failed."""
        if self._thread is None:
            self.watch()
        self._asked.set()
        self._ready.wait(timeout_s)
        if self.error is not None or not self.started:
            raise RuntimeError(self.error or "vLLM did not start in time")
        return self.server.base_url

    @property
    def started(self) -> bool:
        return self.startup_s is not None and self.error is None

    def stop(self) -> None:
        """Stop the server (idempotent); a start still in progress is cut short."""
        self._stop.set()
        self.server.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    # -- the owner thread ----------------------------------------------------------------------
    def _run(self) -> None:
        request = self.rendezvous / REQUEST_FILE
        while not self._stop.is_set():
            if self._asked.is_set() or request.exists():
                break
            self._stop.wait(POLL_S)
        else:
            return  # the run ended without needing the server
        started = time.monotonic()
        try:
            phase = (self.progress.phase(self.label, key="vLLM start", cancelled=self._stop.is_set)
                     if self.progress else None)
            if phase is not None:
                with phase:
                    self.server.start()
            else:
                self.server.start()
        except BaseException as exc:  # noqa: BLE001 - reported to every waiting process
            self.error = f"{exc}" if not self._stop.is_set() else "the run ended during vLLM start"
            self._answer(FAILED_FILE, {"message": self.error})
            if self.progress is not None and not self._stop.is_set():
                self.progress.line(f"could not start vLLM: {self.error}")
            self._ready.set()
            return
        self.startup_s = time.monotonic() - started
        self._answer(READY_FILE, ServerAnswer(base_url=self.server.base_url, pid=self.server.pid,
                                              startup_s=round(self.startup_s, 1)).model_dump())
        self._ready.set()
        self._stop.wait()  # this thread forked the server: it must outlive it (PDEATHSIG)
        self.server.stop()

    def _answer(self, name: str, payload: dict[str, Any]) -> None:
        atomic_write_bytes(self.rendezvous / name, json.dumps(payload).encode(), durable=False)

    def info(self) -> dict[str, Any]:
        """What the run report says about the server: started or not, and how long it took."""
        return {"started": self.started, "startup_s": round(self.startup_s, 1) if self.startup_s else None,
                "error": self.error}
