"""Where a sentence of the paper fixes a metric, the default follows it and the earlier reading is a
named option that each case records as a deviation. Through the runner, on the bundled records,
with a retriever of fixed rankings (no embedder), so every value below is computed by hand."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

import pytest

from pytest_toolbench.benchmarks.metabench.benchmark import METABENCH, SCENARIOS
from pytest_toolbench.benchmarks.options import flag_name
from pytest_toolbench.benchmarks.metabench.options import MetaBenchOptions
from pytest_toolbench.benchmarks.metabench.runner import MetaBenchRunner
from pytest_toolbench.models.base import ChatResponse, Sampling
from pytest_toolbench.models.oracle import OracleModel
from pytest_toolbench.results.aggregate import aggregate
from pytest_toolbench.results.case_result import CaseResult, Outcome

#: What the fixed retriever returns for every meta_tool query (top 5 of the pool).
RANKING = ["get_air_quality_index", "get_uv_index", "translate_text", "get_humidity", "get_pollen_count"]


class FixedRetriever:
    """The part of MetaBenchRetriever the runner uses: ``search`` and ``tool``."""

    def __init__(self, rankings: dict[str, list[str]] | None = None):
        self.rankings = rankings or {}

    def search(self, dialogue: Any, call: dict[str, Any]) -> list[tuple[str, float]]:
        names = self.rankings.get(call["parameters"]["tool_description"], RANKING)
        return [(name, 1.0 - i / 10) for i, name in enumerate(names)]

    def tool(self, name: str) -> dict[str, Any]:
        return {"name": name, "description": name.replace("_", " ")}


class Scripted:
    name = "scripted"

    def __init__(self, reply: Callable[[Any], str]):
        self.reply = reply

    async def complete(self, request, ctx):
        return ChatResponse(message={"role": "assistant", "content": self.reply(request)})


def cases(**labels: str):
    return [c for c in METABENCH.load_cases(None, SCENARIOS) if all(c.labels[k] == v for k, v in labels.items())]


def case(case_id: str):
    return next(c for c in METABENCH.load_cases(None, SCENARIOS) if c.id == case_id)


def run(model: Any, chosen: list, retriever: FixedRetriever | None = None, **options: Any) -> list[CaseResult]:
    runner = MetaBenchRunner(retriever or FixedRetriever(), MetaBenchOptions(**options), Sampling())

    async def go():
        return [await runner.run(c, model) for c in chosen]

    return asyncio.run(go())


def metrics(results: list[CaseResult]) -> dict[tuple[str, str], float]:
    run_metrics = aggregate(results, {"metabench": METABENCH.metrics}, {"metabench": ()}, n_boot=10)
    return {(s.scenario, name): round(m.value, 4) for s in run_metrics.scenarios
            for name, m in s.metrics.items() if m.value is not None}


def deviation(kind: str, value: str, default: str) -> list[dict[str, str]]:
    return [{"kind": kind, "value": value, "default": default}]


CODE_CHAT = "metabench-simple-open-world-chat-0003-t1"  # glaive-style: answers with a JSON example
BMI = "metabench-simple-closed-world-single_tool_call-0001-t1"  # calculate_bmi(weight_kg=72, height_m=1.8)
AQI_UV = "metabench-hard-open-world-function_missing-0001-t1"  # two missing tools, one turn
META_CALL = json.dumps([{"name": "meta_tool", "parameters": {
    "tool_description": "Get the air quality and the UV index of a city", "param_description": ["The city"]}}])


def test_irr_a_json_example_in_a_chat_answer_is_no_invocation():
    """Paper: "the invocation of any tool is considered an error ... abstaining from tool
    invocation is deemed correct". The gold answer of the bundled chat turn shows
    {"name": "John", "age": 30} in a code fence: the oracle abstains by default, and errs under
    --metabench-call-reading any_json (the earlier reading)."""
    [ok] = run(OracleModel(), [case(CODE_CHAT)])
    assert ok.outcome is Outcome.PASSED and ok.values == {"irr_correct": 1.0}
    assert ok.details["predicted_calls"] == [] and ok.details["deviations"] == []
    assert ok.details["json_not_counted_as_calls"] == [{"name": "John", "parameters": {}}]
    [loose] = run(OracleModel(), [case(CODE_CHAT)], call_reading="any_json")
    assert loose.outcome is Outcome.FAILED and loose.values == {"irr_correct": 0.0}
    assert loose.details["predicted_calls"] == [{"name": "John", "parameters": {}}]
    assert loose.details["deviations"] == deviation("call_reading", "any_json", "invocation")
    # Over the nine chat turns: a model that always shows the same JSON example.
    chats = cases(category="chat")
    assert len(chats) == 9
    example = "For example:\n```json\n{\"name\": \"John\", \"age\": 30}\n```"
    values = metrics(run(Scripted(lambda req: example), chats))
    assert {v for (s, n), v in values.items() if n == "irr"} == {1.0}
    values = metrics(run(Scripted(lambda req: example), chats, call_reading="any_json"))
    assert {v for (s, n), v in values.items() if n == "irr"} == {0.0}
    # A real invocation still errs: the Figure 10 format, and a call after the python tag.
    for reply in (META_CALL, 'I need a tool.<|python_tag|>' + META_CALL):
        [r] = run(Scripted(lambda req: reply), [case(CODE_CHAT)])
        assert r.values == {"irr_correct": 0.0}, reply


def test_a_fenced_call_is_no_call_in_call_turns_either():
    """One reading for every turn: a reply is an invocation or it is not, so fenced JSON cannot
    count as a call for T-Acc and as abstention for IRR."""
    fenced = '```json\n[{"name": "calculate_bmi", "parameters": {"weight_kg": 72, "height_m": 1.8}}]\n```'
    [r] = run(Scripted(lambda req: fenced), [case(BMI)])
    assert (r.values["t_hits"], r.values["p_hits"], r.values["gt_calls"]) == (0.0, 0.0, 1.0)
    [loose] = run(Scripted(lambda req: fenced), [case(BMI)], call_reading="any_json")
    assert (loose.values["t_hits"], loose.values["p_hits"]) == (1.0, 1.0)


def test_p_acc_72_point_0_matches_72_in_value():
    """Paper: "all parameters of the invoked tool precisely match those of the ground truth in
    value". The gold weight is 72; the reply's 72.0 is the same value (default) but a different
    JSON type (--metabench-p-acc strict, an earlier default)."""
    reply = '[{"name": "calculate_bmi", "parameters": {"weight_kg": 72.0, "height_m": 1.8}}]'
    [r] = run(Scripted(lambda req: reply), [case(BMI)])
    assert r.outcome is Outcome.PASSED and (r.values["t_hits"], r.values["p_hits"]) == (1.0, 1.0)
    [strict] = run(Scripted(lambda req: reply), [case(BMI)], p_acc="strict")
    assert strict.outcome is Outcome.FAILED and (strict.values["t_hits"], strict.values["p_hits"]) == (1.0, 0.0)
    assert strict.details["deviations"] == deviation("p_acc", "strict", "value")
    # A string is not a number, and true is not 1, under the default.
    for weight in ('"72"', "true"):
        text = '[{"name": "calculate_bmi", "parameters": {"weight_kg": %s, "height_m": 1.8}}]' % weight
        [r] = run(Scripted(lambda req: text), [case(BMI)])
        assert r.values["p_hits"] == 0.0, weight


def test_fmd_per_turn_and_hr_within_the_retrieved_set_at_one_turn():
    """One meta_tool call for the turn's two missing tools (air quality, UV index), whose top 5
    is [humidity, air quality, UV, pollen, weather]. FMD (paper: "the success rate of this
    meta-tool function calling"): 1 of 1 turn; per gold tool (fmd_unit=gold_tool) 1 of 2.
    HR@k (paper: "hit rate of the ground truth tool within the retrieved tool set"): top-1
    {humidity} holds neither, top-3 and top-5 hold both -> 0, 2, 2 of 2; bipartite (each call
    serves one gold tool) -> 0, 1, 1."""
    ranked = ["get_humidity", "get_air_quality_index", "get_uv_index", "get_pollen_count", "get_weather_forecast"]
    retriever = FixedRetriever({"Get the air quality and the UV index of a city": ranked})
    [r] = run(Scripted(lambda req: META_CALL), [case(AQI_UV)], retriever)
    assert r.outcome is Outcome.PASSED
    assert r.values == {"gt_missing": 2.0, "fmd_hits": 1.0, "fmd_units": 1.0,
                        "hr_1_hits": 0.0, "hr_3_hits": 2.0, "hr_5_hits": 2.0}
    [old] = run(Scripted(lambda req: META_CALL), [case(AQI_UV)], retriever, fmd_unit="gold_tool", hr_matching="bipartite")
    assert old.outcome is Outcome.FAILED  # one call for two gold tools
    assert old.values == {"gt_missing": 2.0, "fmd_hits": 1.0, "fmd_units": 2.0,
                          "hr_1_hits": 0.0, "hr_3_hits": 1.0, "hr_5_hits": 1.0}
    assert old.details["deviations"] == [
        {"kind": "fmd_unit", "value": "gold_tool", "default": "turn"},
        {"kind": "hr_matching", "value": "bipartite", "default": "retrieved_set"},
    ]


def test_fmd_and_hr_over_the_hard_function_missing_turns():
    """The four hard meta_tool turns need (aqi, uv), (pollen), (translate, synonyms),
    (earthquake, mortgage): 7 gold tools. One call per turn, top 5 = RANKING = [aqi, uv,
    translate, humidity, pollen]. FMD: 4/4 turns (gold_tool: 4/7). Retrieved set: HR@1 = aqi
    = 1/7; HR@3 = aqi, uv, translate = 3/7; HR@5 = + pollen = 4/7. Bipartite: HR@1 1/7; HR@3
    aqi-or-uv, translate = 2/7; HR@5 + pollen = 3/7."""
    hard = cases(difficulty="hard", turn_kind="meta_tool")
    assert len(hard) == 4
    key = "hard-open-function_missing"
    values = metrics(run(Scripted(lambda req: META_CALL), hard))
    assert [values[(key, m)] for m in ("fmd", "hr_1", "hr_3", "hr_5")] == [1.0] + [round(n / 7, 4) for n in (1, 3, 4)]
    values = metrics(run(Scripted(lambda req: META_CALL), hard, fmd_unit="gold_tool", hr_matching="bipartite"))
    assert [values[(key, m)] for m in ("fmd", "hr_1", "hr_3", "hr_5")] == [round(n / 7, 4) for n in (4, 1, 2, 3)]


@pytest.mark.parametrize("field, default", [
    ("call_reading", "invocation"), ("p_acc", "value"), ("fmd_unit", "turn"), ("hr_matching", "retrieved_set"),
])
def test_defaults_follow_the_paper_and_are_flags(field, default):
    assert getattr(MetaBenchOptions(), field) == default
    info = MetaBenchOptions.model_fields[field]
    assert flag_name("metabench", field, info) == f"--metabench-{field.replace('_', '-')}"
