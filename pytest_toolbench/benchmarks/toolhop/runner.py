"""Runs one ToolHop case: the upstream turn loop (``code/evaluation_*.py``) against any ChatModel.

The loop is upstream's: one user message, up to ``max_turns`` (9) model calls, the assistant
message appended as returned, its tool calls executed *sequentially in order* with one
``{"role": "tool", "content", "tool_call_id"}`` message each (no ``name`` field), and a stop when
a reply has no tool calls or at the last turn index (then the conversation ends on tool messages
and there is no answer to score). A reply with neither content nor tool calls ends the loop too,
and upstream's scorer skips it (falsy content): no ``answer_correct``, so its fixed /995
denominator counts it wrong; here it is ``answer_status == "no_answer"``, scored 0. Direct is a
single call without tools.

Deliberate differences from upstream, each recorded in ``details["deviations"]``:

* A :class:`ModelCallError` (the backend already retried) ends the case as an infrastructure
  ERROR with the partial transcript. Upstream lets a failed call silently consume a turn and, if
  all fail, drops the sample (counted wrong by the /995 denominator); here a failing endpoint
  must never look like a wrong answer.
* A context-length overflow (HTTP 400 "maximum context length") is not an infrastructure error:
  like upstream's failed call, it ends the case with no answer, scored wrong; the reason is kept
  in ``details["stop_reason"]``.
* A tool call that times out or kills its sandbox worker is fed back as
  ``an error occured when call <name>: <reason>``. Upstream's ``FunctionTimedOut`` escapes the
  ``except Exception`` of ``get_feedback`` (``code/evaluation_*.py``) and aborts the whole run, so
  there is no upstream text to copy.
* A tool name that is a Python expression (``os.system``, ``f()``) is never evaluated (upstream's
  ``get_feedback`` ``eval``s it: code injection); the call gets ``name '<name>' is not defined``.
  Each such call is recorded as a ``tool_name_expression`` deviation.

Faithful, not deviations:

* Open-model protocol (``--decoding open``, the vLLM default): when upstream's own parser raises
  (``parse_llama31`` on text ``json_repair`` cannot read), upstream's ``test_open`` returns None
  and the turn is consumed; with greedy decoding every retry of the same conversation gives the
  same text, so the sample ends without an answer and is counted wrong by the /995 denominator.
  Here the case stops at once with no answer (``details["stop_reason"]``). Each raw reply is
  kept in ``details["raw_outputs"]``.
* A tool-call argument nested too deep for ``json.loads`` is a wrong call, as upstream: the
  executor's ``except Exception`` feeds back the RecursionError text and the loop goes on. "Too
  deep" is CPython 3.11's limit at upstream's stack depth, on every interpreter
  (:mod:`pytest_toolbench.json_nesting`).
"""

from __future__ import annotations

import ast
import copy
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.benchmarks.result_builders import (
    base_fields,
    error_result,
    option_deviations,
    scored_result,
    truncate,
)
from pytest_toolbench.benchmarks.toolhop import invocation_errors
from pytest_toolbench.benchmarks.toolhop.feedback_nesting import FEEDBACK_NESTING_LIMIT
from pytest_toolbench.benchmarks.toolhop.invocation_errors import ToolCallRecord
from pytest_toolbench.benchmarks.toolhop.options import ToolHopOptions
from pytest_toolbench.benchmarks.toolhop.oracle import toolhop_oracle
from pytest_toolbench.benchmarks.toolhop.prompts import build_messages, build_tools
from pytest_toolbench.benchmarks.toolhop.schema import ToolHopRecord
from pytest_toolbench.benchmarks.toolhop.scoring import (
    final_assistant_content,
    no_answer_reason,
    strict_answer_correct,
    upstream_answer_correct,
)
from pytest_toolbench.benchmarks.toolhop.open_parsers import OpenParseError
from pytest_toolbench.models.base import (
    CallContext,
    ChatModel,
    ChatRequest,
    ChatResponse,
    ContextLengthExceeded,
    LostTurn,
    ModelCallError,
    Sampling,
    Usage,
)
from pytest_toolbench.json_nesting import loads_as_upstream
from pytest_toolbench.results.case_result import CaseResult

BENCHMARK = "toolhop"
EXECUTION_JOB = "pytest_toolbench.benchmarks.toolhop.execution:call_tool"
MINIMAL_FEEDBACK_TEXT = "Failed!"
#: The options recorded as deviations when they differ from upstream (their defaults).
OPTION_NOTES: dict[str, str | None] = {
    "scorer": "not the upstream scorer",
    "minimal_feedback": None,
    "max_turns": None,
    "tool_timeout_s": None,
    "clean_namespace": None,
}


class ToolSandboxLike(Protocol):
    """What the runner needs from ``pytest_toolbench.sandbox.pool.ToolSandbox``."""

    async def arun(self, job: str, payload: dict[str, Any], timeout_s: float) -> Any:
        """Returns an outcome with ``status`` ("ok"/"timeout"/"crashed"), ``value``, ``detail``."""
        ...


class NoToolSandbox:
    """The sandbox of a run whose cases call no tool (only the direct scenario, whose single
    turn executes none): reaching it is a harness bug, which the case reports as an error."""

    async def arun(self, job: str, payload: dict[str, Any], timeout_s: float) -> Any:
        raise RuntimeError("no tool sandbox was started: no collected ToolHop case calls tools")


@dataclass
class _CaseState:
    """Everything accumulated while a case runs."""

    messages: list[dict[str, Any]]
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    model_calls: int = 0
    cached_calls: int = 0
    turn: int = 0
    parse_failures: list[dict[str, Any]] = field(default_factory=list)
    calls: list[ToolCallRecord] = field(default_factory=list)
    deviations: list[dict[str, Any]] = field(default_factory=list)
    masked_feedback: int = 0
    stop_reason: str | None = None
    raw_outputs: list[dict[str, Any]] = field(default_factory=list)
    model_info: dict[str, Any] = field(default_factory=dict)  # model.describe(), for the protocol

    def record_response(self, turn: int, response: ChatResponse) -> None:
        self.model_calls += 1
        self.cached_calls += bool(response.cached)
        self.usage = self.usage + response.usage
        self.latency_s += response.latency_s
        if response.parse_failure is not None:
            self.parse_failures.append({"turn": turn, **response.parse_failure.model_dump()})
        raw_text = getattr(response, "raw_text", None)  # open protocol: what the parser read
        if raw_text is not None:
            self.raw_outputs.append({"turn": turn, "text": raw_text})


def is_error_payload(content: str) -> bool:
    """A tool that *returned* (did not raise) an ``{"error": ...}`` object (read with the
    arguments' nesting limit, so the verdict is the same on every interpreter)."""
    try:
        value = loads_as_upstream(content, FEEDBACK_NESTING_LIMIT)
    except (TypeError, ValueError, RecursionError):
        return False
    return isinstance(value, dict) and "error" in value


def is_name_expression(name: str) -> bool:
    """Whether upstream's ``eval(name)`` would evaluate code that the executor refuses to run.

    Mirrors ``execution.resolve_name``: names that fail to compile (same SyntaxError text),
    identifiers and literals behave as upstream; anything else is the safe deviation.
    """
    source = name.lstrip(" \t")
    try:
        compile(source, "<string>", "eval", dont_inherit=True)
        node = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    if isinstance(node, ast.Name):
        return False
    try:
        ast.literal_eval(node)
        return False
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return True


class ToolHopRunner:
    """Turns a ToolHop :class:`Case` into a :class:`CaseResult` (implements ``CaseRunner``)."""

    def __init__(self, sandbox: ToolSandboxLike, options: ToolHopOptions, sampling: Sampling):
        self.sandbox = sandbox
        self.options = options
        self.sampling = sampling

    # --- the loop ---------------------------------------------------------------------------

    async def run(self, case: Case, model: ChatModel) -> CaseResult:
        record: ToolHopRecord = case.sample  # unpacked once per run (benchmarks/packed.py)
        scenario = case.scenario
        describe = getattr(model, "describe", None)
        state = _CaseState(
            messages=build_messages(scenario, record.question),
            model_info=describe() if callable(describe) else {},
        )
        tools = build_tools(record, scenario)
        oracle = toolhop_oracle(record)
        max_turns = 1 if scenario == "direct" else self.options.max_turns

        for turn in range(max_turns):
            state.turn = turn
            request = ChatRequest(
                messages=copy.deepcopy(state.messages), tools=tools, sampling=self.sampling
            )
            ctx = CallContext(case_id=case.id, turn=state.model_calls, oracle=oracle, benchmark=BENCHMARK)
            try:
                response = await model.complete(request, ctx)
            except LostTurn:
                # --upstream-lost-turns: upstream appends nothing and the turn is consumed (the
                # turn loop of code/evaluation_*.py); the backend recorded it in the case's
                # details["lost_turns"].
                continue
            except ContextLengthExceeded as exc:
                # Upstream: the failed call yields no answer and the sample scores wrong.
                state.stop_reason = f"{exc.kind}: {exc.message}"
                break
            except OpenParseError as exc:
                # Upstream's parser raised: test_open returns None (see the module docstring).
                state.stop_reason = f"{exc.kind}: {exc.message} (upstream: {exc.upstream_exception})"
                state.raw_outputs.append({"turn": turn, "text": exc.raw_text})
                break
            except ModelCallError as exc:
                return self._error_result(case, record, model, state, exc)
            state.record_response(turn, response)
            state.messages.append(response.message)
            if scenario == "direct":
                break
            tool_calls = response.tool_calls
            if not tool_calls:
                break
            for index, call in enumerate(tool_calls):
                try:
                    content = await self._execute(record, call, turn, index, state)
                except ModelCallError as exc:  # the sandbox failed on the harness's side
                    return self._error_result(case, record, model, state, exc)
                state.messages.append(
                    {"role": "tool", "content": content, "tool_call_id": call.get("id")}
                )
        result = self._scored_result(case, record, model, state)
        if oracle.used and scenario != "direct":  # what the gold chain really returned
            result.details["oracle_chain"] = oracle.chain_report(state.calls)
        return result

    async def _execute(
        self, record: ToolHopRecord, call: dict[str, Any], turn: int, index: int, state: _CaseState
    ) -> str:
        """Run one tool call in the sandbox; returns the (possibly masked) tool-message content."""
        function = call.get("function") or {}
        name = function.get("name")
        name = name if isinstance(name, str) else ""
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if is_name_expression(name):
            state.deviations.append(
                {
                    "kind": "tool_name_expression",
                    "turn": turn,
                    "call_index": index,
                    "name": name,
                    "note": "upstream eval()s this name (get_feedback in code/evaluation_*.py: code "
                    "injection); here it is not evaluated and the call gets \"name '...' is not "
                    "defined\"",
                }
            )
        payload = {
            "functions": list(record.functions),
            "name": name,
            "arguments": arguments,
            "clean_namespace": self.options.clean_namespace,
        }
        outcome = await self.sandbox.arun(
            EXECUTION_JOB, payload, timeout_s=self.options.tool_timeout_s
        )
        if outcome.status == "unavailable":
            # Not the tool's doing (its zygote died, was stopped, or would not restart): the
            # case is an infrastructure error, excluded from the metrics, never a wrong answer.
            raise ModelCallError("sandbox_failed", outcome.detail)
        if outcome.status == "ok":
            content = str(outcome.value["content"])
            raised = bool(outcome.value.get("raised"))
        else:
            if outcome.status == "timeout":
                reason = f"timed out after {self.options.tool_timeout_s:g} seconds"
            else:
                reason = f"tool execution crashed ({outcome.detail or outcome.status})"
            content = f"an error occured when call {name}: {reason}"
            raised = True
            state.deviations.append(
                {
                    "kind": f"tool_{outcome.status}",
                    "turn": turn,
                    "call_index": index,
                    "name": name,
                    "detail": outcome.detail,
                    "note": "upstream aborts the run here (func_timeout's FunctionTimedOut escapes the "
                    "except Exception of get_feedback in code/evaluation_*.py); fed back as an error",
                }
            )
        state.calls.append(
            ToolCallRecord(
                turn=turn, index=index, name=name, arguments=arguments, feedback=content, raised=raised
            )
        )
        return self._mask(content, raised, state)

    def _mask(self, content: str, raised: bool, state: _CaseState) -> str:
        """Minimal-feedback ablation (ToolHop paper, Table 5; no released code): failed calls only say "Failed!"."""
        mode = self.options.minimal_feedback
        if mode == "off":
            return content
        if raised or (mode == "exceptions+error_payloads" and is_error_payload(content)):
            state.masked_feedback += 1
            return MINIMAL_FEEDBACK_TEXT
        return content

    # --- results ----------------------------------------------------------------------------

    def option_deviations(self) -> list[dict[str, Any]]:
        """Run-wide departures from the upstream protocol chosen through options."""
        return option_deviations(self.options, OPTION_NOTES)

    def _base(
        self, case: Case, record: ToolHopRecord, model: ChatModel, state: _CaseState
    ) -> dict[str, Any]:
        labels = {"hops": record.hops, "domain": record.domain, "answer_type": record.answer_type}
        return {
            **base_fields(case, model, BENCHMARK, labels),
            "usage": state.usage,
            "latency_s": state.latency_s,
            "model_calls": state.model_calls,
            "cached_calls": state.cached_calls,
            "parse_failures": state.parse_failures,
        }

    def _raw(self, details: dict[str, Any], state: _CaseState) -> dict[str, Any]:
        """Open-protocol facts: which upstream parser read the replies, and the raw replies."""
        info = state.model_info
        if info.get("protocol"):
            details["protocol"] = {
                k: info[k] for k in ("protocol", "family", "open_parser", "stop_token_ids") if k in info
            }
        if state.raw_outputs:
            details["raw_outputs"] = state.raw_outputs
        return details

    def _error_result(
        self, case: Case, record: ToolHopRecord, model: ChatModel, state: _CaseState,
        exc: ModelCallError,
    ) -> CaseResult:
        return error_result(
            self._base(case, record, model, state), exc,
            details=self._raw({
                "question": record.question,
                "gold": record.answer,
                "turn": state.turn,
                "failed_model_call": state.model_calls,
                "deviations": [
                    *self.option_deviations(),
                    *state.deviations,
                    {
                        "kind": "model_call_error",
                        "turn": state.turn,
                        "note": "upstream consumes a turn and continues; here the case is an "
                        "infrastructure error, excluded from metrics",
                    },
                ],
            }, state),
            transcript=state.messages,
            failure_message=f"model call failed at turn {state.turn}: {exc.kind}: "
            f"{truncate(exc.message)}",
        )

    def _scored_result(
        self, case: Case, record: ToolHopRecord, model: ChatModel, state: _CaseState
    ) -> CaseResult:
        messages = state.messages
        upstream = upstream_answer_correct(messages, record.answer)
        strict = strict_answer_correct(messages, record.answer)
        verdict = upstream if self.options.scorer == "upstream" else strict
        # None = upstream sets no answer_correct; its fixed /995 denominator counts it wrong.
        status = "no_answer" if verdict is None else "scored"
        correct = bool(verdict)
        prediction = final_assistant_content(messages)
        values: dict[str, float] = {"answer_correct": 1.0 if correct else 0.0}
        details: dict[str, Any] = {
            "question": record.question,
            "gold": record.answer,
            "prediction": prediction,
            "answer_status": status,
            "scorer": self.options.scorer,
            "upstream_correct": upstream,
            "strict_correct": strict,
            "turn": state.turn,
            "tool_calls": len(state.calls),
            "deviations": [*self.option_deviations(), *state.deviations],
        }
        if state.masked_feedback:
            details["masked_feedback"] = state.masked_feedback
        if state.stop_reason:
            details["stop_reason"] = state.stop_reason
        self._raw(details, state)
        if case.scenario != "direct":
            summary = invocation_errors.summarize(record, state.calls, self.options.error_mode)
            details["invocation_errors"] = summary
            if case.scenario == "mandatory":
                values["query_error"] = 1.0 if summary["query_error"] else 0.0
                values["error_calls"] = float(summary["error_calls"])
                values["calls"] = float(summary["calls"])
        failure_message = None
        if not correct:
            if status == "no_answer":
                answer = no_answer_reason(messages, state.turn, state.stop_reason)
            else:
                answer = truncate(prediction)
            failure_message = (
                f"question: {truncate(record.question)} | gold: {truncate(record.answer, 80)} | "
                f"model: {answer}"
            )
        return scored_result(self._base(case, record, model, state), correct, values, details,
                             failure_message, state.messages)
