"""Retrieval throughput of the three embedding environments, cold and with the embedding cache.

Uses the benchmarks' own session objects on the bundled samples (real sentence-transformers
embedder + FAISS): FamilyTool's RelationRetriever (every KG relation as a query, top-5),
ToolBeHonest's ToolMatcherIndex (every tool description against its subtask's database) and
Meta-Bench's MetaBenchRetriever (each dialogue's text against its tool pool). "cold": empty
embedding cache, index built from scratch; "cached": a new session over the same cache folder.
The embedder is loaded once before timing (its load time is reported apart). Queries per second
count index build and all queries.

Run: PYTHONPATH=. python perf/retrieval.py --cache DIR --json OUT
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Callable

from pytest_toolbench.environments.retrieval import DEFAULT_EMBEDDER, Embedders


def familytool(embedders: Embedders) -> int:
    from pytest_toolbench.benchmarks.familytool.benchmark import load_kg
    from pytest_toolbench.benchmarks.familytool.options import FamilyToolOptions
    from pytest_toolbench.benchmarks.familytool.retriever import RelationRetriever

    n = 0
    for split in ("b", "e"):
        kg = load_kg(None, split, FamilyToolOptions())
        retriever = RelationRetriever(kg, embedders, DEFAULT_EMBEDDER)
        for relation in sorted(kg.relation_set):
            retriever.top_k(relation, 5)
            n += 1
    return n


def toolbehonest(embedders: Embedders) -> int:
    from pytest_toolbench.benchmarks.data_source import BUNDLED_DATA_DIR
    from pytest_toolbench.benchmarks.toolbehonest.schema import load_toolbehonest_file
    from pytest_toolbench.benchmarks.toolbehonest.tooldb import ToolMatcherIndex, build_tool_database

    records = load_toolbehonest_file(BUNDLED_DATA_DIR / "toolbehonest" / "sample_en.json")
    matcher = ToolMatcherIndex(build_tool_database(records), embedders)
    n = 0
    for subtask, db in matcher.database.items():
        for desc in db.descriptions:
            matcher.nearest(subtask, matcher.encode(desc))
            n += 1
    return n


def metabench(embedders: Embedders) -> int:
    from pytest_toolbench.benchmarks.metabench.benchmark import METABENCH
    from pytest_toolbench.config import RunSettings

    retriever = METABENCH.make_retriever(RunSettings(), embedders).build()
    n = 0
    for dialogue in METABENCH.load_dialogues(None):
        text = " ".join(str(m.content) for m in dialogue.messages if getattr(m, "content", None))
        retriever.search_history(dialogue, text[:2000])
        n += 1
    return n


SESSIONS: dict[str, Callable[[Embedders], int]] = {
    "FamilyTool relations": familytool,
    "ToolBeHonest tool DBs": toolbehonest,
    "Meta-Bench pools": metabench,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--json", type=Path, required=True)
    ns = parser.parse_args()
    t0 = time.perf_counter()
    loaded = Embedders(ns.cache / "warmup")
    loaded.get(DEFAULT_EMBEDDER).encode(["warm up"])
    load_s = time.perf_counter() - t0
    out: dict[str, Any] = {}
    for name, session in SESSIONS.items():
        folder = ns.cache / name.split()[0]
        out[name] = {}
        for mode in ("cold", "cached"):
            embedders = Embedders(folder)
            embedders._loaded.update(loaded._loaded)  # the same loaded model: time the retrieval
            start = time.perf_counter()
            queries = session(embedders)
            wall = time.perf_counter() - start
            out[name][mode] = {"queries": queries, "index_s": round(wall, 3),
                               "queries_per_s": round(queries / wall, 1)}
            print(f"{name} {mode}: {queries} queries in {wall:.2f}s", flush=True)
    ns.json.write_text(json.dumps({**out}, indent=2) + "\n")
    print(f"embedder load {load_s:.1f}s")


if __name__ == "__main__":
    main()
