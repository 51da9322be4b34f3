"""Upstream's open-model protocol over an OpenAI-compatible endpoint (ToolHop ``code/evaluation_open.py``).

``evaluation_open.py`` calls ``tokenizer.apply_chat_template(messages, tools=tools)``, generates
greedily (1024 new tokens, the series' eos ids), decodes with ``skip_special_tokens=True`` and
parses the *raw* text with its own ``parse_qwen25`` / ``parse_llama31``. Over HTTP the closest
equivalent is a chat completion with the tools and ``tool_choice="none"``:

* vLLM still renders the chat template **with** the tools under ``tool_choice="none"`` (it drops
  them only when started with ``--exclude-tools-when-tool-choice-none``; checked in vLLM 0.32's
  ``renderers/online_renderer.py``), and
* it returns the generated text untouched (``_extract_tool_calls`` returns the content as is for
  ``tool_choice == "none"``; the Hermes and Llama-3 JSON parsers are not engine-based), with
  ``skip_special_tokens`` on by default, as upstream decodes.

The raw text is then parsed by the parser the benchmark hands down (an :class:`OpenReplyParser`,
ToolHop's ``benchmarks/toolhop/open_parsers.py``), so the conversation holds upstream's assistant
message (``{"role", "content", "tool_calls": list | None}``). The cache sits *inside* this
wrapper: it stores the raw reply, keyed by the shaped request.

Stop ids: on a vLLM backend the parser's ids for the series go in the body as ``stop_token_ids``.
vLLM also stops on the checkpoint's ``generation_config.json`` eos ids, which are the same lists
for the official Qwen2.5 / Llama-3.1 Instruct checkpoints. Other endpoints get no extra field.

Known difference, in the README: vLLM turns the JSON-string ``arguments`` of earlier tool calls
into objects before it renders the template. HF ``apply_chat_template`` (upstream) passes the
string, which Qwen2.5's template then ``tojson``-encodes a second time. Only the echo of earlier
calls in later turns differs.

Per benchmark: those parsers are ToolHop's upstream only. Each benchmark declares the protocol its
runner expects (``open_protocol`` on the benchmark, benchmarks/base.py); the benchmark layer hands
the run's declarations down as :class:`OpenProtocols` (which protocol a call's case id gets, and
the parser of ``parsed``), so this layer names no benchmark. ``parsed`` is the behaviour above;
``text`` sends the same request but hands the raw text to the runner unparsed (its own upstream
parser, or plain text for requests without tools); ``server`` passes request and reply through
untouched.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from pytest_toolbench.models.base import (
    CallContext,
    ChatModel,
    ChatRequest,
    ChatResponse,
    ModelCallError,
    content_text,
)
from pytest_toolbench.models.model_families import detect_family
from pytest_toolbench.models.parse_check import detect_parse_failure

log = logging.getLogger(__name__)


class OpenProtocolResponse(ChatResponse):
    """A parsed reply that also carries the raw text upstream's parser read."""

    raw_text: str = ""


class OpenReplyParser(Protocol):
    """The hook a benchmark provides for the ``parsed`` protocol: its upstream's own reply parsers."""

    def series_for(self, family: str) -> str | None:
        """The parser series for a model family; None: none fits (the server's parser is used)."""
        ...

    def stop_token_ids(self, family: str, series: str) -> tuple[int, ...] | None:
        """The stop ids upstream generates with for ``series`` (None: send none)."""
        ...

    def parse(self, series: str, text: str, call_seed: str) -> dict[str, Any]:
        """Upstream's assistant message for the raw ``text`` (call ids derived from ``call_seed``,
        so requests stay cacheable); may raise a ModelCallError where upstream's parser fails."""
        ...


#: Calls whose case id names no benchmark (library use, direct tests) keep the original behaviour.
LEGACY_PROTOCOL = "parsed"


@dataclass(frozen=True)
class OpenProtocols:
    """What the run's benchmarks declared for the open protocol, handed down by the benchmark
    layer (``benchmarks/base.py``, :func:`~pytest_toolbench.benchmarks.base.run_open_protocols`)."""

    #: case id -> the protocol its benchmark declared (parsed / text / server).
    resolve: Callable[[str], str] = lambda case_id: LEGACY_PROTOCOL
    #: benchmark -> protocol, for the run metadata.
    by_benchmark: dict[str, str] = field(default_factory=dict)
    #: The parser of the ``parsed`` protocol (None: no benchmark provides one).
    parser: OpenReplyParser | None = None


@dataclass(frozen=True)
class OpenProtocolPlan:
    """How one run speaks the open protocol: family, parser series, extra body fields."""

    family: str
    series: str | None  # None: no upstream parser for this family -> the server's parser is used
    extra_body: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {
            "protocol": "upstream-open" if self.series else "server-parser",
            "family": self.family,
            "open_parser": self.series,
            **({"stop_token_ids": self.extra_body["stop_token_ids"]}
               if "stop_token_ids" in self.extra_body else {}),
        }


def plan_open_protocol(
    model: str, backend: str, server_describe: dict[str, Any] | None = None,
    parser: OpenReplyParser | None = None,
) -> OpenProtocolPlan:
    """The plan for ``model``: the managed server's family when there is one, else by name;
    ``parser`` is the ``parsed`` protocol's (:class:`OpenProtocols`)."""
    family = (server_describe or {}).get("family") or detect_family(model)
    series = parser.series_for(family) if parser is not None else None
    if series is None:
        log.warning(
            "no upstream open-model parser fits the %s family; its replies are parsed by the "
            "server's tool parser (recorded in the run metadata)", family,
        )
    extra_body: dict[str, Any] = {}
    if series and backend == "vllm" and parser is not None:
        stop_ids = parser.stop_token_ids(family, series)
        if stop_ids:
            extra_body["stop_token_ids"] = list(stop_ids)
    return OpenProtocolPlan(family=family, series=series, extra_body=extra_body)


class OpenProtocolModel:
    """Wraps the (cached) endpoint model: shapes requests, parses raw replies as upstream.

    ``protocols`` says which protocol a call's case id gets and which parser reads ``parsed``
    replies; without it every call is ``parsed``."""

    def __init__(self, inner: ChatModel, plan: OpenProtocolPlan, protocols: OpenProtocols | None = None):
        protocols = protocols or OpenProtocols()
        self.inner = inner
        self.plan = plan
        self.name = inner.name
        self.resolve = protocols.resolve
        self.parser = protocols.parser
        self.protocols = dict(protocols.by_benchmark)  # benchmark -> protocol, for describe()

    def shape(self, request: ChatRequest, protocol: str = LEGACY_PROTOCOL) -> ChatRequest:
        """Tools stay in the prompt; ``tool_choice="none"`` keeps the server's parser off."""
        if protocol == "server" or not request.tools:
            return request
        if protocol == "parsed" and self.plan.series is None:
            return request
        return request.model_copy(update={"tool_choice": "none"})

    def _refuse_structured(self, response: ChatResponse, ctx: CallContext) -> None:
        if response.message.get("tool_calls"):
            raise ModelCallError(
                "open_protocol_unsupported",
                f"{self.name} returned structured tool_calls under tool_choice='none' (case "
                f"{ctx.case_id}, turn {ctx.turn}); this endpoint cannot serve the upstream open "
                "protocol: use --decoding open-server-parser or closed",
            )

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        protocol = self.resolve(ctx.case_id)
        if protocol == "server" or (protocol == "parsed" and self.plan.series is None):
            return await self.inner.complete(request, ctx)
        shaped = self.shape(request, protocol)
        response = await self.inner.complete(shaped, ctx)
        if protocol == "text":
            # The runner parses the raw text itself (or reads plain text): hand it over as is.
            dumped = response.model_dump()
            if shaped.tools:  # the server's parser was off on purpose: nothing it missed
                self._refuse_structured(response, ctx)
                dumped["parse_failure"] = None
            return OpenProtocolResponse(**dumped, raw_text=content_text(response.message.get("content")))
        self._refuse_structured(response, ctx)
        raw = content_text(response.message.get("content"))
        assert self.parser is not None  # a plan has a series only from a parser
        message = self.parser.parse(self.plan.series, raw, f"{ctx.case_id}|{ctx.turn}")
        failure = detect_parse_failure(
            message if message.get("tool_calls") else {"role": "assistant", "content": raw}
        )
        return OpenProtocolResponse(
            **{**response.model_dump(exclude={"message", "parse_failure"}),
               "message": message, "parse_failure": failure, "raw_text": raw},
        )

    async def aclose(self) -> None:
        await self.inner.aclose()

    def describe(self) -> dict[str, Any]:
        out = {**self.inner.describe(), **self.plan.describe()}
        if self.protocols:
            out["open_protocols"] = dict(self.protocols)
        return out

    def __getattr__(self, item: str) -> Any:  # stats, cache counters... of the wrapped model
        if item in ("inner", "plan", "resolve", "parser", "protocols"):
            raise AttributeError(item)
        return getattr(self.inner, item)
