"""The run's one model server: started by the controller, shared by every xdist worker.

The controller starts vLLM in ``pytest_sessionstart`` (before xdist starts its workers) and hands
its URL to workers through ``workerinput`` (anchors §3.2/§4). Workers also get the server's pid so
that a server that dies mid-run turns the remaining cases into errors at once instead of into
minutes of retries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_toolbench.config import RunSettings


class ManagedServer:
    def __init__(self, server: Any, served_model: str):
        self.server = server
        self.served_model = served_model

    @classmethod
    def start(cls, settings: RunSettings, log_dir: Path) -> "ManagedServer":
        from pytest_toolbench.models.embedded import resolve_model
        from pytest_toolbench.models.vllm_server import VLLMServer, VLLMStartupError

        try:
            resolved = resolve_model(settings.model, settings.cache_dir.parent)
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
            )
            server.start()
        except (VLLMStartupError, RuntimeError, FileNotFoundError, ImportError) as exc:
            raise pytest.UsageError(f"pytest-toolbench: could not start vLLM: {exc}") from exc
        return cls(server, resolved.served_name)

    def info(self) -> dict[str, Any]:
        return {
            "base_url": self.server.base_url,
            "served_model": self.served_model,
            "pid": self.server.pid,
            "describe": self.server.describe(),
        }

    def stop(self) -> None:
        self.server.stop()


def server_info_for_worker(server: ManagedServer | None) -> dict[str, Any] | None:
    return server.info() if server is not None else None
