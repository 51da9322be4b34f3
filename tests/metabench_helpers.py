"""Shared by the Meta-Bench tests: one real embedder and one embedding cache per test session
(the cold encode of the ~1,180-tool library is the only slow step, so it happens once)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ColdBuild:
    """The first build into an empty cache, as a session pays for it: what it encoded, and when.
    (Its time is perf/retrieval.py's to measure, not a test's: it doubles on a busy machine.)"""

    folder: Path
    embedders: Embedders
    build_encode_calls: int  # every library text, deduplicated, into the disk cache
    pool_encode_calls: int  # the 1,000-tool pool and FAISS index of every dialogue
    texts: int


@lru_cache(maxsize=None)
def cold_build() -> ColdBuild:
    folder = Path(tempfile.mkdtemp(prefix="metabench-emb-"))
    atexit.register(shutil.rmtree, folder, True)  # ~3 MB of vectors per test session otherwise
    embedders = Embedders(folder)
    embedder = embedders.get()
    calls: list[int] = []
    original = embedder.encode

    def counting(texts, **kw):
        calls.append(len(texts))
        return original(texts, **kw)

    embedder.encode = counting  # type: ignore[method-assign]
    r = MetaBenchRetriever(library(), embedders, MetaBenchOptions()).build()
    built = len(calls)
    for d in METABENCH.load_dialogues(None):
        r.pool(d)
    embedder.encode = original  # type: ignore[method-assign]
    return ColdBuild(folder, embedders, built, len(calls) - built, sum(calls))


def retriever(small: bool = False, **options) -> MetaBenchRetriever:
    """The real retriever; ``small`` = 50-tool pools from a 100-tool library, for tests of the
    baselines' wiring whose own texts would otherwise need a cold encode of the whole library."""
    embedders = cold_build().embedders
    if small:
        options.setdefault("pool_size", 50)
    lib = library(100 - len(library(0))) if small else library()
    return MetaBenchRetriever(lib, embedders, MetaBenchOptions(**options)).build()
