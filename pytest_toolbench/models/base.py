"""The one interface between benchmarks and models under test.

A benchmark runner builds a :class:`ChatRequest` (OpenAI-format messages and tools plus sampling),
awaits ``model.complete(request, ctx)`` and gets back a :class:`ChatResponse` holding one
OpenAI-format assistant message. Every backend (OpenAI-compatible HTTP, managed vLLM, oracle,
replay) implements :class:`ChatModel`, and so does each layer around one, so that each concern is
written once: the HTTP backend retries its own failed requests; ``factory.build_model`` puts the
managed server's lazy start (``lazy_server.py``), the shared SDK process (``sdk_process/``, which
runs the backend in another process), the response cache (``cache.py``) and the open-model
protocol (``open_protocol.py``) around it; the case runtime adds the recording of replies
(``recording.py``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pytest_toolbench.utf8_safe import make_model_utf8_safe


class Sampling(BaseModel):
    """Decoding parameters sent with every request (part of the cache key)."""

    model_config = ConfigDict(frozen=True)

    temperature: float | None = 0.0
    max_tokens: int | None = 256
    top_p: float | None = None
    seed: int | None = None

    def as_request_kwargs(self) -> dict[str, Any]:
        """The body fields this sampling sets, in field order (None: left out of the body).

        Read from the instance's values, not through ``model_dump``: it runs once per request,
        and the shared SDK process validates a new Sampling with every request, so nothing
        per instance could be kept; the dump cost 2-7x this (timeit, same process)."""
        values = self.__dict__
        return {k: values[k] for k in _SAMPLING_FIELDS if values[k] is not None}


#: Sampling's fields in declaration order: the body's keys keep this order (byte-for-byte
#: the request ``model_dump`` gave).
_SAMPLING_FIELDS: tuple[str, ...] = tuple(Sampling.model_fields)


def preset_sampling(presets: Mapping[str, Sampling], decoding: str, temperature: float | None,
                    max_tokens: int | None) -> Sampling:
    """A benchmark's preset for the run's decoding (``presets``: ``"closed"`` and ``"open"``;
    ``open-server-parser`` decodes as ``open``, only the parser differs), with ``--temperature``
    and ``--max-tokens`` over it where given."""
    preset = presets["closed" if decoding == "closed" else "open"]
    overrides = {"temperature": temperature, "max_tokens": max_tokens}
    return preset.model_copy(update={k: v for k, v in overrides.items() if v is not None})


def content_text(content: Any) -> str:
    """A message's content as text: a string as is, a list of parts (some servers send
    ``[{"type": "text", "text": ...}]``) joined, anything else (None) empty."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class ChatRequest(BaseModel):
    """One chat-completion request in OpenAI wire format."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    sampling: Sampling = Field(default_factory=Sampling)
    #: Server-specific body fields of this request alone (e.g. vLLM's ``chat_template_kwargs``,
    #: through which FamilyTool hands the chat template upstream's raw tool documents).
    extra_body: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _utf8_safe(self) -> "ChatRequest":
        """A tool's output or a model's earlier turn holding a lone surrogate (utf8_safe.py)
        could not be hashed, cached, sent to the SDK process or put in a request body."""
        make_model_utf8_safe(self)
        return self

    def fingerprint(self) -> str:
        """Stable hash of everything in the request that changes the answer."""
        dumped = self.model_dump(mode="json")
        if dumped["extra_body"] is None:  # requests without one keep the keys they always had
            del dumped["extra_body"]
        payload = json.dumps(dumped, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class ParseFailure(BaseModel):
    """The model's text held a tool call the server's parser did not extract, or bad JSON args."""

    reason: Literal["unextracted_tool_call", "invalid_arguments_json"]
    raw_text: str
    detail: str = ""

    @model_validator(mode="after")
    def _utf8_safe(self) -> "ParseFailure":
        """It quotes the reply (utf8_safe.py)."""
        make_model_utf8_safe(self)
        return self


class ChatResponse(BaseModel):
    """One assistant turn. ``message`` is the OpenAI-format assistant message as returned."""

    message: dict[str, Any]
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    cached: bool = False
    model: str = ""
    finish_reason: str | None = None
    parse_failure: ParseFailure | None = None

    @model_validator(mode="after")
    def _utf8_safe(self) -> "ChatResponse":
        """A reply's lone surrogate (a JSON ``\\ud800`` escape, utf8_safe.py) replaced where
        every backend, the cache and the SDK process's client build the response."""
        make_model_utf8_safe(self)
        return self

    @property
    def content(self) -> str | None:
        return self.message.get("content")

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return list(self.message.get("tool_calls") or [])


class CallContext(BaseModel):
    """What a backend may know about the call besides the request.

    ``oracle`` is the benchmark's reference policy (used only by the oracle backend);
    ``case_id`` keys replay files and recordings; ``benchmark`` names the benchmark whose runner
    makes the call, so the open protocol reads the reply with that benchmark's own parser
    (models/open_protocol.py), never one guessed from the case id.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    case_id: str
    turn: int = 0
    oracle: Callable[[ChatRequest], dict[str, Any]] | None = None
    #: The calling benchmark's name (``Benchmark.name``); None: a call made outside any runner
    #: (library use), which gets the open protocol's named default (``OpenProtocols.default``).
    benchmark: str | None = None


class ModelCallError(Exception):
    """An infrastructure failure: the endpoint could not give an answer after retries.

    Scored apart from wrong answers: the case becomes an *error*, excluded from metrics.
    ``kind`` is a short machine-readable tag ("http_500", "timeout", "replay_exhausted", ...).
    """

    def __init__(self, kind: str, message: str, *, attempts: int | None = None,
                 hint: str | None = None):
        """``attempts``: requests sent for this call (None: not an endpoint call); ``hint``: the
        option that would help (reports print it beside the error, results/infra_errors.py)."""
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.attempts = attempts
        self.hint = hint


class LostTurn(ModelCallError):
    """``--upstream-lost-turns``: the call failed as upstream's would (an API error, no retry) and,
    as upstream does, the turn is consumed with nothing appended; the runner goes on."""


class ContextLengthExceeded(ModelCallError):
    """The conversation no longer fits the model's context window.

    Not an infrastructure failure: a longer context would be needed, whatever the endpoint's
    health, so benchmarks score it as the upstream scripts do (the call yields no answer).
    """

    def __init__(self, message: str):
        super().__init__("context_length_exceeded", message)


@runtime_checkable
class ChatModel(Protocol):
    """The async interface every backend implements."""

    #: Name reported in results and used in the cache key (e.g. "gpt-4o", "oracle").
    name: str

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse: ...

    async def aclose(self) -> None: ...

    def describe(self) -> dict[str, Any]:
        """Run metadata: backend, base URL, server args... (goes into the JSON report)."""
        ...


def model_layers(model: Any, through: tuple[str, ...] = ("inner",)) -> Iterator[Any]:
    """``model`` and the models it wraps, outermost first, followed through each layer's own
    attributes named in ``through`` (the instance's: a wrapper's ``__getattr__`` would answer
    for its inner model); at most 32 deep: a chain of wrappers, never a cycle."""
    for _ in range(32):
        if model is None:
            return
        yield model
        own = getattr(model, "__dict__", {})
        model = next((own[name] for name in through if own.get(name) is not None), None)


def limits_its_requests(model: Any) -> bool:
    """Whether ``model`` holds its own requests in flight to ``--concurrency`` (a class that
    says ``LIMITS_REQUESTS = True``: the openai backend's semaphore, the SDK process's), not only
    through how many cases run at once. The scheduler may then start a few cases more than that
    (runtime/scheduler.py), whose requests wait at the model's limit, never at the endpoint.
    Wrappers are looked through (``inner``; a managed server not started yet: its
    ``template``); a model that says nothing is taken to set no limit of its own."""
    return any(getattr(type(layer), "LIMITS_REQUESTS", False)
               for layer in model_layers(model, ("inner", "template")))
