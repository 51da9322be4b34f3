"""Where fetched data lives, and the hosts it comes from, read from the environment at each call
(``huggingface_hub`` reads its own settings once, at import; a run, and the tests, may set them
later).

One cache root for everything: Hugging Face files go into the hub cache (``$HF_HUB_CACHE``,
default ``$HF_HOME/hub``), where ``huggingface_hub`` puts them, so a file another tool fetched is
reused; files from other hosts (GitHub) go into the Hugging Face *assets* cache
(``$HF_ASSETS_CACHE``, default ``$HF_HOME/assets``) under ``pytest-toolbench/``: the folder
``huggingface_hub.cached_assets_path`` gives a library for its non-Hub downloads, which its cache
tools leave alone. So copying ``$HF_HOME`` from a connected machine carries every file a run
needs, and nothing of ours lands among the hub's repositories.
"""

from __future__ import annotations

import os
from pathlib import Path

#: A mirror of raw.githubusercontent.com (same path layout: OWNER/REPO/REV/PATH).
GITHUB_RAW_ENV = "TOOLBENCH_GITHUB_RAW_BASE"
GITHUB_RAW_DEFAULT = "https://raw.githubusercontent.com"
HF_ENDPOINT_DEFAULT = "https://huggingface.co"
ASSETS_NAMESPACE = "pytest-toolbench"


def _path(value: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(value)))


def hf_home() -> Path:
    """``$HF_HOME``, else ``$XDG_CACHE_HOME/huggingface``, else ``~/.cache/huggingface``
    (huggingface_hub's own rule)."""
    if os.environ.get("HF_HOME"):
        return _path(os.environ["HF_HOME"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return _path(os.path.join(base, "huggingface"))


def hub_cache() -> Path:
    """The hub cache (``$HF_HUB_CACHE``, legacy ``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``)."""
    value = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    return _path(value) if value else hf_home() / "hub"


def assets_cache() -> Path:
    """This package's folder in the assets cache (``$HF_ASSETS_CACHE``, else ``$HF_HOME/assets``)."""
    value = os.environ.get("HF_ASSETS_CACHE") or os.environ.get("HUGGINGFACE_ASSETS_CACHE")
    return (_path(value) if value else hf_home() / "assets") / ASSETS_NAMESPACE


def hf_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or HF_ENDPOINT_DEFAULT).rstrip("/")


def github_raw_base() -> str:
    return (os.environ.get(GITHUB_RAW_ENV) or GITHUB_RAW_DEFAULT).rstrip("/")


def offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) as huggingface_hub reads it: no request
    at all, cached files only. It holds for the GitHub files too."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in {"1", "ON", "YES", "TRUE"}


def offline_variable() -> str:
    return "HF_HUB_OFFLINE" if os.environ.get("HF_HUB_OFFLINE") else "TRANSFORMERS_OFFLINE"


def cache_roots_text() -> str:
    """What to copy to a machine without network (named in the refusal line)."""
    hub, assets = hub_cache(), assets_cache()
    home = hf_home()
    if hub.is_relative_to(home) and assets.is_relative_to(home):
        return str(home)
    return f"{hub} and {assets}"
