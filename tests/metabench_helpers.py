"""Shared by the Meta-Bench tests: one real embedder and one embedding cache per test session
(the cold encode of the ~1,180-tool library is the only slow step, so it happens once)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
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
    """The first build into an empty cache, timed end to end as a session pays for it."""

    folder: Path
    embedders: Embedders
    load_s: float  # sentence-transformers weights from the packaged copy
    encode_s: float  # every library text, deduplicated, into the disk cache
    pools_s: float  # the 1,000-tool pool and FAISS index of every dialogue
    encode_calls: int
    texts: int

    @property
    def total_s(self) -> float:
        return self.load_s + self.encode_s + self.pools_s


@lru_cache(maxsize=None)
def cold_build() -> ColdBuild:
    folder = Path(tempfile.mkdtemp(prefix="metabench-emb-"))
    atexit.register(shutil.rmtree, folder, True)  # ~3 MB of vectors per test session otherwise
    embedders = Embedders(folder)
    embedder = embedders.get()
    start = time.perf_counter()
    _ = embedder.model
    loaded = time.perf_counter()
    calls: list[int] = []
    original = embedder.encode

    def counting(texts, **kw):
        calls.append(len(texts))
        return original(texts, **kw)

    embedder.encode = counting  # type: ignore[method-assign]
    r = MetaBenchRetriever(library(), embedders, MetaBenchOptions()).build()
    encoded = time.perf_counter()
    for d in METABENCH.load_dialogues(None):
        r.pool(d)
    pooled = time.perf_counter()
    embedder.encode = original  # type: ignore[method-assign]
    return ColdBuild(folder, embedders, loaded - start, encoded - loaded, pooled - encoded, len(calls),
                     sum(calls))


def retriever(small: bool = False, **options) -> MetaBenchRetriever:
    """The real retriever; ``small`` = 50-tool pools from a 100-tool library, for tests of the
    baselines' wiring whose own texts would otherwise need a cold encode of the whole library."""
    embedders = cold_build().embedders
    if small:
        options.setdefault("pool_size", 50)
    lib = library(100 - len(library(0))) if small else library()
    return MetaBenchRetriever(lib, embedders, MetaBenchOptions(**options)).build()
