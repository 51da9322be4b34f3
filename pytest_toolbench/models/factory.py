"""Turn run settings into the model under test: the provider's model (providers.py), in the
shared SDK process, behind the response cache and the open protocol."""

from __future__ import annotations

from typing import Any

from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import ChatModel
from pytest_toolbench.models.cache import CachedModel, served_marker
from pytest_toolbench.models.open_protocol import (
    OpenProtocolModel,
    OpenProtocols,
    plan_open_protocol,
)
from pytest_toolbench.models.providers import ModelConfigError, ProviderContext, find_provider
from pytest_toolbench.models.sdk_process.protocol import SdkLink
from pytest_toolbench.models.spec import ServerInfo, backend_spec

__all__ = ["ModelConfigError", "build_model"]


def build_model(settings: RunSettings, *, server: ServerInfo | None = None,
                sdk: SdkLink | None = None, open_protocols: OpenProtocols | None = None) -> ChatModel:
    """``server``: the managed vLLM server's facts (not started yet: the first call that misses
    the cache asks for it, models/lazy_server.py). ``sdk``: the run's shared SDK process, where
    an endpoint's calls go (models/sdk_process). ``open_protocols``: what the run's benchmarks
    declared for ``--decoding open`` (benchmarks/base.py ``run_open_protocols``); None: every
    call ``parsed``, with no parser (the server's)."""
    backend = settings.resolved_backend
    provider = find_provider(backend)
    served_model = server.served_model if server is not None else None
    cache_key_extra: dict[str, Any] | None = server.identity if server is not None else None
    # Upstream's open protocol: raw text through the chat template; which parser reads it is each
    # benchmark's declared choice, handed down in open_protocols (open_protocol.py).
    protocols = open_protocols or OpenProtocols()
    plan = (
        plan_open_protocol(served_model or settings.model, backend, cache_key_extra,
                           protocols.parser)
        if settings.open_protocol else None
    )
    spec = backend_spec(settings, server, extra_body=plan.extra_body if plan else None)
    model = provider.factory(ProviderContext(settings, spec, server, sdk))
    if not provider.cached:
        return model
    if settings.use_cache:
        key_extra = {**(cache_key_extra or {}), **({"open_protocol": plan.describe()} if plan else {})}
        model = CachedModel(
            model, settings.cache_dir, key_extra or None, include_base_url=not spec.managed,
            cache_only=settings.cache_only,
            # the managed server starts early while this marker is missing (servers/managed.py)
            marker=served_marker(settings.cache_dir, settings.model, cache_key_extra or {})
            if server is not None else None,
        )
    if plan is not None:  # outside the cache: the cache keeps raw replies
        model = OpenProtocolModel(model, plan, protocols)
    return model
