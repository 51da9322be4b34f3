"""The bundled providers (providers.py): registered the way an outside package registers its own.

``openai`` and ``vllm`` build an :class:`~pytest_toolbench.models.openai_backend.OpenAIBackend`
from the run's :class:`~pytest_toolbench.models.spec.BackendSpec`; ``oracle`` and ``replay``
answer locally (the benchmark's reference policy, recorded replies) and stay out of the cache.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from pytest_toolbench.models.base import ChatModel
from pytest_toolbench.models.oracle import OracleModel
from pytest_toolbench.models.providers import ModelConfigError, ProviderContext, register_provider
from pytest_toolbench.models.replay import ReplayModel

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


def is_local_url(url: str | None) -> bool:
    if not url:
        return False
    host = (urlparse(url).hostname or "").lower()
    return host in _LOCAL_HOSTS or host.endswith(".localhost")


def openai_model(ctx: ProviderContext) -> ChatModel:
    """Any OpenAI-compatible endpoint; a remote one needs a key (a local one is sent ``EMPTY``)."""
    spec = ctx.spec
    if spec.api_key is None and not is_local_url(spec.base_url):
        raise ModelConfigError(
            f"model {ctx.settings.model!r} at {spec.base_url or 'https://api.openai.com/v1'} needs "
            "an API key: set OPENAI_API_KEY or pass --api-key (local endpoints need none)"
        )
    # The openai SDK is slow to import: only runs that send a request pay for it (oracle, replay,
    # --collect-only, --help and a re-run answered from the cache do not).
    from pytest_toolbench.models.openai_backend import OpenAIBackend

    return ctx.placed(OpenAIBackend(spec))


def vllm_model(ctx: ProviderContext) -> ChatModel:
    """The managed vLLM server (started on the first cache miss when not yet started), or the
    user's running one (``--base-url``)."""
    from pytest_toolbench.models.liveness import dead_server_check
    from pytest_toolbench.models.openai_backend import OpenAIBackend

    spec, server = ctx.spec, ctx.server
    if spec.base_url is not None:
        pid = server.pid if server is not None else None
        return ctx.placed(OpenAIBackend(spec, abort_check=dead_server_check(pid)), pid)
    if server is None or server.rendezvous is None:
        raise ModelConfigError(
            "the vllm backend needs the base URL of the managed server (internal error: "
            "build_model was called before the server was prepared)"
        )
    from pytest_toolbench.models.lazy_server import LazyServerModel, ServerAnswer

    def connect(answer: ServerAnswer) -> ChatModel:
        started = spec.model_copy(update={"base_url": answer.base_url})
        return ctx.placed(OpenAIBackend(started, abort_check=dead_server_check(answer.pid)),
                          answer.pid)

    return LazyServerModel(OpenAIBackend(spec), connect, Path(server.rendezvous), server.wait_s)


def oracle_model(ctx: ProviderContext) -> ChatModel:
    return OracleModel()


def replay_model(ctx: ProviderContext) -> ChatModel:
    return ReplayModel(ctx.settings.model[len("replay:"):])


register_provider("openai", openai_model)
register_provider("vllm", vllm_model)
register_provider("oracle", oracle_model, cached=False)
register_provider("replay", replay_model, cached=False)
