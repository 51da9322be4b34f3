"""Turn run settings into the model under test, wrapped in the cache when it is on."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import ChatModel
from pytest_toolbench.models.cache import CachedModel, served_marker
from pytest_toolbench.models.open_protocol import (
    OpenProtocolModel,
    OpenProtocols,
    plan_open_protocol,
)
from pytest_toolbench.models.oracle import OracleModel
from pytest_toolbench.models.replay import ReplayModel

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


class ModelConfigError(ValueError):
    """The settings cannot produce a working model (missing key, missing URL...)."""


def is_local_url(url: str | None) -> bool:
    if not url:
        return False
    host = (urlparse(url).hostname or "").lower()
    return host in _LOCAL_HOSTS or host.endswith(".localhost")


def build_model(
    settings: RunSettings,
    *,
    base_url: str | None = None,
    served_model: str | None = None,
    cache_key_extra: dict[str, Any] | None = None,
    abort_check: Callable[[], str | None] | None = None,
    sdk_address: dict[str, Any] | None = None,
    processes: int = 1,
    server_pid: int | None = None,
    server_rendezvous: str | Path | None = None,
    server_wait_s: float = 900.0,
    open_protocols: OpenProtocols | None = None,
) -> ChatModel:
    """``base_url``/``served_model``/``cache_key_extra`` come from a managed vLLM server.
    ``sdk_address`` (the run's shared SDK process, models/sdk_process) sends the endpoint's calls
    there; ``processes`` is how many pytest processes share it. ``server_rendezvous``: the managed
    server is not started yet; the first call that misses the cache asks for it there and waits
    up to ``server_wait_s`` (models/lazy_server.py). ``open_protocols``: what the run's
    benchmarks declared for ``--decoding open`` (benchmarks/base.py ``run_open_protocols``); None:
    every call ``parsed``, with no parser (the server's)."""
    backend = settings.resolved_backend
    # Upstream's open protocol: raw text through the chat template; which parser reads it is each
    # benchmark's declared choice, handed down in open_protocols (open_protocol.py).
    protocols = open_protocols or OpenProtocols()
    plan = (
        plan_open_protocol(served_model or settings.model, backend, cache_key_extra,
                           protocols.parser)
        if settings.open_protocol else None
    )
    extra_body = plan.extra_body if plan else None
    if backend == "oracle":
        return OracleModel()
    if backend == "replay":
        return ReplayModel(settings.model[len("replay:"):])
    # The openai SDK is slow to import: only runs that send a request pay for it (oracle, replay,
    # --collect-only, --help and a re-run answered from the cache do not).
    from pytest_toolbench.models.openai_backend import OpenAIBackend

    if backend == "openai":
        url = base_url or settings.base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = settings.api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if not is_local_url(url):
                raise ModelConfigError(
                    f"model {settings.model!r} at {url or 'https://api.openai.com/v1'} needs an "
                    "API key: set OPENAI_API_KEY or pass --api-key (local endpoints need none)"
                )
            key = "EMPTY"
        model: ChatModel = OpenAIBackend(
            settings.model, url, key, settings.request_timeout_s, settings.max_retries,
            settings.concurrency, retry_after_max_s=settings.retry_after_max_s,
            unreachable_after_s=settings.unreachable_after_s,
            upstream_lost_turns=settings.upstream_lost_turns, extra_body=extra_body,
            base_urls=list(settings.base_urls)
            if len(settings.base_urls) > 1 and (url is None or url in settings.base_urls) else None,
            http_transport=settings.http_transport,
        )
        include_base_url = True
    elif backend == "vllm":
        if not base_url and server_rendezvous is None:
            raise ModelConfigError(
                "the vllm backend needs the base URL of the managed server (internal error: "
                "build_model was called before the server was prepared)"
            )
        user_urls = {settings.base_url, *settings.base_urls} - {None}
        # The harness's own server: a fresh port each run (never in the cache key), and nobody
        # else's load behind a timeout, so a timed-out request is not resent.
        managed = server_rendezvous is not None or (base_url is not None and base_url not in user_urls)

        def vllm_backend(url: str | None, check: Callable[[], str | None] | None) -> ChatModel:
            return OpenAIBackend(
                served_model or settings.model, url, settings.api_key or "EMPTY",
                settings.request_timeout_s, settings.max_retries, settings.concurrency,
                name=settings.model, backend_label="vllm", abort_check=check,
                retry_after_max_s=settings.retry_after_max_s,
                unreachable_after_s=settings.unreachable_after_s,
                upstream_lost_turns=settings.upstream_lost_turns, extra_body=extra_body,
                # --backend vllm with --base-url repeated: a fleet of running vLLM replicas.
                base_urls=list(settings.base_urls) if len(settings.base_urls) > 1 and url in settings.base_urls else None,
                http_transport=settings.http_transport, retry_timeouts=not managed,
                max_tokens=settings.max_tokens,
            )

        include_base_url = not managed
        if server_rendezvous is not None and not base_url:
            from pytest_toolbench.models.lazy_server import LazyServerModel
            from pytest_toolbench.models.liveness import dead_server_check

            def connect(answer: dict[str, Any]) -> ChatModel:
                pid = answer.get("pid")
                return _in_sdk_process(
                    vllm_backend(answer["base_url"], dead_server_check({"pid": pid})),
                    sdk_address, processes, pid)

            model = LazyServerModel(vllm_backend(None, None), connect, Path(server_rendezvous),
                                    server_wait_s)
        else:
            model = _in_sdk_process(vllm_backend(base_url, abort_check), sdk_address, processes,
                                    server_pid)
        sdk_address = None  # wrapped above (after the start, for a lazily started server)
    else:  # pragma: no cover - resolved_backend is a Literal
        raise ModelConfigError(f"unknown backend {backend!r}")
    model = _in_sdk_process(model, sdk_address, processes, server_pid)
    if settings.use_cache:
        key_extra = {**(cache_key_extra or {}), **({"open_protocol": plan.describe()} if plan else {})}
        model = CachedModel(
            model, settings.cache_dir, key_extra or None, include_base_url=include_base_url,
            cache_only=settings.cache_only,
            marker=served_marker(settings.cache_dir, settings.model, cache_key_extra or {})
            if backend == "vllm" else None,
        )
    if plan is not None:  # outside the cache: the cache keeps raw replies
        model = OpenProtocolModel(model, plan, protocols)
    return model


def _in_sdk_process(model: ChatModel, sdk_address: dict[str, Any] | None, processes: int,
                    server_pid: int | None) -> ChatModel:
    """The same backend, run in the shared SDK process when there is one (models/sdk_process)."""
    if sdk_address is None:
        return model
    from pytest_toolbench.models.sdk_process.client import RemoteBackend

    return RemoteBackend(model, sdk_address, processes=processes, server_pid=server_pid)  # type: ignore[arg-type]
