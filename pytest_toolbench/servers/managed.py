"""The run's one model server: prepared by the controller, started lazily, shared by every worker.

The controller prepares vLLM in ``pytest_sessionstart`` (before xdist starts its workers): the
model is resolved (the embedded one converted once per machine) and the server's identity, which
keys the response cache, is computed without starting it. Workers get that identity, the
rendezvous folder and, once started, the URL and pid as a
:class:`~pytest_toolbench.models.spec.ServerInfo` (JSON in ``workerinput``).
The server itself starts on the first cache miss of any process (models/lazy_server.py), so a
fully cached re-run and ``--cache-only`` never start it. The pid lets a server that
dies mid-run turn the remaining cases into errors at once instead of into minutes of retries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.spec import ServerInfo
from pytest_toolbench.servers.owner import ServerOwner


class ManagedServer:
    """The run's vLLM server (controller side): prepared, started by its owner, stopped."""

    def __init__(self, server: Any, served_model: str, owner: ServerOwner | None = None):
        self.server = server
        self.served_model = served_model
        self.owner = owner
        self.describe = server.describe()  # no process needed: command, template hash, version

    @classmethod
    def prepare(cls, settings: RunSettings, log_dir: Path, progress: Any = None) -> "ManagedServer":
        """Resolve the model and build the server, not started; its owner thread starts it on
        the first request in ``log_dir`` (the run folder)."""
        from pytest_toolbench.servers.embedded import resolve_model
        from pytest_toolbench.servers.vllm_server import VLLMServer, VLLMStartupError

        phase = (lambda label: progress.phase(label, key="model conversion")) if progress else None
        try:
            resolved = resolve_model(settings.model, progress=phase)
            server = VLLMServer(
                str(resolved.path),
                served_model_name=resolved.served_name,
                # The model's own required flags first, so the user's --vllm-arg flags win.
                extra_args=[*resolved.server_args, *settings.vllm.extra_args],
                tool_call_parser=settings.vllm.tool_call_parser,
                chat_template=settings.vllm.chat_template,
                # --decoding open: the checkpoint's own template, as upstream's apply_chat_template
                open_protocol=settings.open_protocol,
                startup_timeout_s=settings.vllm.startup_timeout_s,
                log_path=log_dir / "vllm.log",
                python=settings.vllm.python,
                thread_outlives_server=True,  # started by the owner thread, which waits for stop
                cpu_env=dict(resolved.cpu_env),
            )
            managed = cls(server, resolved.served_name)
        except (VLLMStartupError, RuntimeError, FileNotFoundError, ImportError) as exc:
            raise pytest.UsageError(f"pytest-toolbench: could not prepare vLLM: {exc}") from exc
        managed.owner = ServerOwner(server, log_dir, progress=progress,
                                    label=f"starting vLLM for {resolved.served_name}")
        managed.owner.watch()
        if first_call_will_miss(settings, managed.describe):
            managed.owner.ask()  # its start overlaps pytest's own (collection, workers, sandbox)
        return managed

    @classmethod
    def start(cls, settings: RunSettings, log_dir: Path, progress: Any = None) -> "ManagedServer":
        """Prepare and start now (blocking): for callers that need the URL up front."""
        managed = cls.prepare(settings, log_dir, progress)
        try:
            managed.owner.start_now()  # type: ignore[union-attr]
        except RuntimeError as exc:
            managed.stop()
            raise pytest.UsageError(f"pytest-toolbench: could not start vLLM: {exc}") from exc
        return managed

    @property
    def started(self) -> bool:
        return self.owner.started if self.owner is not None else self.server.is_alive()

    def info(self) -> ServerInfo:
        """What its clients (every pytest process) and the run record know of it, as of now."""
        started = self.started
        owner = self.owner.info() if self.owner is not None else {"started": started}
        return ServerInfo(
            base_url=self.server.base_url if started else None,
            served_model=self.served_model,
            pid=self.server.pid if started else None,
            identity=self.describe,
            rendezvous=str(self.owner.rendezvous) if self.owner is not None else None,
            startup_timeout_s=self.server.startup_timeout_s,
            **owner,
        )

    def stop(self) -> None:
        if self.owner is not None:
            self.owner.stop()
        else:
            self.server.stop()


def first_call_will_miss(settings: RunSettings, identity: dict[str, Any]) -> bool:
    """True when the server is certainly needed: the cache is off, or it holds no reply of this
    model served this way (models/cache.served_marker). Never with --cache-only."""
    from pytest_toolbench.models.cache import served_marker

    if settings.cache_only:
        return False
    return not settings.use_cache or not served_marker(settings.cache_dir, settings.model, identity).exists()


def server_info(server: ManagedServer | None) -> ServerInfo | None:
    return server.info() if server is not None else None


def server_info_for_worker(server: ManagedServer | None) -> dict[str, Any] | None:
    """The server's facts as JSON: what an xdist worker is told."""
    info = server_info(server)
    return info.record() if info is not None else None


def server_record(server: ManagedServer | None) -> dict[str, Any] | None:
    """The record's ``run.server``: the server's facts, secrets masked (``ServerInfo.reported``)."""
    info = server_info(server)
    return info.reported() if info is not None else None
