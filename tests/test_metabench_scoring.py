"""Meta-Bench metrics on the bundled dialogues, against values computed by hand (paper §3.3.2 and
Figures 18-19): each default that follows a sentence of the paper beside its named alternative."""

from __future__ import annotations

import pytest

from pytest_toolbench.benchmarks.metabench import scoring
from pytest_toolbench.benchmarks.metabench.benchmark import METABENCH
from pytest_toolbench.benchmarks.metabench.parsing import calls_in_message
from pytest_toolbench.benchmarks.metabench.tables import table2, table3
from pytest_toolbench.results.case_result import CaseResult, Outcome


@pytest.fixture(scope="module")
def dialogues():
    return {d.id: d for d in METABENCH.load_dialogues(None)}


def gold(d, turn):
    return [c.as_json() for c in d.messages[turn].tool_calls]


def schemas(d):
    return {t["name"]: t for t in d.own_tools}


def test_parallel_calls_are_order_insensitive_and_extras_not_penalised(dialogues):
    d = dialogues["hard/open-world/function_missing/0002"]
    g = gold(d, 3)  # translate fr, translate es, find_synonyms
    assert scoring.match_calls(g, list(reversed(g))) == {"t_hits": 3, "p_hits": 3, "gt_calls": 3, "extra_calls": 0}
    pred = [
        {"name": "translate_text", "parameters": {"text": "Where is the train station?", "target_language": "FR"}},
        {"name": "find_synonyms", "parameters": {"word": "station"}},
        {"name": "get_user_input", "parameters": {}},
    ]
    # T: translate (1 of 2) + synonyms = 2 of 3; P: "FR" != "fr" strictly -> only synonyms = 1.
    assert scoring.match_calls(g, pred, "strict", schemas(d)) == {"t_hits": 2, "p_hits": 1, "gt_calls": 3, "extra_calls": 1}
    assert scoring.match_calls(g, pred, "lenient", schemas(d))["p_hits"] == 2
    # meta_tool instead of the real tool is a miss.
    assert scoring.match_calls(g[2:], [{"name": "meta_tool", "parameters": {}}])["t_hits"] == 0
    # extra_calls="penalise": any unmatched predicted call voids the turn's hits.
    both = [*g, {"name": "translate_text", "parameters": {"text": "x", "target_language": "de"}}]
    assert scoring.match_calls(g, both, "strict", schemas(d), "penalise") == {"t_hits": 0, "p_hits": 0, "gt_calls": 3, "extra_calls": 1}
    assert scoring.match_calls(g, both, "strict", schemas(d))["p_hits"] == 3
    assert scoring.match_calls(g, list(g), "strict", schemas(d), "penalise")["p_hits"] == 3


def test_p_acc_matches_in_value_by_default_strict_and_lenient_are_options(dialogues):
    """Paper: parameters "precisely match those of the ground truth in value". 72.0 is the value
    72; "72" is text and true is not 1. strict (an earlier default) compares JSON types too."""
    bmi = dialogues["simple/closed-world/single_tool_call/0001"]
    g = gold(bmi, 1)  # calculate_bmi(weight_kg=72, height_m=1.8)
    for weight, value, strict, lenient in ((72, 1, 1, 1), (72.0, 1, 0, 1), ("72", 0, 0, 1), (73, 0, 0, 0)):
        pred = [{"name": "calculate_bmi", "parameters": {"weight_kg": weight, "height_m": 1.8}}]
        assert scoring.match_calls(g, pred, schemas=schemas(bmi))["p_hits"] == value, weight
        assert scoring.match_calls(g, pred, "strict", schemas(bmi))["p_hits"] == strict, weight
        assert scoring.match_calls(g, pred, "lenient", schemas(bmi))["p_hits"] == lenient, weight
    # A parallel turn with a list argument: recipes(ingredients=[...], max_results=2),
    # nutrition(broccoli, 150), nutrition(rice, 200). Floats for the integers match in value.
    fe = dialogues["hard/open-world/function_existing/0001"]
    g = gold(fe, 1)
    pred = [dict(c, parameters=dict(c["parameters"])) for c in g]
    pred[0]["parameters"]["max_results"] = 2.0
    pred[1]["parameters"]["serving_grams"] = 150.0
    assert scoring.match_calls(g, pred, schemas=schemas(fe))["p_hits"] == 3
    assert scoring.match_calls(g, pred, "strict", schemas(fe))["p_hits"] == 1  # only rice's 200
    pred[0]["parameters"]["ingredients"] = ["rice", "chicken", "broccoli"]  # a list's order is its value
    assert scoring.match_calls(g, pred, schemas=schemas(fe))["p_hits"] == 2
    trip = dialogues["hard/closed-world/multi_tool_call/0002"]
    g = gold(trip, 1)[:1]  # calculate_distance(origin=Berlin, destination=Prague); unit defaults to km
    pred = [{"name": "calculate_distance", "parameters": {"origin": " berlin", "destination": "Prague", "unit": "km"}}]
    assert scoring.match_calls(g, pred, schemas=schemas(trip))["p_hits"] == 0
    assert scoring.match_calls(g, pred, "strict", schemas(trip))["p_hits"] == 0
    assert scoring.match_calls(g, pred, "lenient", schemas(trip))["p_hits"] == 1
    pred[0]["parameters"]["unit"] = "miles"
    assert scoring.match_calls(g, pred, "lenient", schemas(trip))["p_hits"] == 0


def test_same_value_booleans_nulls_and_nesting():
    """ToolACE-style arguments: a flag, a null, nested objects and lists."""
    gold = {"city": "Lisbon", "include_hourly": True, "filters": {"max_temp_c": 30, "alerts": [1, 2]}, "lang": None}
    assert scoring.same_value({"city": "Lisbon", "include_hourly": True, "lang": None,
                               "filters": {"alerts": [1.0, 2], "max_temp_c": 30.0}}, gold)
    assert not scoring.same_value(dict(gold, include_hourly=1), gold)  # true is not 1
    assert not scoring.same_value(dict(gold, include_hourly="true"), gold)
    assert not scoring.same_value(dict(gold, lang=""), gold) and not scoring.same_value(dict(gold, lang=0), gold)
    assert not scoring.same_value(dict(gold, filters={"max_temp_c": 30, "alerts": [2, 1]}), gold)
    assert not scoring.same_value(dict(gold, filters={"max_temp_c": 30}), gold)  # a key missing
    assert not scoring.same_value(dict(gold, city="lisbon"), gold)  # strings exactly
    assert scoring.params_equal(0, False, "lenient")  # lenient coerces (documented), value does not
    assert not scoring.params_equal(0, False)


def test_irr_abstention():
    meta = {"name": "meta_tool", "parameters": {"tool_description": "x", "param_description": []}}
    assert not scoring.invokes_tool([])
    assert not scoring.invokes_tool([{"name": "get_user_input", "parameters": {}}])
    assert scoring.invokes_tool([meta])
    assert not scoring.invokes_tool([meta], irr_meta_tool="abstain")
    assert scoring.invokes_tool([{"name": "send_email", "parameters": {}}], irr_meta_tool="abstain")


def test_irr_a_chat_answer_with_a_json_example_abstains(dialogues):
    """The bundled glaive-style chat turn answers with a code example holding
    {"name": "John", "age": 30}: no invocation by default; the any_json reading errs."""
    d = dialogues["simple/open-world/chat/0003"]
    reply = {"role": "assistant", "content": d.messages[1].content}
    assert not scoring.invokes_tool(calls_in_message(reply))
    assert scoring.invokes_tool(calls_in_message(reply, "any_json"))


def test_fmd_is_a_success_rate_per_meta_tool_turn(dialogues):
    """Paper: "the success rate of this meta-tool function calling". Turn 1 of the hard
    dialogue needs two missing tools; one well-formed meta_tool call is a success of the turn
    (1 of 1). fmd_unit="gold_tool" credits min(#calls, #gold) per gold tool (1 of 2)."""
    d = dialogues["hard/open-world/function_missing/0001"]
    n_gold = len(d.gold_tools(1))
    assert n_gold == 2
    ok = {"name": "meta_tool", "parameters": {"tool_description": "air quality", "param_description": ["city"]}}
    bad = {"name": "meta_tool", "parameters": {"tool_description": "uv", "param_description": "place"}}
    calls = [c for c in (ok, bad) if scoring.is_retriever_call(c)]
    assert calls == [ok]
    assert scoring.fmd(len(calls), n_gold) == (1, 1)
    assert scoring.fmd(len(calls), n_gold, "gold_tool") == (1, 2)
    assert scoring.fmd(3, n_gold, "gold_tool") == (2, 2) and scoring.fmd(3, n_gold) == (1, 1)
    assert scoring.fmd(0, n_gold) == (0, 1) and scoring.fmd(0, n_gold, "gold_tool") == (0, 2)
    assert scoring.is_retriever_call({"name": "ToolSearcher", "parameters": {"keywords": "uv"}}, "keyword")
    assert not scoring.is_retriever_call(ok, "keyword")


def test_hit_rate_within_the_retrieved_tool_set():
    """Paper: "the hit rate of the ground truth tool within the retrieved tool set". The set at
    k is the union of the turn's retriever calls' top-k; bipartite (each call's list serves one
    gold tool) is the option."""
    gold = ["get_air_quality_index", "get_uv_index"]
    # One meta_tool call ("air quality and UV index of a city") for both missing tools.
    one_call = [["get_humidity", "get_air_quality_index", "get_uv_index", "get_pollen_count", "get_weather"]]
    assert [scoring.hits_at_k(one_call, gold, k) for k in (1, 3, 5)] == [0, 2, 2]
    assert [scoring.hits_at_k(one_call, gold, k, "bipartite") for k in (1, 3, 5)] == [0, 1, 1]
    # Two calls whose top-1 is the same tool: the set holds it once, bipartite uses it once.
    rankings = [["get_air_quality_index", "get_uv_index", "a"], ["get_air_quality_index", "b", "c"]]
    assert scoring.hits_at_k(rankings, gold, 1) == scoring.hits_at_k(rankings, gold, 1, "bipartite") == 1
    assert scoring.hits_at_k(rankings, gold, 3) == scoring.hits_at_k(rankings, gold, 3, "bipartite") == 2
    assert scoring.hits_at_k([], gold, 5) == 0


def _result(case_id, difficulty, world, category, values, retriever="meta_tool", model="m"):
    return CaseResult(case_id=case_id, benchmark="metabench", scenario=f"{difficulty}-{world}-{category}",
                      model=model, outcome=Outcome.PASSED,
                      labels={"difficulty": difficulty, "world": world, "category": category},
                      values=values, details={"retriever": retriever, "embedder": "e", "alpha": 0.5, "fmd_unit": "turn"})


def test_tables_pool_units_like_the_paper():
    results = [
        _result("a", "simple", "open", "function_missing", {"t_hits": 1, "p_hits": 0, "gt_calls": 1}),
        _result("b", "simple", "open", "function_missing", {"t_hits": 2, "p_hits": 2, "gt_calls": 3}),
        _result("c", "simple", "open", "function_missing", {"gt_missing": 2, "fmd_hits": 1, "fmd_units": 1, "hr_1_hits": 1, "hr_3_hits": 1, "hr_5_hits": 2}),
        _result("d", "simple", "open", "function_missing", {"gt_missing": 1, "fmd_hits": 0, "fmd_units": 1, "hr_1_hits": 0, "hr_3_hits": 0, "hr_5_hits": 0}),
        _result("e", "simple", "open", "chat", {"irr_correct": 1.0}),
        _result("f", "simple", "open", "chat", {"irr_correct": 0.0}),
        _result("g", "simple", "open", "chat", {"irr_correct": 1.0}),
        _result("h", "hard", "closed", "multi_tool_call", {"t_hits": 2, "p_hits": 1, "gt_calls": 3}),
        _result("i", "hard", "closed", "single_tool_call", {"t_hits": 1, "p_hits": 1, "gt_calls": 1}),
    ]
    t2 = table2(results)
    # FM T: (1+2)/(1+3) = 75.00; FM P: 2/4 = 50.00; open IRR: 2/3 = 66.67; hard S/M: 3/4, 2/4.
    assert t2.rows[0] == ["Simple: m", 75.0, 50.0, None, None, 66.67, None, None, None]
    assert len(set(t2.columns)) == len(t2.columns) == 9  # e.g. open- and closed-world Chat IRR
    assert t2.rows[1] == ["Hard: m", None, None, None, None, None, 75.0, 50.0, None]
    t3 = table3(results)
    # FMD per meta_tool turn: 1/2; HR per gold missing tool: 1/3, 1/3, 2/3 (non-detection = miss).
    assert t3.rows[0] == ["Meta-Tool: m", 50.0, 33.33, 33.33, 66.67, None, None, None, None]
    assert t3.note.startswith("FMD per meta_tool turn, HR@k per gold missing tool")
    assert t3.values["simple.hr_5"] == 66.67
