"""Runs one Meta-Bench case: one judged assistant turn under turn-level teacher forcing (Meta-Tool paper).

The model gets the instruction and the ground-truth history up to the turn and answers once; the
reply is parsed into calls (parsing.py). Its well-formed retriever calls (meta_tool, or
ToolSearcher in the keyword baseline) are answered by the retriever, top-k in the paper's tool
turn format, appended to the transcript; every other call is judged against the gold turn. No
tool is executed and the next turn's history is the gold one (Table 2 FM scoring uses the gold
retrieved tools, Fig 18). In the dialogue-history baseline a meta_tool turn makes no model call:
the history itself is the query and FMD is 100 by definition.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.benchmarks.result_builders import CallTally, base_fields, error_result, scored_result
from pytest_toolbench.benchmarks.result_builders import truncate as shared_truncate
from pytest_toolbench.benchmarks.metabench import scoring
from pytest_toolbench.benchmarks.metabench.conversation import build_messages, gold_calls, history_query
from pytest_toolbench.benchmarks.metabench.options import MetaBenchOptions
from pytest_toolbench.benchmarks.metabench.oracle import metabench_oracle
from pytest_toolbench.benchmarks.metabench.parsing import calls_in_message, message_text, uncounted_json
from pytest_toolbench.benchmarks.metabench.prompts import META_TOOL_NAME, TOOLSEARCHER_NAME
from pytest_toolbench.benchmarks.metabench.retriever import MetaBenchRetriever, result_message
from pytest_toolbench.benchmarks.metabench.schema import JudgedTurn
from pytest_toolbench.models.base import (
    CallContext,
    ChatModel,
    ChatRequest,
    ContextLengthExceeded,
    LostTurn,
    ModelCallError,
    Sampling,
)
from pytest_toolbench.results.case_result import CaseResult

BENCHMARK = "metabench"
HR_KS = (1, 3, 5)


def truncate(text: Any, limit: int = 160) -> str:
    return shared_truncate(text, limit, none=None)


@dataclass
class _Reply:
    message: dict[str, Any] | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None


class MetaBenchRunner:
    """Turns a Meta-Bench :class:`Case` into a :class:`CaseResult` (implements ``CaseRunner``)."""

    def __init__(self, retriever: MetaBenchRetriever, options: MetaBenchOptions, sampling: Sampling):
        self.retriever = retriever
        self.options = options
        self.sampling = sampling

    def option_deviations(self) -> list[dict[str, Any]]:
        """Options that differ from their defaults (the paper's reading)."""
        defaults = MetaBenchOptions()
        return [
            {"kind": name, "value": str(getattr(self.options, name)), "default": str(getattr(defaults, name))}
            for name in MetaBenchOptions.model_fields
            if getattr(self.options, name) != getattr(defaults, name)
        ]

    async def run(self, case: Case, model: ChatModel) -> CaseResult:
        judged: JudgedTurn = case.sample
        dialogue, turn = judged.dialogue, judged.turn
        messages = build_messages(dialogue, turn, self.options)
        base = base_fields(case, model, BENCHMARK)
        details: dict[str, Any] = {
            "dialogue_id": dialogue.id,
            "turn": turn,
            "turn_kind": judged.kind,
            "retriever": self.options.retriever,
            "embedder": self.options.embedder,
            "alpha": self.options.alpha,
            "fmd_unit": self.options.fmd_unit,
            "deviations": self.option_deviations(),
        }
        tally: CallTally | None = None
        history_baseline = judged.kind == "meta_tool" and self.options.retriever == "dialogue_history"
        reply = _Reply()
        if not history_baseline:
            request = ChatRequest(messages=messages, sampling=self.sampling)
            ctx = CallContext(case_id=case.id, oracle=metabench_oracle(dialogue, turn, self.options.retriever),
                              benchmark=BENCHMARK)
            try:
                response = await model.complete(request, ctx)
            except ContextLengthExceeded as exc:
                reply.stop_reason = f"{exc.kind}: {exc.message}"
            except (LostTurn, ModelCallError) as exc:
                # Meta-Bench has no upstream evaluation code, so no upstream way to lose a turn:
                # under --upstream-lost-turns too, a failed call is an infrastructure error.
                return error_result(base, exc, details, messages,
                                    f"model call failed: {exc.kind}: {truncate(exc.message)}")
            else:
                reply.message = response.message
                reply.calls = calls_in_message(response.message, self.options.call_reading)
                tally = CallTally()
                # Calls written in the text are this benchmark's answer format, not a failure.
                tally.add(response, counts_as_parse_failure=lambda reason: reason != "unextracted_tool_call")
        transcript = list(messages)
        if reply.message is not None:
            transcript.append(reply.message)
        details["prediction"] = reply.message.get("content") if reply.message else None
        details["predicted_calls"] = reply.calls
        if reply.message is not None and self.options.call_reading == "invocation":
            uncounted = uncounted_json(message_text(reply.message))
            if uncounted:
                details["json_not_counted_as_calls"] = uncounted
        if reply.stop_reason:
            details["stop_reason"] = reply.stop_reason
        rankings = await self._answer_retriever_calls(judged, reply.calls, transcript, details)
        values, passed, why = self._score(judged, reply, rankings, details, history_baseline)
        return scored_result(base, passed, values, details, why, transcript, tally)

    async def _answer_retriever_calls(
        self, judged: JudgedTurn, calls: list[dict[str, Any]], transcript: list[dict[str, Any]],
        details: dict[str, Any],
    ) -> list[list[str]]:
        """Top-k names per well-formed retriever call; the paper-format tool turn is appended."""
        retriever_calls = [c for c in calls if scoring.is_retriever_call(c, self.options.retriever)]
        if not retriever_calls:
            return []
        ranked = [
            await asyncio.to_thread(self.retriever.search, judged.dialogue, c) for c in retriever_calls
        ]
        names = [[n for n, _ in r] for r in ranked]
        details["retrieved"] = [[{"name": n, "score": round(s, 6)} for n, s in r] for r in ranked]
        tool_name = TOOLSEARCHER_NAME if self.options.retriever == "keyword" else META_TOOL_NAME
        transcript.append({"role": "tool", "content": json.dumps(
            result_message(tool_name, names, self.retriever), ensure_ascii=False)})
        return names

    def _score(
        self, judged: JudgedTurn, reply: _Reply, rankings: list[list[str]], details: dict[str, Any],
        history_baseline: bool,
    ) -> tuple[dict[str, float], bool, str]:
        o = self.options
        kind = judged.kind
        pred = reply.calls
        shown = truncate(details["prediction"]) if reply.message is not None else "no reply (" + str(reply.stop_reason) + ")"
        if kind == "chat":
            # A reply cut off by the context window did not abstain: it said nothing.
            correct = reply.message is not None and not scoring.invokes_tool(pred, o.irr_meta_tool)
            details["irr_correct"] = correct
            return {"irr_correct": float(correct)}, correct, f"chat turn: expected no tool call | model: {shown}"
        if kind == "call":
            gold = gold_calls(judged.message, o.retriever)
            schemas = {t["name"]: t for t in judged.dialogue.own_tools}
            m = scoring.match_calls(gold, pred, o.p_acc, schemas, o.extra_calls)
            details.update({"gold_calls": gold, **m})
            values = {k: float(m[k]) for k in ("t_hits", "p_hits", "gt_calls")}
            ok = m["p_hits"] == m["gt_calls"]
            return values, ok, f"gold: {truncate(gold)} | model: {shown}"
        # meta_tool turn: FMD per turn (or per gold tool), HR@k per gold missing tool
        gold_tools = judged.dialogue.gold_tools(judged.turn)
        n = len(gold_tools)
        matching = o.hr_matching
        if history_baseline:
            ranked = self.retriever.search_history(
                judged.dialogue, history_query(judged.dialogue, judged.turn, o.history_query)
            )
            rankings = [[name for name, _ in ranked]]
            details["retrieved"] = [[{"name": nm, "score": round(s, 6)} for nm, s in ranked]]
            fmd, fmd_units = (1, 1) if o.fmd_unit == "turn" else (n, n)  # FMD = 100 by definition
            matching = "retrieved_set"  # one query serves every gold tool of the turn
        else:
            n_calls = sum(scoring.is_retriever_call(c, o.retriever) for c in pred)
            fmd, fmd_units = scoring.fmd(n_calls, n, o.fmd_unit)
        values = {"gt_missing": float(n), "fmd_hits": float(fmd), "fmd_units": float(fmd_units)}
        for k in HR_KS:
            values[f"hr_{k}_hits"] = float(scoring.hits_at_k(rankings, gold_tools, k, matching))
        details.update({"gold_tools": gold_tools, "fmd_hits": fmd, "fmd_units": fmd_units,
                        **{f"hr_{k}_hits": int(values[f'hr_{k}_hits']) for k in HR_KS}})
        # The case judges the model (detection); HR@k measures the retriever and is reported apart.
        return values, fmd == fmd_units, f"expected a {'ToolSearcher' if o.retriever == 'keyword' else 'meta_tool'} call for {gold_tools} | model: {shown}"
