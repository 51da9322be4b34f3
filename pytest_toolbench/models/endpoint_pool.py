"""Several endpoints serving one model (vLLM replicas): least-loaded routing with health.

One harness process keeps a fleet busy: every HTTP attempt goes to the healthy endpoint with the
fewest requests in flight (ties: the one used least), so a slow replica gets less work by itself.
An endpoint whose attempts fail ``failure_threshold`` times in a row (connection errors, 5xx,
unreadable replies) is taken out for ``cooldown_s`` and its requests go elsewhere; after the
cool-down it gets traffic again, and one success resets its count. If every endpoint is cooling
down, the one that comes back first is used (a run never stalls on routing alone). Retries of a
call are attempts like any other, so they land on another endpoint when one is sick.

Counts per endpoint (requests, errors by kind, times taken out) go to the run's report through
each case's call log (``details["endpoints"]``) and :meth:`EndpointPool.snapshot`.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


@dataclass
class Endpoint:
    url: str
    in_flight: int = 0
    requests: int = 0
    errors: Counter = field(default_factory=Counter)
    consecutive_failures: int = 0
    down_until: float = 0.0
    cooldowns: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "errors": dict(self.errors),
                "cooldowns": self.cooldowns, "in_flight": self.in_flight}


class EndpointPool:
    """Routing state for a list of URLs; used from one event loop (no locks needed)."""

    def __init__(self, urls: list[str], failure_threshold: int = 3, cooldown_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        if not urls:
            raise ValueError("an endpoint pool needs at least one URL")
        if len(set(urls)) != len(urls):
            raise ValueError(f"duplicate endpoint URL in {urls}")
        self.endpoints = [Endpoint(u) for u in urls]
        self.failure_threshold = failure_threshold
        self.cooldown_s = cooldown_s
        self.clock = clock

    def acquire(self) -> Endpoint:
        """The endpoint for the next attempt (counted in flight until :meth:`release`)."""
        now = self.clock()
        healthy = [e for e in self.endpoints if e.down_until <= now]
        if healthy:
            chosen = min(healthy, key=lambda e: (e.in_flight, e.requests))
        else:
            chosen = min(self.endpoints, key=lambda e: e.down_until)
        chosen.in_flight += 1
        chosen.requests += 1
        return chosen

    def release(self, endpoint: Endpoint, error: str | None = None, *, health: bool = True) -> None:
        """End of an attempt. ``error``: its kind, if it failed; ``health=False`` for failures
        that say nothing about the endpoint's health (e.g. a 400 for this request)."""
        endpoint.in_flight -= 1
        if error is None:
            endpoint.consecutive_failures = 0
            return
        endpoint.errors[error] += 1
        if not health:
            return
        endpoint.consecutive_failures += 1
        if endpoint.consecutive_failures >= self.failure_threshold and len(self.endpoints) > 1:
            endpoint.down_until = self.clock() + self.cooldown_s
            endpoint.consecutive_failures = 0
            endpoint.cooldowns += 1

    def snapshot(self) -> dict[str, dict[str, Any]]:
        return {e.url: e.as_dict() for e in self.endpoints}


def credentials_problem(url: str, where: str) -> str | None:
    """Why a base URL that carries a user name or password (``http://user:pw@host/v1``) is
    refused, the password masked; None without one. The SDK sends the key as a Bearer token
    (``--api-key``, ``$OPENAI_API_KEY``), aiohttp refuses such a URL outright (every call an
    unreadable reply), and the URL is written into every report, JUnit file and Allure result
    of the run, password and all."""
    from urllib.parse import urlsplit

    from pytest_toolbench.secret_args import masked_url

    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.username is None and parts.password is None:
        return None
    return (f"{where} {masked_url(url.strip())!r}: a user name or password in the URL is neither sent as the key "
            "nor kept out of the reports; give the key as --api-key (or $OPENAI_API_KEY) and the "
            "URL without it")


def read_urls_file(path: str | Path) -> list[str]:
    """One URL per line; blank lines and ``#`` comments skipped. A bad line is one error naming
    the file and the line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"--base-urls-file {p}: cannot read: {exc.strerror or exc}") from None
    urls: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not line.startswith(("http://", "https://")) or " " in line:
            # the start only: a file named by mistake (.env) must not put its secrets in a log
            shown = line if len(line) <= 12 else line[:12] + "..."
            raise ValueError(f"{p}:{lineno}: not an http(s) URL: {shown!r}")
        problem = credentials_problem(line, f"{p}:{lineno}:")
        if problem is not None:
            raise ValueError(problem)
        urls.append(line)
    if not urls:
        raise ValueError(f"{p}: no URL in the file")
    return urls


def endpoint_totals(details: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per-endpoint requests and errors over the run, summed from each case's
    ``details["endpoints"]`` (so it also covers every xdist worker)."""
    out: dict[str, dict[str, int]] = {}
    for d in details:
        for url, counts in (d.get("endpoints") or {}).items():
            total = out.setdefault(url, {"requests": 0, "errors": 0})
            total["requests"] += int(counts.get("requests", 0))
            total["errors"] += int(counts.get("errors", 0))
    return dict(sorted(out.items()))


def endpoint_notes(totals: dict[str, dict[str, int]]) -> list[str]:
    return [f"endpoint {url}: {c['requests']} requests, {c['errors']} errors"
            for url, c in totals.items()]
