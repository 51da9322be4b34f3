"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, ...) over real HTTP.

Requests go through the openai SDK's client (``AsyncOpenAI.post`` on ``/chat/completions``, its
documented way to send a body as built: auth, headers, timeouts and status errors are the SDK's)
over aiohttp by default (``--http-transport``); replies are read as the JSON the server sent.

The SDK's own retries are switched off: we retry here with tenacity so the policy is bounded, honours
``Retry-After`` (capped by ``retry_after_max_s``) and is counted in :attr:`OpenAIBackend.stats` and,
per case, in the current :class:`~pytest_toolbench.models.call_log.CaseCallLog`. A 200 whose body
is not a chat completion (not JSON, no choices, no message) is retried like a 5xx. A failure that
survives the retries becomes a :class:`ModelCallError`, which the harness scores as an
infrastructure error, apart from wrong answers.

``retry_timeouts=False`` is for the harness's own local server (``--backend vllm`` without
``--base-url``): it serves this run alone, so a timed-out greedy request would take as long again
at the same settings; the call fails at once, saying which option would help.

An endpoint that has not answered once since the run began and fails every attempt at the
transport (refused, DNS, TLS, timeouts) is given up after ``unreachable_after_s``: that call and
every later one fail at once with one line naming the URL and the cause (models/reachability.py).
An endpoint that answered once keeps the retries above for every later fault.

``upstream_lost_turns`` reproduces upstream ToolHop's ``code/evaluation_closed.py`` instead: an HTTP error or an
unreadable reply is not retried (upstream only retries exceptions, and an error body just fails on
``['choices']``), and the call raises :class:`LostTurn` so the runner lets it consume its turn.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timezone
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from pytest_toolbench.counting import counted
from pytest_toolbench.lazy_import import LazyModule
from pytest_toolbench.models.base import (
    CallContext,
    ChatRequest,
    ChatResponse,
    ContextLengthExceeded,
    LostTurn,
    ModelCallError,
    Usage,
)
from pytest_toolbench.models.call_log import current_call_log
from pytest_toolbench.models.endpoint_pool import EndpointPool
from pytest_toolbench.models.meter import REQUEST_METER
from pytest_toolbench.models.parse_check import detect_parse_failure
from pytest_toolbench.models.reachability import (
    EndpointUnreachable,
    Reachability,
    transport_failure_detail,
    transport_failure_kind,
)
from pytest_toolbench.models.errors import TRANSPORT_KINDS, encode_hint, kind_hint, timeout_hint
from pytest_toolbench.models.spec import BackendSpec

if TYPE_CHECKING:
    import openai
else:
    # Slow to import, and a run whose replies all come from the response cache (or that only
    # collects) never needs it.
    openai = LazyModule("openai")

#: Statuses worth another try: request timeout, rate limit, server errors.
RETRYABLE_STATUSES = frozenset({408, 429})


@dataclass
class BackendStats:
    """Counters for the run report and for tests: how hard did we have to try?"""

    calls: int = 0  # complete() invocations
    attempts: int = 0  # HTTP requests sent
    retries: int = 0  # attempts after the first, over all calls
    successes: int = 0
    failures: int = 0  # calls that ended in ModelCallError
    retry_wait_s: float = 0.0  # total time slept between attempts
    errors: Counter = field(default_factory=Counter)  # error kind -> count, every attempt

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "attempts": self.attempts,
            "retries": self.retries,
            "successes": self.successes,
            "failures": self.failures,
            "retry_wait_s": round(self.retry_wait_s, 3),
            "errors": dict(self.errors),
        }


def error_kind(exc: BaseException) -> str:
    """Short machine-readable tag for an SDK error ("http_429", "timeout", "connection_refused",
    "dns_failure", "tls_failure", "connect_timeout", "connection", ...)."""
    if isinstance(exc, openai.APIStatusError):
        return f"http_{exc.status_code}"
    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError included
        # The SDK's aiohttp transport maps every connection error (refused, DNS, TLS, the server
        # hanging up mid-reply) to a connect *timeout*: the original error down the chain says
        # which (models/reachability.py).
        found = transport_failure_kind(exc)
        if found is not None:
            return found
        return "timeout" if isinstance(exc, openai.APITimeoutError) else "connection"
    if isinstance(exc, ModelCallError):
        return exc.kind
    return "bad_response"


_CONTEXT_OVERFLOW = re.compile(
    r"context length|context window|maximum context|max_model_len|prompt is too long|"
    r"too many (input )?tokens|reduce the length",
    re.IGNORECASE,
)


def is_context_overflow(exc: openai.BadRequestError) -> bool:
    """A 400 saying the conversation does not fit (OpenAI, vLLM and most compatible servers)."""
    return bool(_CONTEXT_OVERFLOW.search(str(exc)))


class InvalidReply(ModelCallError):
    """A 200 whose body is not a usable chat completion: retried like a 5xx."""

    def __init__(self, message: str):
        super().__init__("bad_response", message)


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRYABLE_STATUSES or exc.status_code >= 500
    if isinstance(exc, InvalidReply):
        return True
    return isinstance(exc, openai.APIConnectionError)  # includes APITimeoutError


def is_upstream_lost_call(exc: BaseException) -> bool:
    """What upstream's closed script turns into a lost turn without retrying: any HTTP error
    status (its body has no ``choices``) and any 200 that is not a completion."""
    return isinstance(exc, (openai.APIStatusError, InvalidReply))


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """The wait a server asked for: ``retry-after-ms``, or ``Retry-After`` as seconds or HTTP-date."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = now if now is not None else time.time()
    return max(0.0, when.timestamp() - current)


class EndpointGone(ModelCallError):
    """The endpoint will not come back (its process died): never retried."""


class OpenAIBackend:
    """:class:`~pytest_toolbench.models.base.ChatModel` over ``openai.AsyncOpenAI``."""

    #: Its semaphore holds its requests in flight to ``concurrency`` (models/base.py).
    LIMITS_REQUESTS = True

    def __init__(self, spec: BackendSpec, *,
                 abort_check: Callable[[], str | None] | None = None):
        """``spec``: everything the backend is made of (models/spec.py), the same value in the
        pytest process and in the shared SDK process. ``abort_check`` is consulted before every
        attempt: a message means the endpoint is gone for good (e.g. the managed vLLM process
        died), so the call fails at once instead of retrying for minutes."""
        self.spec = spec
        self.model = spec.model
        self.name = spec.name or spec.model
        #: Several endpoints for one model: least-loaded routing with health (endpoint_pool.py).
        self.pool = EndpointPool(list(spec.base_urls)) if len(spec.base_urls) > 1 else None
        self.base_url = spec.base_urls[0] if self.pool is not None else spec.base_url
        self.timeout_s = spec.timeout_s
        self.max_retries = spec.max_retries
        self.concurrency = spec.concurrency
        self.backoff_initial_s = spec.backoff_initial_s
        self.backoff_max_s = spec.backoff_max_s
        self.retry_after_max_s = spec.retry_after_max_s
        self.upstream_lost_turns = spec.upstream_lost_turns
        self.retry_timeouts = spec.retry_timeouts
        self.max_tokens = spec.max_tokens
        self.backend_label = spec.label
        self.abort_check = abort_check
        self.extra_body = spec.extra_body
        #: aiohttp (default) or httpx under the SDK: see :meth:`_new_client`.
        self.http_transport = spec.http_transport
        self.stats = BackendStats()
        self.unreachable_after_s = spec.unreachable_after_s
        #: Has the endpoint (any of the pool's) answered in this run, or been given up?
        self.reachability = Reachability(
            ", ".join(e.url for e in self.pool.endpoints) if self.pool is not None
            else (self.base_url or "https://api.openai.com/v1"),
            spec.unreachable_after_s,
        )
        # Client and semaphore belong to one event loop; built lazily inside it (see _loop_state).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: openai.AsyncOpenAI | None = None
        self._clients: dict[str, openai.AsyncOpenAI] = {}
        self._semaphore: asyncio.Semaphore | None = None

    # -- ChatModel -------------------------------------------------------------------------------

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        self.stats.calls += 1
        kwargs = self._request_kwargs(request)
        attempts = [0]  # attempts made (the count an error quotes)
        # The call's latency is every attempt's time on the wire plus the waits between them:
        # a reply that came after two 429s and their backoff took the whole wait, not only its
        # last request's time. Time queued for the concurrency semaphore is not counted.
        spent = [0.0]
        sent = [0]  # requests that left (a call queued behind the verdict sends none)

        async def attempt_once() -> ChatResponse:
            self.raise_if_aborted()
            given_up = self.reachability.error(sent[0])
            if given_up is not None:  # no request: the verdict is the run's
                raise given_up
            attempts[0] += 1
            return await self._attempt(kwargs, spent, sent)

        try:
            # The first attempt goes straight to the SDK: nearly every call succeeds at once, and
            # tenacity's set-up per call (a retrying object, its state, an async wrapper around
            # each callback) was ~12% of the SDK process's CPU per call (perf/sdk_process_cpu.py).
            # A first failure that may be retried enters tenacity's loop as its attempt 1
            # (_retry), so the policy, waits, counts and call log are those of a loop that made
            # every attempt itself.
            failed: Exception | None = None
            try:
                response = await attempt_once()
            except Exception as exc:
                if self.max_retries == 0 or not self._is_retryable(exc):
                    raise  # what the loop would do: stop after attempt 1, or an error it never retries
                failed = exc
            # Outside the except block on purpose: an exception raised by a later attempt must
            # not get the first failure as its __context__ (the transport cause is read down the
            # chain, models/reachability.py).
            if failed is not None:
                response = await self._retry(failed, attempt_once, spent, ctx)
        except EndpointGone:
            self.stats.failures += 1
            raise
        except EndpointUnreachable as exc:
            self.stats.failures += 1
            if exc.attempts != sent[0]:  # given up during this call: count its own requests
                raise self.reachability.error(sent[0]) from exc.__cause__
            raise
        except (openai.OpenAIError, ModelCallError) as exc:
            self.stats.failures += 1
            # Every attempt spent on server errors by an endpoint that never served: the run's
            # verdict (models/reachability.py), not this call's own error.
            if attempts[0] > self.max_retries and self._is_retryable(exc) \
                    and self.reachability.call_exhausted(error_kind(exc), attempts[0]):
                raise self.reachability.error(sent[0]) from exc
            if isinstance(exc, openai.BadRequestError) and is_context_overflow(exc):
                raise ContextLengthExceeded(f"{self.name}: {_short(exc)}") from exc
            raise self._call_error(exc, attempts[0], ctx) from exc
        self.stats.successes += 1
        response.latency_s = spent[0]
        return response

    async def _retry(self, failed: Exception, attempt_once: Callable[[], Awaitable[ChatResponse]],
                     spent: list[float], ctx: CallContext) -> ChatResponse:
        """The attempts after a first one that failed with a retryable error: tenacity's loop
        (stop after ``max_retries + 1`` attempts, :meth:`_wait`, :meth:`_is_retryable`, each retry
        logged), with ``failed`` fed in as its attempt 1."""

        def before_sleep(state: RetryCallState) -> None:
            spent[0] += state.upcoming_sleep
            self._before_sleep(state, ctx)

        first: Exception | None = failed
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(self._is_retryable),
            before_sleep=before_sleep,
            reraise=True,
        ):
            with attempt:
                if first is not None:  # attempt 1 was made by complete(): its outcome
                    exc, first = first, None
                    raise exc
                response = await attempt_once()
        return response

    def _is_retryable(self, exc: BaseException) -> bool:
        if self.upstream_lost_turns and is_upstream_lost_call(exc):
            return False
        if not self.retry_timeouts and isinstance(exc, openai.APITimeoutError) \
                and error_kind(exc) == "timeout":
            return False  # our own local server: the same greedy request would time out again
        return is_retryable(exc)

    def _call_error(self, exc: BaseException, attempts: int, ctx: CallContext) -> ModelCallError:
        where = f"{self.name} at {self.base_url or 'api.openai.com'}"
        kind = error_kind(exc)
        if self.upstream_lost_turns and not isinstance(exc, EndpointGone) and (
            is_upstream_lost_call(exc) or is_retryable(exc)
        ):
            log = current_call_log()
            if log is not None:
                log.lost_turns.append({"turn": ctx.turn, "kind": kind, "message": _short(exc, 200)})
            return LostTurn(kind, f"{where} (case {ctx.case_id}, turn {ctx.turn}, turn lost as "
                                  f"upstream loses it): {_short(exc)}")
        if isinstance(exc, openai.BadRequestError):
            return ModelCallError(
                kind, f"{where} rejected the request (case {ctx.case_id}, turn {ctx.turn}): "
                f"{_short(exc)}",
            )
        if kind == "timeout":
            cause, option = timeout_hint(self.timeout_s, self.max_tokens, self.retry_timeouts)
        else:
            cause, option = kind_hint(kind)
        # The SDK says "Request timed out." for a refused connection (aiohttp) and "Connection
        # error." for anything: quote the cause found down the chain instead.
        said = transport_failure_detail(exc) if kind in TRANSPORT_KINDS else _short(exc)
        return ModelCallError(
            kind, f"{where} failed after {counted(attempts, 'attempt')} (case {ctx.case_id}, turn "
            f"{ctx.turn}): {said}; {cause}; try: {option}",
            attempts=attempts, hint=encode_hint(cause, option),
        )

    async def aclose(self) -> None:
        client, loop, others = self._client, self._loop, list(self._clients.values())
        self._client, self._loop, self._semaphore, self._clients = None, None, None, {}
        # Connections belong to the loop that opened them; from another loop just drop them.
        if loop is asyncio.get_running_loop():
            # The base URL's client is also its pool endpoint's: closed once.
            for c in {id(c): c for c in [client, *others] if c is not None}.values():
                await c.close()

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend_label,
            "model": self.model,
            "name": self.name,
            "base_url": self.base_url,
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
            "retry_after_max_s": self.retry_after_max_s,
            "upstream_lost_turns": self.upstream_lost_turns,
            "retry_timeouts": self.retry_timeouts,
            "concurrency": self.concurrency,
            # The URLs only (static: describe() may feed cache keys); live counts: pool.snapshot().
            **({"endpoints": [e.url for e in self.pool.endpoints]} if self.pool is not None else {}),
        }

    def raise_if_aborted(self) -> None:
        """``EndpointGone`` if ``abort_check`` says the endpoint will not come back (before every
        attempt here, and before a call is handed to the SDK process: models/sdk_process)."""
        reason = self.abort_check() if self.abort_check else None
        if reason:
            raise EndpointGone("server_died", reason)

    # -- internals -------------------------------------------------------------------------------

    def _request_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": request.messages}
        # An explicit ``tools=None`` is sent as JSON null (ToolHop's closed script sends
        # ``"tools": null`` in Direct, ToolHop ``code/evaluation_closed.py``); tools left unset are left out of the body.
        if request.tools is not None or "tools" in request.model_fields_set:
            kwargs["tools"] = request.tools
        if request.tool_choice is not None:
            kwargs["tool_choice"] = request.tool_choice
        kwargs.update(request.sampling.as_request_kwargs())
        if self.extra_body:  # server-specific fields go in the same JSON body (vLLM stop ids)
            kwargs.update(self.extra_body)
        for key, value in (request.extra_body or {}).items():
            # The request's own fields win; two dicts under one key (chat_template_kwargs) merge.
            base = kwargs.get(key)
            kwargs[key] = {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
        return kwargs

    def prepare(self) -> None:
        """Build this loop's client now rather than at the first call (the shared SDK process
        calls it when a pytest process says hello, while that process is still building its
        first requests): a client's construction (its SSL context, the first one's imports) took
        50-110 ms, on the way of the run's first request. A failure is left to the first call,
        which builds again and fails where it always did."""
        try:
            self._loop_state()
        except Exception:  # e.g. no API key: the first call raises it as a call's error
            pass

    def _loop_state(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        """Client and semaphore for the running loop (a new loop, e.g. in tests, gets new ones)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._client is None or self._semaphore is None:
            self._loop, self._clients = loop, {}
            self._client = self._new_client(self.base_url)
            if self.pool is not None:  # the pool's first endpoint is the base URL: one client
                self._clients[self.base_url] = self._client  # type: ignore[index]
            self._semaphore = asyncio.Semaphore(self.concurrency)
        return self._client, self._semaphore

    def _endpoint_client(self, url: str) -> openai.AsyncOpenAI:
        """The pool endpoint's client, built on its first request: the first request of a run
        over N endpoints no longer waits for N + 1 clients' construction (~50 ms each)."""
        client = self._clients.get(url)
        if client is None:
            client = self._clients[url] = self._new_client(url)
        return client

    def _new_client(self, url: str | None) -> openai.AsyncOpenAI:
        """The SDK's own client over real HTTP. aiohttp underneath (the SDK's
        ``DefaultAioHttpClient``) by default: it costs a fraction of httpx's CPU per request at
        hundreds in flight, where httpx's pool keeps only 100 idle connections and re-connects
        past that (perf/run.py measures both); httpx stays selectable (``--http-transport
        httpx``). Both take a proxy from HTTP(S)_PROXY / NO_PROXY (the SDK's aiohttp client
        trusts the environment, as httpx does), which the shared SDK process gets from each
        pytest process (sdk_process/protocol.py)."""
        http_client = (
            openai.DefaultAioHttpClient(timeout=self.timeout_s)
            if self.http_transport == "aiohttp" else None
        )
        return openai.AsyncOpenAI(
            api_key=self.spec.key(), base_url=url, timeout=self.timeout_s, max_retries=0,
            http_client=http_client,
        )

    async def _attempt(self, kwargs: dict[str, Any], spent: list[float] | None = None,
                       sent: list[int] | None = None) -> ChatResponse:
        """One request; its time on the wire (failed or not) is added to ``spent[0]``, and 1 to
        ``sent[0]`` once it leaves."""
        client, semaphore = self._loop_state()
        async with semaphore:  # held only while a request is in flight, never while backing off
            given_up = self.reachability.error()
            if given_up is not None:  # given up while this call waited for its turn
                raise given_up
            if sent is not None:
                sent[0] += 1
            endpoint = self.pool.acquire() if self.pool is not None else None
            if endpoint is not None:
                client = self._endpoint_client(endpoint.url)
            self.stats.attempts += 1
            self.reachability.request_started()
            started = time.perf_counter()
            try:
                with REQUEST_METER.request():  # the live progress line (models/meter.py)
                    # The SDK's documented request method with the body as built here (the same
                    # JSON ``chat.completions.create`` sends; auth, headers and status errors are
                    # the SDK's), read back as plain JSON: its typed-dict transform of the request
                    # and model construction of the reply are a large share of its CPU per call.
                    completion = await _within(attempt_bound_s(self.timeout_s),
                                               client.post(CHAT_PATH, body=kwargs, cast_to=object))
                usage = usage_of(completion)
                REQUEST_METER.add_usage(usage)
            except openai.OpenAIError as exc:
                if spent is not None:
                    spent[0] += time.perf_counter() - started
                kind = error_kind(exc)
                self.stats.errors[kind] += 1
                self._release(endpoint, exc)
                if isinstance(exc, openai.APIStatusError):
                    self.reachability.reply_received()
                    self.reachability.server_failed(kind, _short(exc, 300))
                elif isinstance(exc, openai.APIConnectionError) and self._counts_as_unreachable(kind):
                    if self.reachability.transport_failed(kind, exc):
                        raise self.reachability.error() from exc
                raise
            except BaseException as exc:  # e.g. a 200 whose body is not JSON: the SDK lets it through
                if spent is not None:
                    spent[0] += time.perf_counter() - started
                if not isinstance(exc, Exception):  # cancelled: not the endpoint's fault
                    self._release(endpoint, exc)
                    raise
                self.reachability.reply_received()
                raise self._bad_reply(endpoint, InvalidReply(_unreadable(exc))) from exc
            latency = time.perf_counter() - started
            if spent is not None:
                spent[0] += latency
        self.reachability.reply_received()
        # A request waiting for the place just freed (a case the scheduler started ahead,
        # runtime/scheduler.py) leaves before this reply is turned into a response and passed
        # on: replies land in bursts and asyncio runs what is ready in order, so without the
        # yield every reply of a burst went through first while the freed places stood empty
        # (perf/README.md, sixteenth pass).
        await asyncio.sleep(0)
        try:
            response = self._to_response(completion, latency, usage)
        except InvalidReply as exc:
            self._bad_reply(endpoint, exc)
            raise
        except Exception as exc:  # a reply shaped unlike a chat.completion
            raise self._bad_reply(endpoint, InvalidReply(f"unexpected reply shape: {_short(exc)}")) from exc
        self.reachability.reply_served()
        self._release(endpoint, None)
        return response

    def _bad_reply(self, endpoint: Any, invalid: InvalidReply) -> InvalidReply:
        """A 200 that is no usable chat completion (not JSON, no choices, another shape), treated
        alike wherever it is found: counted, held against its endpoint in the pool like a 5xx
        (its retry then goes to another replica), and counted towards the endpoint's "server
        errors only" verdict. Before, only a reply without choices counted in the pool, so a
        replica behind a proxy answering HTML kept its share of the attempts."""
        self.stats.errors["bad_response"] += 1
        self._release(endpoint, invalid)
        self.reachability.server_failed("bad_response", invalid.message)
        return invalid

    def _release(self, endpoint: Any, exc: BaseException | None) -> None:
        """End an attempt on a pooled endpoint: its health and this case's per-endpoint counts."""
        if endpoint is None or self.pool is None:
            return
        if exc is None:
            self.pool.release(endpoint)
            kind = None
        elif not isinstance(exc, Exception):
            self.pool.release(endpoint, "cancelled", health=False)
            kind = "cancelled"
        else:
            kind = error_kind(exc)  # an SDK error or an InvalidReply (_bad_reply)
            self.pool.release(endpoint, kind, health=is_retryable(exc))
        log = current_call_log()
        if log is not None:
            log.endpoint_attempt(endpoint.url, kind)

    def _to_response(self, completion: Any, latency: float, usage: Usage) -> ChatResponse:
        """A ``chat.completion`` JSON object -> ChatResponse; anything else is an InvalidReply
        (retried like a 5xx)."""
        if not isinstance(completion, dict) or not completion.get("choices"):
            raise InvalidReply(f"reply has no choices: {_short(completion)}")
        choice = completion["choices"][0]
        if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
            raise InvalidReply(f"reply's first choice has no message: {_short(choice)}")
        message = assistant_message(choice["message"])
        malformed = malformed_tool_calls(message.get("tool_calls"))
        if malformed is not None:
            raise InvalidReply(f"reply's tool_calls {malformed}: {_short(message.get('tool_calls'))}")
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            # A number or an object is no reply text: str() of it could even match a gold
            # answer ("content": 6 scored correct where the gold was "6").
            raise InvalidReply(f"reply's content is a JSON {_json_type(content)}, not a string: "
                               f"{_short(content)}")
        return ChatResponse(
            message=message,
            usage=usage,
            latency_s=latency,
            model=completion.get("model") or self.model,
            finish_reason=choice.get("finish_reason"),
            parse_failure=detect_parse_failure(message),
        )

    def _counts_as_unreachable(self, kind: str) -> bool:
        """A timed-out request to the harness's own server is a settings matter, not a dead
        endpoint (it is not resent either, see _is_retryable)."""
        return self.retry_timeouts or kind != "timeout"

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        response = getattr(exc, "response", None)
        asked = retry_after_seconds(getattr(response, "headers", None))
        if asked is not None:
            return min(asked, self.retry_after_max_s)
        # Exponential backoff with full jitter on top, so parallel callers do not retry in step.
        base = min(self.backoff_max_s, self.backoff_initial_s * 2 ** (state.attempt_number - 1))
        wait = min(self.backoff_max_s, base + random.uniform(0, base))
        # An endpoint that never answered: wake up by the time it is due to be given up, so no
        # call sleeps past the bound (the next failed attempt gives it up).
        return max(0.0, min(wait, self.reachability.remaining_s() + 0.01))

    def _before_sleep(self, state: RetryCallState, ctx: CallContext) -> None:
        self.stats.retries += 1
        self.stats.retry_wait_s += state.upcoming_sleep
        log = current_call_log()
        if log is not None:
            exc = state.outcome.exception() if state.outcome else None
            log.retries.append({"turn": ctx.turn, "kind": error_kind(exc) if exc else "unknown",
                                "wait_s": round(state.upcoming_sleep, 3)})


CHAT_PATH = "/chat/completions"
def attempt_bound_s(timeout_s: float) -> float:
    """How long one attempt may take in all: twice ``--request-timeout``, and a second. The
    SDK's own timeouts (connect, no byte for ``timeout_s``) fire first wherever they would,
    with their own kind: a bound half a second past them fired first on a busy machine and
    turned a connect timeout into a plain ``timeout``."""
    return 2 * timeout_s + 1.0


_TIMEOUT = getattr(asyncio, "timeout", None)  # Python 3.11+


async def _within(limit_s: float, request: Awaitable[Any]) -> Any:
    """``await request``, ended as the SDK's own timeout after ``limit_s`` seconds in all.

    The SDK's ``timeout`` (httpx's, aiohttp's) bounds each read, not the reply: a server
    sending its body a byte every half second kept an attempt, and its case, waiting for as
    long as it liked, past ``--request-timeout`` and every retry."""
    try:
        if _TIMEOUT is None:
            return await asyncio.wait_for(request, limit_s)
        async with _TIMEOUT(limit_s):
            return await request
    except asyncio.TimeoutError as exc:
        import httpx  # the SDK's own dependency, loaded with it

        raise openai.APITimeoutError(request=httpx.Request("POST", CHAT_PATH)) from exc


def usage_of(completion: Any) -> Usage:
    """Token counts of a reply (zeros for a reply without a well-formed ``usage``)."""
    usage = completion.get("usage") if isinstance(completion, dict) else None
    if not isinstance(usage, dict):
        return Usage()
    counts = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
    # a count that is no count (a bool, text, a negative number) adds nothing to the totals
    prompt, done = (c if isinstance(c, int) and not isinstance(c, bool) and c >= 0 else 0
                    for c in counts)
    return Usage(prompt_tokens=prompt, completion_tokens=done)


def assistant_message(message: Any) -> dict[str, Any]:
    """The assistant message as the endpoint returned it (ToolHop's closed script appends
    ``choices[0].message`` as is, ToolHop ``code/evaluation_closed.py``): every key the server sent is kept, extra ones such as
    ``reasoning_content`` or ``refusal`` included, with their values (nulls too), and no key
    the server left out: a reply with ``tool_calls`` and no ``content`` goes back without one, as
    upstream sends it (readers take ``.get("content")``). Only a missing ``role`` is filled in."""
    out: dict[str, Any] = (
        dict(message) if isinstance(message, dict) else message.to_dict(mode="json", exclude_unset=True)
    )
    out.setdefault("role", "assistant")
    out["role"] = out["role"] or "assistant"
    return out


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, as a server author would read it."""
    return {bool: "boolean", int: "number", float: "number", dict: "object", list: "array",
            str: "string", type(None): "null"}.get(type(value), type(value).__name__)


def malformed_tool_calls(tool_calls: Any) -> str | None:
    """Why a reply's ``tool_calls`` is not the API's shape (a list of objects, each ``function``
    an object), else None. A server that sends another shape broke the API, as one sending no
    ``choices`` did: not the model's answer to score, and every runner reads ``call["function"]``
    as an object. What the model chose inside it (a name that is no tool, arguments that are not
    JSON) is left to the benchmark to score."""
    if tool_calls is None:
        return None
    if not isinstance(tool_calls, list):
        return f"is a JSON {_json_type(tool_calls)}, not an array"
    for index, call in enumerate(tool_calls):
        if not isinstance(call, dict):
            return f"[{index}] is a JSON {_json_type(call)}, not an object"
        function = call.get("function")
        if function is not None and not isinstance(function, dict):
            return f"[{index}].function is a JSON {_json_type(function)}, not an object"
    return None


def _unreadable(exc: Exception) -> str:
    """A 200 the SDK could not read, with the start of its body where the parser kept it: "Expecting
    value: line 1 column 1" alone hides the proxy's login page or gateway error that came back."""
    body = exc.doc if isinstance(exc, json.JSONDecodeError) else None
    return f"unreadable reply: {_short(exc)}" + (f"; the reply began: {_short(body, 300)}" if body else "")


def _short(value: Any, limit: int = 500) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."
