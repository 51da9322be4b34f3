"""Response cache: a rerun of an unchanged request costs nothing and gives the same answer.

Entries are appended to per-process pack files (models/cache_store.py), so many pytest-xdist
workers share the folder without locks and an interrupted run never leaves an entry that reads
back wrong; an entry that cannot be read is simply a miss. An entry
that cannot be *written* (a full disk, EIO, a file system gone read-only) is not skipped quietly:
the reply is still returned, and the failure is recorded for the controller
(output_errors.py), which stops the run with exit status OUTPUT_ERROR. Only answers
are cached, never errors. The key covers what changes the answer: model name, endpoint, the full
request (messages, tools, tool_choice, sampling) and ``key_extra`` (vLLM server args, chat-template
hash...), which inspect_ai's cache leaves out.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_toolbench import output_errors
from pytest_toolbench.models.cache_store import CACHE_FORMAT, ResponseStore, safe_name
from pytest_toolbench.models.repeat import cache_repeat_extra
from pytest_toolbench.models.base import (
    CallContext,
    ChatModel,
    ChatRequest,
    ChatResponse,
    ModelCallError,
)

__all__ = ["CACHE_FORMAT", "CacheStats", "CachedModel", "ResponseStore", "cache_key", "served_marker"]


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    unreadable: int = 0  # entries that existed but could not be read (counted as misses too)
    write_errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "writes": self.writes,
                "unreadable": self.unreadable, "write_errors": self.write_errors}


def served_marker(cache_dir: Path, name: str, server_identity: dict[str, Any]) -> Path:
    """A file that exists once the cache holds any reply of this model served this way.

    Before it exists a run's first request is certain to miss, so the managed server may start
    at once, beside pytest's own start-up, instead of on that first miss (servers/managed.py)."""
    text = json.dumps({"model": name, "server": server_identity}, sort_keys=True, default=str)
    return Path(cache_dir) / "served" / hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_namespace(name: str, key_extra: dict[str, Any]) -> str:
    """The packs' folder of one model served one way: its readable name and a hash of its
    identity, so a run indexes only the entries that can be its own (models/cache_store.py)."""
    text = json.dumps({"model": name, "extra": key_extra}, sort_keys=True, ensure_ascii=False, default=str)
    return f"{safe_name(name)}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}"


def cache_key(
    name: str, base_url: str | None, request: ChatRequest, key_extra: dict[str, Any] | None
) -> str:
    payload = {
        "format": CACHE_FORMAT,
        "model": name,
        "base_url": base_url,
        "request": request.fingerprint(),
        "extra": key_extra or {},
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedModel:
    """Wraps any ChatModel; a hit returns the stored response (``cached=True``) without a call.

    ``include_base_url=False`` is for managed servers whose URL (a free port) changes every run:
    their identity then lies in ``key_extra`` (server args, template hash).
    """

    def __init__(
        self,
        inner: ChatModel,
        cache_dir: Path,
        key_extra: dict[str, Any] | None = None,
        *,
        include_base_url: bool = True,
        cache_only: bool = False,
        marker: Path | None = None,
    ):
        """``marker``: touched after the first stored reply (:func:`served_marker`)."""
        self.inner = inner
        #: --cache-only: a miss is an error instead of a model call (replay a finished run exactly).
        self.cache_only = cache_only
        self.name = inner.name
        self.key_extra = dict(key_extra or {})
        self.include_base_url = include_base_url
        self.store = ResponseStore(cache_dir, cache_namespace(inner.name, self.key_extra))
        self.cache_stats = CacheStats()
        self.marker = marker

    def key_for(self, request: ChatRequest) -> str:
        base_url = self.inner.describe().get("base_url") if self.include_base_url else None
        # --repeats: repeats 2..K get their own entries (models/repeat.py), repeat 1 the plain key.
        extra = {**self.key_extra, **cache_repeat_extra()}
        return cache_key(self.inner.name, base_url, request, extra)

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        key = self.key_for(request)
        stored, unreadable = self.store.load(key)
        if unreadable:
            self.cache_stats.unreadable += 1
        if stored is not None:
            self.cache_stats.hits += 1
            return stored.model_copy(update={"cached": True})
        self.cache_stats.misses += 1
        if self.cache_only:
            raise ModelCallError(
                "cache_miss", f"--cache-only: no cached response for case {ctx.case_id}, turn {ctx.turn}"
            )
        response = await self.inner.complete(request, ctx)  # errors propagate, never stored
        meta = {"model": self.inner.name, "case_id": ctx.case_id}
        try:
            # On the event loop: an append is one write, cheaper than a hand-off to a thread.
            # The call returns only once its entry is in place.
            self.store.save(key, response, meta)
            self.cache_stats.writes += 1
            if self.marker is not None:
                marker, self.marker = self.marker, None  # once per process is enough
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()
        except OSError as exc:
            # The answer is kept (the case is scored), but a cache that silently stops filling
            # would make the next run pay again and hide a full disk: the run stops on it.
            self.cache_stats.write_errors += 1
            output_errors.record(output_errors.OutputFailure.of(
                "response cache entry", self.store.pack_path, exc))
        return response

    async def aclose(self) -> None:
        self.store.close()  # every write has returned: nothing is pending
        await self.inner.aclose()

    def describe(self) -> dict[str, Any]:
        return {
            **self.inner.describe(),
            "cache_dir": str(self.store.cache_dir),
            "cache_key_extra": self.key_extra,
        }

    def __getattr__(self, item: str) -> Any:  # backend stats etc. of the wrapped model
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)
