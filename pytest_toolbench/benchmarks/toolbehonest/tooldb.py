"""The per-subtask tool database and the L3 matching score (upstream ``get_tools_embeddings``, ``_evaluate_diagnosing``).

Upstream encodes, per subtask, the description of every (name, description) pair parsed from
every record's ``tools`` string (duplicates and Finish/UnsolvableQuery lines kept) with
``all-MiniLM-L6-v2``; an L3 UnsolvableQuery step's subgoal text is matched against them by cosine
and ``argmax`` (first row on ties). Here the vectors sit in the shared FAISS inner-product index
(``environments/retrieval.py``, unit vectors, so inner product = cosine) and are cached on disk
by the shared embedding cache instead of upstream's pickles. Ties are resolved to the lowest row
like ``np.argmax``. Float32 vs upstream's float64 cosine may differ in the last bits.

The database is always built from the WHOLE data file, never from the selected cases, so a
selection scores each case as the full run would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_toolbench.benchmarks.toolbehonest.schema import ToolBHRecord, parse_tool_string
from pytest_toolbench.benchmarks.toolbehonest.scoring import ScoringError
from pytest_toolbench.environments.retrieval import DEFAULT_EMBEDDER, Embedders, TextIndex
from pytest_toolbench.lazy_import import LazyModule

if TYPE_CHECKING:
    import numpy as np
else:
    np = LazyModule("numpy")  # imported when the index is built, not by every pytest process


@dataclass
class SubtaskTools:
    """One subtask's database: names and descriptions in file order, duplicates kept."""

    names: list[str] = field(default_factory=list)
    descriptions: list[str] = field(default_factory=list)


def build_tool_database(records: list[ToolBHRecord]) -> dict[str, SubtaskTools]:
    """``get_tools_embeddings`` without the encoding: subtask -> (names, descriptions)."""
    out: dict[str, SubtaskTools] = {}
    for record in records:
        db = out.setdefault(record.subtask, SubtaskTools())
        for name, desc in parse_tool_string(record.tools):
            db.names.append(name)
            db.descriptions.append(desc)
    return out


class ToolMatcherIndex:
    """Implements ``scoring.ToolMatcher`` over FAISS indexes built lazily per subtask."""

    def __init__(
        self,
        database: dict[str, SubtaskTools],
        embedders: Embedders,
        embedder: str = DEFAULT_EMBEDDER,
    ):
        self.database = database
        self.embedders = embedders
        self.embedder_name = embedder
        self._indexes: dict[str, TextIndex] = {}

    def index(self, subtask: str) -> TextIndex:
        if subtask not in self._indexes:
            if subtask not in self.database:
                raise KeyError(f"no tool database for subtask {subtask!r}")
            descs = self.database[subtask].descriptions
            self._indexes[subtask] = self.embedders.index(descs, self.embedder_name)
        return self._indexes[subtask]

    def encode(self, text: str) -> np.ndarray:
        return self.embedders.get(self.embedder_name).encode([text])

    def nearest(self, subtask: str, query_vec: np.ndarray) -> tuple[int, float]:
        """(row, cosine) of the best description; the lowest row among exact ties."""
        index = self.index(subtask)
        scores, ids = index.search_vectors(query_vec, 1)
        best_row, best = int(ids[0][0]), float(scores[0][0])
        lims, dists, rows = index.index.range_search(query_vec, best - 1e-6)
        tied = [int(r) for r, d in zip(rows[lims[0] : lims[1]], dists[lims[0] : lims[1]]) if d >= best]
        return (min(tied) if tied else best_row), best

    def score(self, subtask: str, query: str, gold_name: str, gold_desc: str | None) -> float:
        query_vec = self.encode(query)
        row, _ = self.nearest(subtask, query_vec)
        if self.database[subtask].names[row] == gold_name:
            return 1.0
        if gold_desc is None:  # upstream: provided_tool_dict[gold_name], a KeyError
            raise ScoringError(f"upstream crashes here: the nearest tool is not {gold_name!r}, "
                               "and this record's tools do not describe it")
        gold_vec = self.encode(gold_desc)
        return float(np.dot(query_vec[0].astype(np.float64), gold_vec[0].astype(np.float64)))
