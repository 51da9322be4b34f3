"""Why a request never reached the model, and when to stop trying an endpoint that never answered.

Two things a connection failure must not cost a run:

* **The wrong words.** The SDK reports every failure of its aiohttp transport (refused, DNS,
  TLS, a connect timeout) as ``APITimeoutError("Request timed out.")``, and httpx's as
  ``APIConnectionError("Connection error.")``. The cause is further down the exception chain
  (``httpx.ConnectError`` / ``aiohttp.ClientConnectorError`` -> ``ConnectionRefusedError``,
  ``socket.gaierror``, ``ssl.SSLError``...): :func:`transport_failure_kind` reads it there, so a
  port with nothing listening is ``connection_refused``, not ``timeout``.
* **Minutes on a dead endpoint.** With retries and backoff per call, a ``--base-url`` nobody
  listens on would take every case through all its attempts (minutes for a run) before
  saying anything. :class:`Reachability` watches the endpoint from the first request of the run:
  while it has never answered (any HTTP reply counts, an error status included) and every attempt
  fails at the transport, retries go on only until ``unreachable_after_s`` has passed since that
  first request; then the endpoint is declared unreachable and every later call, in this process
  and in every process sharing it (the SDK process, models/sdk_process), fails at once with the
  same one-line :class:`EndpointUnreachable`, without a request. An endpoint that answered once
  is never declared: later faults are retried as before (a restart, a network blip).
* **Hours on a failing endpoint.** An endpoint that answers, but only with server errors (5xx,
  or 200s that are no chat completion: a proxy with no backend, a gateway's error page), was
  retried by every call through all its attempts: ~95 s a call at the defaults, hours for a
  real set at ``--concurrency 8``. While it has never served a usable reply since the run began,
  once a call has spent every attempt on server errors and ``unreachable_after_s`` has passed
  since the first request, it is given up the same way. One call's whole retry policy is the
  endpoint's grace (a server warming up that answers within it is waited for); one usable reply
  at any time and it is never given up for server errors.

Nothing here imports openai, httpx or aiohttp: the exception chain is read by class names, so a
run that never sends a request does not pay for those imports.
"""

from __future__ import annotations

import errno
import socket
import ssl
import time
from collections import Counter
from typing import Callable

from pytest_toolbench.models.base import ModelCallError
from pytest_toolbench.models.errors import UNREACHABLE_MARK, encode_hint, is_server_failure

#: Default of ``unreachable_after_s``: how long an endpoint may fail every attempt at the
#: transport, counted from the run's first request to it, before the run stops trying it.
DEFAULT_UNREACHABLE_AFTER_S = 10.0

#: The transport failures that can mean "nothing usable at this URL" while the endpoint has never
#: answered. ``timeout`` (no reply in time on an open connection) counts only where timed-out
#: requests are retried at all (not on the harness's own vLLM server, openai_backend.py).
UNREACHABLE_KINDS = frozenset({
    "connection_refused", "dns_failure", "tls_failure", "connect_timeout", "connection", "timeout",
})

#: Kinds that name their cause for sure. Under load a lookup or handshake can also run out of
#: time (a connect timeout): the verdict names the cause that was seen, not the last symptom.
_DEFINITE_KINDS = ("connection_refused", "dns_failure", "tls_failure")

#: How each kind reads in the one-line verdict.
_LABELS = {
    "connection_refused": "connection refused (nothing listens at that host and port)",
    "dns_failure": "DNS failure (the host name does not resolve)",
    "tls_failure": "TLS failure (handshake or certificate)",
    "connect_timeout": "connect timeout (no answer to the connection attempt)",
    "connection": "connection dropped before any reply",
    "timeout": "timeout (no reply within the request timeout)",
}

# Class names along the chain, most specific kind first (httpx, httpcore and their vendored
# ``httpx2``/``httpcore2`` copies share names; aiohttp's are its own).
_DNS_NAMES = frozenset({"ClientConnectorDNSError"})
_TLS_NAMES = frozenset({"ClientConnectorSSLError", "ClientConnectorCertificateError", "ClientSSLError"})
_CONNECT_TIMEOUT_NAMES = frozenset({"ConnectTimeout", "ConnectionTimeoutError"})
_TIMEOUT_NAMES = frozenset({"ReadTimeout", "WriteTimeout", "PoolTimeout", "SocketTimeoutError",
                            "ServerTimeoutError", "TimeoutException", "APITimeoutError"})
_CONNECTION_NAMES = frozenset({"ClientConnectionError", "NetworkError", "RemoteProtocolError",
                               "ProtocolError", "ConnectError", "APIConnectionError"})


def _link_kind(link: BaseException) -> str | None:
    """The kind one exception of the chain stands for (None: says nothing about the cause)."""
    names = {cls.__name__ for cls in type(link).__mro__}
    if isinstance(link, ConnectionRefusedError) or (
        isinstance(link, OSError) and link.errno == errno.ECONNREFUSED
    ):
        return "connection_refused"
    if isinstance(link, socket.gaierror) or names & _DNS_NAMES:
        return "dns_failure"
    if isinstance(link, (ssl.SSLError, ssl.CertificateError)) or names & _TLS_NAMES:
        return "tls_failure"
    if names & _CONNECT_TIMEOUT_NAMES:
        return "connect_timeout"
    if names & _TIMEOUT_NAMES:
        return "timeout"
    if names & _CONNECTION_NAMES:
        return "connection"
    if isinstance(link, OSError) and not isinstance(link, TimeoutError) and link.errno:
        return "connection"  # reset, host or network unreachable...
    return None


def _chain(exc: BaseException, limit: int = 16) -> list[BaseException]:
    out: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(out) < limit and seen not in out:
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


def transport_failure_kind(exc: BaseException) -> str | None:
    """``connection_refused``, ``dns_failure``, ``tls_failure``, ``connect_timeout``, ``timeout``
    or ``connection`` for an exception whose chain holds a transport failure; None otherwise.

    The deepest link that names a cause wins: the SDK's aiohttp transport wraps a refused
    connection in ``httpx.ConnectTimeout`` and the SDK in ``APITimeoutError``, and only the
    ``ConnectionRefusedError`` at the bottom tells the truth."""
    kind = None
    for link in _chain(exc):
        kind = _link_kind(link) or kind
    return kind


def transport_failure_detail(exc: BaseException, limit: int = 300) -> str:
    """The most specific message along the chain (``[Errno 111] Connect call failed ...``), not
    the SDK's generic "Request timed out." / "Connection error."."""
    detail = deepest = ""
    for link in _chain(exc)[1:]:  # below the SDK's own error, whose words say nothing
        text = str(link).strip()
        if text and _link_kind(link) is not None:
            detail = text
        deepest = text or deepest
    # No link below names a transport cause (a body that does not decode as its
    # Content-Encoding says): the deepest message, the root cause, over "Connection error."
    detail = detail or deepest or str(exc)
    return detail if len(detail) <= limit else detail[:limit] + "..."


class EndpointUnreachable(ModelCallError):
    """The endpoint is given up for the run: it has not answered once since the run began and
    every attempt failed at the transport for the whole bound, or it has answered only with
    server errors (``Reachability.call_exhausted``). This call and every later one fail at once
    (never retried)."""


class Reachability:
    """Whether one backend's endpoint(s) ever answered in this run, and the verdict once it is
    given up. Used from one event loop (no locks)."""

    def __init__(self, url: str, unreachable_after_s: float | None = DEFAULT_UNREACHABLE_AFTER_S,
                 clock: Callable[[], float] = time.monotonic):
        """``unreachable_after_s``: None never gives up (every call takes its retries)."""
        self.url = url
        self.unreachable_after_s = unreachable_after_s
        self.clock = clock
        self.answered = False
        self.first_request_at: float | None = None
        #: kind -> failed attempts, and kind -> the last such error's detail, while never answered.
        self.failures: Counter = Counter()
        self.details: dict[str, str] = {}
        #: A usable reply (a chat completion) since the run began: never given up for server errors.
        self.served = False
        #: kind -> attempts answered with a server error, and the last one's detail, while never served.
        self.server_failures: Counter = Counter()
        self.server_details: dict[str, str] = {}
        #: (kind, message, hint) once the endpoint is given up.
        self.verdict: tuple[str, str, str] | None = None

    # -- what the backend reports ----------------------------------------------------------------
    def request_started(self) -> None:
        if self.first_request_at is None:
            self.first_request_at = self.clock()

    def reply_received(self) -> None:
        """Any HTTP reply (an error status or an unreadable body included): the endpoint is up."""
        self.answered = True

    def reply_served(self) -> None:
        """A usable reply: the endpoint serves, whatever it answered before or answers later."""
        self.answered = self.served = True

    def server_failed(self, kind: str, detail: str) -> None:
        """One attempt answered with a server error (``http_5xx``, ``bad_response``)."""
        if not self.served and is_server_failure(kind):
            self.server_failures[kind] += 1
            self.server_details[kind] = " ".join(detail.split())[:300]

    def call_exhausted(self, kind: str, attempts: int, url: str | None = None) -> bool:
        """A call has spent all its ``attempts``, the last answered with ``kind``. True when
        this gives the endpoint up: it never served a usable reply since the run began, the
        last answer was a server error, and ``unreachable_after_s`` has passed since the first
        request."""
        if self.verdict is not None:
            return True
        if (self.served or self.unreachable_after_s is None or not is_server_failure(kind)
                or self.first_request_at is None or not self.server_failures):
            return False
        if self.clock() - self.first_request_at < self.unreachable_after_s:
            return False
        self._give_up_failing(url or self.url, attempts)
        return True

    def transport_failed(self, kind: str, exc: BaseException, url: str | None = None) -> bool:
        """One attempt failed with ``kind``; True when this gives the endpoint up."""
        if self.verdict is not None:
            return True
        if self.answered or self.unreachable_after_s is None or kind not in UNREACHABLE_KINDS:
            return False
        self.failures[kind] += 1
        self.details[kind] = transport_failure_detail(exc)
        if self.remaining_s() > 0:
            return False
        self._give_up(url or self.url)
        return True

    # -- what the backend asks -------------------------------------------------------------------
    def remaining_s(self) -> float:
        """Seconds left before a still-silent endpoint is given up (inf: not counting down)."""
        if self.answered or self.unreachable_after_s is None or self.first_request_at is None:
            return float("inf")
        return self.first_request_at + self.unreachable_after_s - self.clock()

    def error(self, attempts: int | None = None) -> EndpointUnreachable | None:
        """The verdict as this call's error (None while the endpoint is not given up)."""
        if self.verdict is None:
            return None
        kind, message, hint = self.verdict
        return EndpointUnreachable(kind, message, attempts=attempts, hint=hint)

    def _give_up(self, url: str) -> None:
        definite = [k for k in _DEFINITE_KINDS if self.failures[k]]
        kind = max(definite or self.failures, key=lambda k: self.failures[k])
        self._set_verdict(kind, url, f"{_LABELS.get(kind, kind)}; not one reply", self.failures,
                          "failed", self.details[kind],
                          _OPTIONS.get(kind, "check the endpoint (--base-url)"))

    def _give_up_failing(self, url: str, attempts: int) -> None:
        kind = self.server_failures.most_common(1)[0][0]
        self._set_verdict(
            kind, url, "server errors only (HTTP 5xx, or replies that are no chat completion); "
            "not one usable reply", self.server_failures, "answered", self.server_details[kind],
            "check the server at --base-url (its log); --unreachable-after gives a server that is "
            "still starting longer", extra=f"; a call spent all its {attempts} attempts")

    def _set_verdict(self, kind: str, url: str, cause: str, counts: Counter, outcome: str,
                     last_error: str, option: str, extra: str = "") -> None:
        """The one line both ways of giving up share: ``endpoint URL unreachable: <cause> since
        the run began (N attempts <outcome> in T s: <kind> xN...<extra>); no more requests are
        sent to it in this run. Last error: ...``, and its hint."""
        elapsed = self.clock() - (self.first_request_at or self.clock())
        seen = ", ".join(f"{k} x{n}" for k, n in counts.most_common())
        cause = f"endpoint {url} {UNREACHABLE_MARK} {cause} since the run began"
        message = (f"{cause} ({sum(counts.values())} attempts {outcome} in {elapsed:.1f} s: {seen}"
                   f"{extra}); no more requests are sent to it in this run. Last error: {last_error}")
        self.verdict = (kind, " ".join(message.split()), encode_hint(cause, option))

_OPTIONS = {
    "connection_refused": "start the server, or fix the host and port in --base-url",
    "dns_failure": "fix the host name in --base-url",
    "tls_failure": "check http:// vs https:// in --base-url, or trust the server's certificate "
                   "(SSL_CERT_FILE)",
    "connect_timeout": "check the host in --base-url and the network (firewall) in between",
    "connection": "check the server at --base-url (its log)",
    "timeout": "check the server at --base-url; raise --request-timeout if it is just slow",
}
