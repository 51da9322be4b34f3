"""Runs one ToolBeHonest case: one prompt, one reply, the level's upstream score (``utils/process.py``, ``utils/evaluation_func.py``).

One user message, no system prompt, temperature 0 and upstream's max_tokens (1024 + top_p 0.95
for open-weight models on vLLM, 2048 for OpenAI; upstream ``utils/generation_func.py``). Upstream turns any failed call into
an empty reply, scored as a wrong answer; here a :class:`ModelCallError` (after the backend's
retries) is an infrastructure ERROR excluded from metrics, recorded as a deviation, while a
context-length overflow, and with ``--upstream-lost-turns`` any failed call (no retry there
with ``--max-retries 0``), is scored like upstream's empty reply.

Values a case reports (the unsolvable variant feeds the leaderboard, ``utils/calculate_metrics.py``):
``l1_em`` / ``l2_pr`` / ``l3_pr`` / ``l3_ms`` on unsolvable cases, ``*_solvable`` on solvable
ones, and ``overall_sum`` / ``overall_n`` (the case's share of upstream's pooled Overall: one
number for L1 and L2, PR and MS for L3) so a ratio metric gives the pooled mean. An unsolvable
gold plan without an UnsolvableQuery step gives ``l3_ms`` nan and so ``overall_sum`` nan, as
upstream (see :func:`unsolvable_ms_values`).
"""

from __future__ import annotations

import math
from typing import Any

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.benchmarks.result_builders import (
    CallTally,
    base_fields,
    error_result,
    option_deviations,
    scored_result,
)
from pytest_toolbench.benchmarks.toolbehonest.options import ToolBeHonestOptions
from pytest_toolbench.benchmarks.toolbehonest.oracle import toolbehonest_oracle
from pytest_toolbench.benchmarks.toolbehonest.prompts import build_messages
from pytest_toolbench.benchmarks.toolbehonest.schema import ToolBHRecord
from pytest_toolbench.benchmarks.toolbehonest.scoring import (
    PlanScore,
    ScoringError,
    ToolMatcher,
    exact_match,
    extract_l1,
    extract_l2,
    extract_l3,
    score_l2,
    score_l3,
)
from pytest_toolbench.models.base import (
    CallContext,
    ChatModel,
    ChatRequest,
    ContextLengthExceeded,
    LostTurn,
    ModelCallError,
    Sampling,
    content_text,
)
from pytest_toolbench.results.case_result import CaseResult, InfraError

BENCHMARK = "toolbehonest"
#: The options recorded as deviations when they differ from upstream (their defaults).
OPTION_NOTES: dict[str, str | None] = {
    "progress_rate": "not the paper's numbers",
    "embedder": "not MiniLM",
    "empty_ms": "records without an UnsolvableQuery step left out of L3-MS and the Overall "
    "(upstream: nan)",
}
#: details["matching_score"] of an unsolvable L3 case whose MS is nan upstream.
EMPTY_MS_NOTE = "nan: the unsolvable gold plan has no UnsolvableQuery step (upstream: np.mean of no scores)"


def upstream_sampling(backend: str, options: ToolBeHonestOptions, base: Sampling | None = None) -> Sampling:
    """Upstream ``utils/generation_func.py``: T=0; vLLM gets max_tokens 1024 and top_p 0.95,
    OpenAI max_tokens 2048.
    ``base`` carries the user's explicit --temperature/--max-tokens overrides, if any."""
    if backend == "openai":
        sampling = Sampling(temperature=0.0, max_tokens=2048, top_p=None)
    else:
        sampling = Sampling(temperature=0.0, max_tokens=1024, top_p=0.95)
    update: dict[str, Any] = {}
    if base is not None:
        update.update({k: v for k, v in base.model_dump().items() if v is not None})
    if options.max_tokens is not None:
        update["max_tokens"] = options.max_tokens
    return sampling.model_copy(update=update)


def score_reply(
    record: ToolBHRecord,
    level: int,
    solvable: bool,
    reply: str,
    matcher: ToolMatcher | None,
    kind: str = "hard",
    empty_ms: str = "nan",
) -> tuple[dict[str, float], dict[str, Any]]:
    """The case's values and scoring details for one reply (raises ScoringError where upstream
    itself would crash)."""
    suffix = "_solvable" if solvable else ""
    if level == 1:
        pred = extract_l1(reply)
        em = float(exact_match(pred, "solvable" if solvable else "unsolvable"))
        values = {f"l1_em{suffix}": em}
        details: dict[str, Any] = {"prediction": pred, "gold": "solvable" if solvable else "unsolvable"}
        if not solvable:
            values.update(overall_sum=em, overall_n=1.0)
        return values, details
    if level == 2:
        lines = extract_l2(reply)
        score = score_l2(lines, record, solvable, kind)  # type: ignore[arg-type]
        values = {f"l2_pr{suffix}": score.progress_rate}
        details = {"prediction": lines, "gold": record.gold(solvable), "condition": score.condition}
        if not solvable:
            values.update(overall_sum=score.progress_rate, overall_n=1.0)
        return values, details
    texts, tools = extract_l3(reply)
    score = score_l3(texts, tools, record, solvable, matcher, kind)  # type: ignore[arg-type]
    values = {f"l3_pr{suffix}": score.progress_rate}
    details = {
        "prediction": tools,
        "subgoals": texts,
        "gold": record.gold(solvable),
        "condition": score.condition,
        "scorers": score.scorers,
    }
    if not solvable:
        values.update(unsolvable_ms_values(score, empty_ms, details))
    return values, details


def unsolvable_ms_values(score: PlanScore, empty_ms: str, details: dict[str, Any]) -> dict[str, float]:
    """An unsolvable L3 case's MS and its share of the pooled Overall (``utils/calculate_metrics.py``).

    Upstream's aggregation reads every unsolvable sample's ``scorers``; for a gold plan without
    an UnsolvableQuery step that is ``""``, and np.mean of no scores is nan, so the case's MS and
    ``overall_sum`` are nan and carry into the scenario MS and the Overall as they do upstream
    (``empty_ms="nan"``, the default). ``empty_ms="skip"`` leaves the case out of both."""
    ms = score.matching_score
    if ms is None:  # upstream "": no UnsolvableQuery step in the gold plan
        ms = math.nan
    if math.isnan(ms):
        details["matching_score"] = EMPTY_MS_NOTE
        if empty_ms == "skip":
            details["matching_score"] += " (left out: --toolbehonest-empty-ms skip)"
            return {"overall_sum": score.progress_rate, "overall_n": 1.0}
    return {"l3_ms": ms, "overall_sum": score.progress_rate + ms, "overall_n": 2.0}


class ToolBeHonestRunner:
    """Turns a ToolBeHonest :class:`Case` into a :class:`CaseResult` (``CaseRunner``)."""

    def __init__(self, options: ToolBeHonestOptions, sampling: Sampling, matcher: ToolMatcher | None):
        self.options = options
        self.sampling = sampling
        self.matcher = matcher

    def option_deviations(self) -> list[dict[str, Any]]:
        return option_deviations(self.options, OPTION_NOTES)

    async def run(self, case: Case, model: ChatModel) -> CaseResult:
        record: ToolBHRecord = case.sample
        level = int(case.labels["level"])
        solvable = bool(case.labels["solvable"])
        messages = build_messages(record, level, solvable, self.options.lang)
        request = ChatRequest(messages=messages, sampling=self.sampling)
        ctx = CallContext(
            case_id=case.id, turn=0, oracle=toolbehonest_oracle(record, level, solvable),
            benchmark=BENCHMARK,
        )
        base = base_fields(case, model, BENCHMARK)
        deviations = self.option_deviations()
        stop_reason = None
        try:
            response = await model.complete(request, ctx)
        except (ContextLengthExceeded, LostTurn) as exc:
            # upstream: "" on any error; a LostTurn (--upstream-lost-turns) is such an error
            reply, stop_reason = "", f"{exc.kind}: {exc.message}"
            response = None
        except ModelCallError as exc:
            deviations.append(
                {"kind": "model_call_error", "note": "upstream scores an empty reply; here the "
                 "case is an infrastructure error, excluded from metrics"}
            )
            return error_result(base, exc, {"deviations": deviations}, messages,
                                f"model call failed: {exc.kind}: {exc.message[:200]}")
        tally = CallTally()
        if response is not None:
            reply = content_text(response.message.get("content"))
            transcript = [*messages, response.message]
            tally.add(response)
        else:
            transcript = list(messages)
        try:
            values, details = score_reply(
                record, level, solvable, reply, self.matcher, self.options.progress_rate,
                self.options.empty_ms,
            )
        except ScoringError as exc:
            return error_result(base, InfraError(kind="scoring_error", message=str(exc)),
                                {"reply": reply, "deviations": deviations}, transcript,
                                f"upstream would crash scoring this case: {exc}")
        details.update(level=level, solvable=solvable, subtask=record.subtask, deviations=deviations)
        if stop_reason:
            details["stop_reason"] = stop_reason
        scores = [v for k, v in values.items() if not k.startswith("overall")]
        # a nan MS is the data's (no UnsolvableQuery step to match), not the reply's
        passed = all(v == 1.0 for v in scores if not math.isnan(v))
        failure = None
        if not passed:
            shown = " ".join(reply.split())[:200] or "<empty reply>"
            failure = (
                f"L{level} {'solvable' if solvable else 'unsolvable'}: "
                + ", ".join(f"{k}={v:.3f}" for k, v in values.items() if not k.startswith("overall"))
                + (f" ({details['condition']})" if details.get("condition") else "")
                + f" | gold: {details['gold']} | model: {shown}"
            )
        return scored_result(base, passed, values, details, failure, transcript, tally)
