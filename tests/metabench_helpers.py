"""Shared by the Meta-Bench tests: one real embedder and one embedding cache per test session
(the cold encode of the 1,090-tool library is the only slow step, so it happens once)."""

from __future__ import annotations

import tempfile
import time
from functools import lru_cache
from pathlib import Path

from pytest_toolbench.benchmarks.metabench.benchmark import BUNDLED_DIR, METABENCH
from pytest_toolbench.benchmarks.metabench.options import MetaBenchOptions
from pytest_toolbench.benchmarks.metabench.pool import DISTRACTOR_FILE, ToolLibrary, build_library, load_distractors
from pytest_toolbench.benchmarks.metabench.retriever import MetaBenchRetriever
from pytest_toolbench.environments.retrieval import Embedders


@lru_cache(maxsize=None)
def library(distractors: int | None = None) -> ToolLibrary:
    """All sample tools plus the bundled distractors (the first ``distractors`` of them)."""
    extra = load_distractors(BUNDLED_DIR / DISTRACTOR_FILE)[:distractors]
    return build_library(METABENCH.load_dialogues(None), 1000, extra)


@lru_cache(maxsize=None)
def cold_build() -> tuple[Path, Embedders, float, int]:
    """(cache folder, embedders, seconds, encode calls) of the first build into an empty cache."""
    folder = Path(tempfile.mkdtemp(prefix="metabench-emb-"))
    embedders = Embedders(folder)
    embedder = embedders.get()
    _ = embedder.model  # load the weights outside the timed build
    calls = []
    original = embedder.encode

    def counting(texts, **kw):
        calls.append(len(texts))
        return original(texts, **kw)

    embedder.encode = counting  # type: ignore[method-assign]
    start = time.perf_counter()
    MetaBenchRetriever(library(), embedders, MetaBenchOptions()).build()
    seconds = time.perf_counter() - start
    embedder.encode = original  # type: ignore[method-assign]
    return folder, embedders, seconds, len(calls)


def retriever(small: bool = False, **options) -> MetaBenchRetriever:
    """The real retriever; ``small`` = 50-tool pools from a 100-tool library, for tests of the
    baselines' wiring whose own texts would otherwise need a cold encode of 1,090 tools."""
    _, embedders, _, _ = cold_build()
    if small:
        options.setdefault("pool_size", 50)
    lib = library(100 - 19) if small else library()
    return MetaBenchRetriever(lib, embedders, MetaBenchOptions(**options)).build()
