"""What a backend is and what the managed server is, as typed values built once per process.

:class:`BackendSpec` is everything an OpenAI-compatible backend is made of (model, endpoints,
key, timeouts, retries, transport, body defaults). :func:`backend_spec` builds it once from the
run's settings and the managed server's facts; the same value builds the backend in the pytest
process and, sent over the socket, in the shared SDK process (models/sdk_process), so both sides
cannot drift apart. :class:`ServerInfo` is what a client knows of the run's managed vLLM server
(servers/managed.py makes it): where it answers, which process it is, and its identity, which
keys the response cache.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, SerializationInfo, field_serializer

from pytest_toolbench.models.reachability import DEFAULT_UNREACHABLE_AFTER_S
from pytest_toolbench.secret_args import MASK, is_secret_flag, redact_secret_args

if TYPE_CHECKING:
    # Only backend_spec (pytest process) reads settings; the shared SDK process imports this
    # module for BackendSpec, and building RunSettings' schema cost it 0.1-0.2 s of CPU at start.
    from pytest_toolbench.config import RunSettings

#: ``model_dump`` context that writes the API key itself (the SDK-process hello only); any
#: other dump masks it, so a spec written into a report or a log cannot leak it.
WIRE = {"reveal_secrets": True}


class BackendSpec(BaseModel):
    """One OpenAI-compatible backend (models/openai_backend.py), as JSON-able values."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Sent as the body's ``model`` (a managed vLLM server's served name).
    model: str
    #: How reports and cache keys call the model (default: ``model``).
    name: str | None = None
    #: ``describe()["backend"]``: which provider built it.
    label: str = "openai"
    base_url: str | None = None
    #: Several replicas of one model (least-loaded routing, endpoint_pool.py); used when > 1.
    base_urls: tuple[str, ...] = ()
    #: None: no key configured (the provider decides whether that is allowed).
    api_key: SecretStr | None = None
    timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(6, ge=0)
    concurrency: int = Field(8, ge=1)
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 60.0
    retry_after_max_s: float = 60.0
    unreachable_after_s: float | None = Field(DEFAULT_UNREACHABLE_AFTER_S, ge=0)
    upstream_lost_turns: bool = False
    #: The endpoint is the harness's own server: a fresh port each run (so its URL is kept out
    #: of cache keys, where the server's identity stands instead) and nobody else's load.
    managed: bool = False
    #: False for the harness's own server: a timed-out greedy request is not resent.
    retry_timeouts: bool = True
    http_transport: Literal["aiohttp", "httpx"] = "aiohttp"
    #: Server-specific body fields sent with every request (vLLM ``stop_token_ids``).
    extra_body: dict[str, Any] = Field(default_factory=dict)
    #: The run's generation cap, only quoted in a timeout's hint.
    max_tokens: int | None = None

    @field_serializer("api_key")
    def _mask_key(self, key: SecretStr | None, info: SerializationInfo) -> str | None:
        if key is None:
            return None
        context = info.context if isinstance(info.context, dict) else {}
        return key.get_secret_value() if context.get("reveal_secrets") else str(key)

    def key(self) -> str:
        """The key the SDK is given (``EMPTY`` where none is needed: a local endpoint)."""
        return self.api_key.get_secret_value() if self.api_key is not None else "EMPTY"

    def to_wire(self) -> dict[str, Any]:
        """The spec as JSON for the SDK process's hello, key included (it needs it)."""
        return self.model_dump(mode="json", context=WIRE)


class ServerInfo(BaseModel):
    """The run's managed vLLM server as its clients see it (xdist workers get it as JSON)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    #: None until started (the first cache miss starts it: models/lazy_server.py).
    base_url: str | None = None
    served_model: str
    pid: int | None = None
    #: ``VLLMServer.describe()``: everything about the server that changes answers (cache keys).
    identity: dict[str, Any] = Field(default_factory=dict, alias="describe")
    #: Where a process asks for the server and reads its URL (models/lazy_server.py).
    rendezvous: str | None = None
    startup_timeout_s: float | None = None
    started: bool = False
    startup_s: float | None = None
    error: str | None = None

    def record(self) -> dict[str, Any]:
        """The server's facts as JSON, whole: what an xdist worker is told (its cache keys are
        built from ``describe``, so nothing is masked here)."""
        return self.model_dump(mode="json", by_alias=True)

    def reported(self) -> dict[str, Any]:
        """The run record's ``run.server`` section (its keys as they have always been), with
        secrets masked: a secret among the server's arguments (``--vllm-arg=--hf-token=X``)
        and the value of a secret-named ``VLLM_*`` variable (``VLLM_API_KEY``)."""
        out = self.record()
        facts = out.get("describe") or {}
        if isinstance(facts.get("server_args"), list):
            facts["server_args"] = redact_secret_args(facts["server_args"])
        if isinstance(facts.get("vllm_env"), dict):
            facts["vllm_env"] = {k: MASK if is_secret_flag("--" + k.lower().replace("_", "-"))
                                 else v for k, v in facts["vllm_env"].items()}
        return out

    @property
    def family(self) -> str | None:
        return self.identity.get("family")

    @property
    def wait_s(self) -> float:
        """How long a call waits for the server's start (its own timeout, and a minute more)."""
        return float(self.startup_timeout_s or 600) + 60


def backend_spec(settings: RunSettings, server: ServerInfo | None = None, *,
                 extra_body: dict[str, Any] | None = None) -> BackendSpec:
    """The run's backend from its settings (and the managed server's facts), for any provider.

    OpenAI conventions (``$OPENAI_BASE_URL``, ``$OPENAI_API_KEY``) hold except for ``vllm``,
    whose endpoint is the managed server or the user's running one: it is addressed by its
    served name, takes no key from the environment, and the harness's own server gets no
    timed-out request resent (nobody else's load is behind a timeout there)."""
    provider = settings.resolved_backend
    common: dict[str, Any] = dict(
        name=settings.model, label=provider, timeout_s=settings.request_timeout_s,
        max_retries=settings.max_retries, concurrency=settings.concurrency,
        retry_after_max_s=settings.retry_after_max_s,
        unreachable_after_s=settings.unreachable_after_s,
        upstream_lost_turns=settings.upstream_lost_turns, http_transport=settings.http_transport,
        extra_body=dict(extra_body or {}),
    )
    replicas = tuple(settings.base_urls) if len(settings.base_urls) > 1 else ()
    if provider == "vllm":
        url = (server.base_url if server is not None else None) or settings.base_url
        # The harness's own server: a fresh port each run (never in the cache key).
        managed = server is not None and (
            url is None or url not in {settings.base_url, *settings.base_urls})
        return BackendSpec(
            model=(server.served_model if server is not None else None) or settings.model,
            base_url=url, api_key=settings.api_key or None,
            # --backend vllm with --base-url repeated: a fleet of running vLLM replicas.
            base_urls=replicas if url in replicas else (),
            managed=managed, retry_timeouts=not managed, max_tokens=settings.max_tokens, **common)
    url = settings.base_url or os.environ.get("OPENAI_BASE_URL") or None
    return BackendSpec(
        model=settings.model, base_url=url,
        api_key=settings.api_key or os.environ.get("OPENAI_API_KEY") or None,
        base_urls=replicas if url is None or url in replicas else (), **common)
