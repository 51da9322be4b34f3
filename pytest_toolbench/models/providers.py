"""Which code builds the model for ``--backend NAME``: a registry of providers, as inspect_ai's
model providers are (``inspect_ai/model/_registry.py``, found through a setuptools entry point).

A provider is a factory: given the run's :class:`ProviderContext` (settings, the backend spec built
from them, the managed server's facts), it returns the bare
:class:`~pytest_toolbench.models.base.ChatModel`; ``build_model`` (factory.py) puts the same
layers around every provider's model (the shared SDK process where the model is an
``OpenAIBackend``, the response cache, the open protocol). The built-ins register here like any
other; a package adds its own without editing the factory, either by calling
:func:`register_provider` (a conftest or plugin) or by declaring an entry point in the group
``pytest_toolbench.models`` whose object is a :class:`Provider` or a factory.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from pytest_toolbench.config import RunSettings
from pytest_toolbench.entry_points import left_out_named, load_group
from pytest_toolbench.models.base import ChatModel
from pytest_toolbench.models.spec import BackendSpec, ServerInfo

if TYPE_CHECKING:
    from pytest_toolbench.models.openai_backend import OpenAIBackend
    from pytest_toolbench.models.sdk_process.protocol import SdkLink

#: The entry-point group a package declares its providers in (name = the ``--backend`` value).
ENTRY_POINT_GROUP = "pytest_toolbench.models"


class ModelConfigError(ValueError):
    """The settings cannot produce a working model (missing key, missing URL, unknown backend...)."""


@dataclass(frozen=True)
class ProviderContext:
    """What a provider builds its model from."""

    settings: RunSettings
    #: The run's backend, built once from the settings (models/spec.py).
    spec: BackendSpec
    #: The managed vLLM server's facts (None: no managed server).
    server: ServerInfo | None = None
    #: The run's shared SDK process (None: the SDK runs in this process).
    sdk: SdkLink | None = None

    def placed(self, backend: OpenAIBackend, server_pid: int | None = None) -> ChatModel:
        """``backend`` where the run wants its SDK: in the shared SDK process when there is one
        (models/sdk_process), else as is. ``server_pid``: the managed server the SDK process
        watches, so a dead server fails calls there at once too."""
        if self.sdk is None:
            return backend
        from pytest_toolbench.models.sdk_process.client import RemoteBackend

        return RemoteBackend(backend, self.sdk, server_pid=server_pid)


ProviderFactory = Callable[[ProviderContext], ChatModel]


@dataclass(frozen=True)
class Provider:
    """A backend the run can use. ``cached``: its replies go through the response cache (not for
    the oracle and replay, which answer locally and must not fill it)."""

    name: str
    factory: ProviderFactory
    cached: bool = True


_PROVIDERS: dict[str, Provider] = {}
_LOCK = threading.Lock()
_discovered = False


def register_provider(name: str, factory: ProviderFactory | Provider, *, cached: bool = True) -> Provider:
    """Make ``--backend NAME`` build its model with ``factory`` (a later registration of the same
    name replaces the earlier one, so a project can override a built-in)."""
    provider = factory if isinstance(factory, Provider) else Provider(name, factory, cached)
    if provider.name != name:
        provider = Provider(name, provider.factory, provider.cached)
    with _LOCK:
        _PROVIDERS[name] = provider
    return provider


def unregister_provider(name: str) -> None:
    """Forget a provider (tests that register one of their own)."""
    with _LOCK:
        _PROVIDERS.pop(name, None)


def providers() -> dict[str, Provider]:
    """Every provider known now: the built-ins, the registered ones and the entry points."""
    _discover()
    with _LOCK:
        return dict(_PROVIDERS)


def find_provider(name: str, where: str | None = None) -> Provider:
    """The provider for ``--backend NAME``; an unknown name is one line listing the known ones.
    ``where``: how the name was set, when not by the flag (``<ini file>: toolbench_backend = 'x'``)."""
    found = providers().get(name)
    if found is None:
        raise ModelConfigError(f"{where or f'--backend {name}'}: {unknown_provider_reason(name)}")
    return found


def unknown_provider_reason(name: str) -> str:
    refused = left_out_named(ENTRY_POINT_GROUP, name)
    if refused is not None:
        return f"no such model provider: its {refused.text()}"
    known = ", ".join(["auto", *sorted(providers())])
    return (f"no such model provider (expected one of {known}); a package adds one with "
            f"register_provider() or an entry point in the group {ENTRY_POINT_GROUP!r}")


def _discover() -> None:
    """The built-ins, then the installed packages' entry points, once per process."""
    global _discovered
    if _discovered:
        return
    from pytest_toolbench.models import builtin_providers  # noqa: F401  (registers the built-ins)

    # an entry point does not replace a provider registered in code (a package may do both);
    # one that does not load is left out with its reason (entry_points.load_group), so the
    # other providers still serve
    for name, loaded in load_group(ENTRY_POINT_GROUP, "model provider",
                                   shadowed=tuple(_PROVIDERS)).items():
        register_provider(name, loaded)
    _discovered = True
