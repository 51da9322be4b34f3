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

Per benchmark: each benchmark declares the protocol its runner expects and, for ``parsed``, the
parser that reads its replies (``open_protocol`` / ``open_parser`` on the benchmark,
benchmarks/base.py). The benchmark layer hands the run's declarations down as
:class:`OpenProtocols`, one :class:`BenchmarkOpenProtocol` per benchmark, so this layer names no
benchmark. Each call says whose it is (``CallContext.benchmark``, set by the runner): its reply is
read by that benchmark's parser, with that parser's plan (series, stop ids), never by a parser
chosen from the case id. A call naming no benchmark gets :attr:`OpenProtocols.default`.
``parsed`` is the behaviour above; ``text`` sends the same request but hands the raw text to the
runner unparsed (its own upstream parser, or plain text for requests without tools); ``server``
passes request and reply through untouched.

One base plan per run: the plan of the default's parser sets the backend's body fields (stop
ids) and the cache key's ``open_protocol`` entry, as it did when the run had one parser, so the
keys of the bundled benchmarks are unchanged. A benchmark whose own parser plans other stop ids
sends them in its request's ``extra_body``, which the request fingerprint (and so the cache key)
covers; a benchmark without a parser of its own is planned with the base plan.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

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


#: The protocols a benchmark may declare (benchmarks/base.py ``OPEN_PROTOCOLS``).
PROTOCOLS: tuple[str, ...] = ("parsed", "text", "server")


@dataclass(frozen=True)
class BenchmarkOpenProtocol:
    """One benchmark's declaration: how its replies travel, and the parser of its ``parsed``
    replies (None: none of its own; ``parsed`` then falls back on the server's parser)."""

    protocol: str = "parsed"
    parser: OpenReplyParser | None = None


#: What a call naming a benchmark the run did not declare gets: its raw text, never another
#: benchmark's parser.
UNDECLARED = BenchmarkOpenProtocol("text", None)


@dataclass(frozen=True)
class OpenProtocols:
    """What the run's benchmarks declared for the open protocol, handed down by the benchmark
    layer (``benchmarks/base.py``, :func:`~pytest_toolbench.benchmarks.base.run_open_protocols`)."""

    #: benchmark name -> its declaration.
    benchmarks: Mapping[str, BenchmarkOpenProtocol] = field(default_factory=dict)
    #: A call whose ``CallContext.benchmark`` is None (a model used outside any runner), and the
    #: parser of the run's base plan (stop ids, the cache key's ``open_protocol`` entry).
    default: BenchmarkOpenProtocol = BenchmarkOpenProtocol("parsed", None)

    def of(self, benchmark: str | None) -> BenchmarkOpenProtocol:
        """The declaration a call of ``benchmark`` is served by."""
        if benchmark is None:
            return self.default
        return self.benchmarks.get(benchmark, UNDECLARED)

    @property
    def by_benchmark(self) -> dict[str, str]:
        """benchmark -> protocol, for the run metadata."""
        return {name: d.protocol for name, d in self.benchmarks.items()}

    @property
    def parser(self) -> OpenReplyParser | None:
        """The base plan's parser (``plan_open_protocol(..., parser=protocols.parser)``)."""
        return self.default.parser


@dataclass(frozen=True)
class OpenProtocolPlan:
    """How one parser's calls speak the open protocol: family, parser series, extra body fields."""

    family: str
    series: str | None  # None: no upstream parser for this family -> the server's parser is used
    extra_body: dict[str, Any] = field(default_factory=dict)
    #: The backend the plan was made for (vLLM alone takes stop ids); not part of describe().
    backend: str = field(default="", compare=False)

    def describe(self) -> dict[str, Any]:
        return {
            "protocol": "upstream-open" if self.series else "server-parser",
            "family": self.family,
            "open_parser": self.series,
            **({"stop_token_ids": self.extra_body["stop_token_ids"]}
               if "stop_token_ids" in self.extra_body else {}),
        }

    def for_parser(self, parser: OpenReplyParser | None, who: str = "") -> OpenProtocolPlan:
        """The same model and backend planned with another benchmark's ``parser``."""
        return _plan(self.family, self.backend, parser, who)


def _plan(family: str, backend: str, parser: OpenReplyParser | None, who: str) -> OpenProtocolPlan:
    series = parser.series_for(family) if parser is not None else None
    if series is None:
        log.warning(
            "no upstream open-model parser%s fits the %s family; its replies are parsed by the "
            "server's tool parser (recorded in the run metadata)", f" of {who}" if who else "", family,
        )
    extra_body: dict[str, Any] = {}
    if series and backend == "vllm" and parser is not None:
        stop_ids = parser.stop_token_ids(family, series)
        if stop_ids:
            extra_body["stop_token_ids"] = list(stop_ids)
    return OpenProtocolPlan(family=family, series=series, extra_body=extra_body, backend=backend)


def plan_open_protocol(
    model: str, backend: str, server_describe: dict[str, Any] | None = None,
    parser: OpenReplyParser | None = None,
) -> OpenProtocolPlan:
    """The run's base plan for ``model``: the managed server's family when there is one, else
    by name; ``parser`` is the default's (:attr:`OpenProtocols.parser`)."""
    family = (server_describe or {}).get("family") or detect_family(model)
    return _plan(family, backend, parser, "")


class OpenProtocolModel:
    """Wraps the (cached) endpoint model: shapes requests, parses raw replies as upstream.

    ``plan`` is the run's base plan; ``protocols`` says which protocol and parser each
    benchmark's calls get (``CallContext.benchmark``); without it every call is ``parsed`` with
    the base plan's series."""

    def __init__(self, inner: ChatModel, plan: OpenProtocolPlan, protocols: OpenProtocols | None = None):
        self.inner = inner
        self.plan = plan
        self.name = inner.name
        self.declared = protocols or OpenProtocols()
        self.protocols = self.declared.by_benchmark  # benchmark -> protocol, for describe()
        # A benchmark with a parser of its own has its own plan; one without is on the base plan.
        self.plans: dict[str, OpenProtocolPlan] = {
            name: plan if d.parser is self.declared.default.parser else plan.for_parser(d.parser, name)
            for name, d in self.declared.benchmarks.items() if d.parser is not None
        }

    def plan_for(self, benchmark: str | None) -> OpenProtocolPlan:
        """The plan of ``benchmark``'s calls (None: the default's, the base plan)."""
        return self.plans.get(benchmark, self.plan) if benchmark is not None else self.plan

    def shape(self, request: ChatRequest, protocol: str = "parsed",
              plan: OpenProtocolPlan | None = None) -> ChatRequest:
        """Tools stay in the prompt; ``tool_choice="none"`` keeps the server's parser off. A plan
        whose body fields differ from the base plan's (sent by the backend on every request)
        puts its own in the request, where the fingerprint, and so the cache key, sees them."""
        plan = plan or self.plan
        if protocol == "server" or (protocol == "parsed" and plan.series is None):
            return request
        update: dict[str, Any] = {}
        if request.tools:
            update["tool_choice"] = "none"
        if plan.extra_body != self.plan.extra_body:
            own = {"stop_token_ids": list(plan.extra_body.get("stop_token_ids", []))}
            update["extra_body"] = {**(request.extra_body or {}), **own}
        return request.model_copy(update=update) if update else request

    def _refuse_structured(self, response: ChatResponse, ctx: CallContext) -> None:
        if response.message.get("tool_calls"):
            raise ModelCallError(
                "open_protocol_unsupported",
                f"{self.name} returned structured tool_calls under tool_choice='none' (case "
                f"{ctx.case_id}, turn {ctx.turn}); this endpoint cannot serve the upstream open "
                "protocol: use --decoding open-server-parser or closed",
            )

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        declared = self.declared.of(ctx.benchmark)
        protocol, parser = declared.protocol, declared.parser
        plan = self.plan_for(ctx.benchmark)
        if protocol == "server" or (protocol == "parsed" and (parser is None or plan.series is None)):
            return await self.inner.complete(request, ctx)
        shaped = self.shape(request, protocol, plan)
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
        assert parser is not None and plan.series is not None  # checked above
        message = parser.parse(plan.series, raw, f"{ctx.case_id}|{ctx.turn}")
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
        own = {name: p.describe() for name, p in sorted(self.plans.items()) if p != self.plan}
        if own:  # benchmarks whose own parser plans differently from the base plan above
            out["open_plans"] = own
        return out

    def __getattr__(self, item: str) -> Any:  # stats, cache counters... of the wrapped model
        if item in ("inner", "plan", "plans", "declared", "protocols"):
            raise AttributeError(item)
        return getattr(self.inner, item)
