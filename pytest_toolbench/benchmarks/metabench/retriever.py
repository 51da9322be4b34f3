"""The meta_tool retriever (paper Algorithm 1) and the two baselines of Table 3.

Embeddings come from the shared sentence-transformers layer (environments/retrieval.py): every
text of the tool library is encoded once, deduplicated, and cached on disk keyed by the
embedder's identity and the texts (so the key changes with the embedder and with the tool set,
and a second session, or another xdist worker, encodes nothing). Query texts (each meta_tool
call's descriptions) are cached one by one in the same layer, so a repeated run never loads the
model. Each dialogue's 1,000-tool pool gets its own FAISS inner-product index over the cached
tool-description vectors.

Algorithm 1 for one meta_tool call (query q) and a pool tool v (Meta-Tool paper, Algorithm 1):
``S_t = cos(E(q.tool_description), E(v.description))``;
``S_p[i] = max_j cos(E(q.param_description[i]), E(desc of v's j-th required parameter))``;
``score = alpha * S_t + (1 - alpha) * mean_i S_p[i]``; ties broken by pool order. Unspecified
details are options with this project's reading as default: prefixes, the empty-parameter policy,
names not embedded (``embed_names``), a required parameter with no description contributing its
name (``param_fallback``), ties by pool order (``ties``), the keyword baseline's text
(``keyword_text``).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_toolbench.benchmarks.metabench.fields import tool_result_entry
from pytest_toolbench.benchmarks.metabench.options import MetaBenchOptions
from pytest_toolbench.benchmarks.metabench.pool import ToolLibrary, build_pool
from pytest_toolbench.benchmarks.metabench.prompts import META_TOOL_NAME, TOOLSEARCHER_NAME
from pytest_toolbench.benchmarks.metabench.schema import Dialogue
from pytest_toolbench.environments.retrieval import Embedder, Embedders
from pytest_toolbench.lazy_import import LazyModule

if TYPE_CHECKING:
    import numpy as np
else:
    np = LazyModule("numpy")  # imported when the index is built, not by every pytest process


def required_param_texts(tool: dict[str, Any], fallback: str = "name") -> list[str]:
    """Descriptions of the tool's required parameters; one without a description contributes
    its name (``fallback="name"``, an inferred reading of Algorithm 1) or nothing (``"skip"``)."""
    params = tool.get("parameters") if isinstance(tool.get("parameters"), dict) else {}
    props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
    required = params.get("required")
    if not isinstance(required, list):
        required = tool.get("required") if isinstance(tool.get("required"), list) else []
    out = []
    for name in required:
        spec = props.get(name) if isinstance(props.get(name), dict) else {}
        desc = spec.get("description")
        if isinstance(desc, str) and desc.strip():
            out.append(desc)
        elif fallback == "name":
            out.append(str(name))
    return out


def pool_texts(tools: list[dict[str, Any]], options: MetaBenchOptions, prefix: str) -> list[str]:
    """The pool-side text embedded per tool for the chosen retriever (before parameters)."""
    if options.retriever == "meta_tool":
        if options.embed_names == "yes":
            return [f"{prefix}{t.get('name')}: {t.get('description') or ''}" for t in tools]
        return [prefix + str(t.get("description") or "") for t in tools]
    if options.retriever == "keyword":  # "concatenated strings of tool names and descriptions"
        return [prefix + options.keyword_text.format(name=t.get("name"), description=t.get("description") or "")
                for t in tools]
    return [prefix + json.dumps(t, ensure_ascii=False) for t in tools]  # "standard tool JSONs"


def prefixes(options: MetaBenchOptions) -> tuple[str, str]:
    """(query-side, pool-side) input prefixes."""
    mode = options.prefix
    if mode == "auto":
        mode = "query" if "e5" in options.embedder.lower() else "none"
    return {"none": ("", ""), "query": ("query: ", "query: "), "passage": ("query: ", "passage: ")}[mode]


@dataclass
class Pool:
    """One dialogue's pool: library rows, a FAISS index over their description vectors, and
    their required-parameter vectors laid out contiguously per tool (for a segmented max)."""

    rows: list[int]
    index: Any
    param_vectors: np.ndarray  # (m, d): params of tools that have any, in pool order
    param_starts: np.ndarray  # start offset in param_vectors of each tool that has params
    has_params: np.ndarray  # (n,) bool


class MetaBenchRetriever:
    """Session-scoped: the library's embeddings plus lazily built per-dialogue pools."""

    def __init__(self, library: ToolLibrary, embedders: Embedders, options: MetaBenchOptions):
        self.library = library
        self.embedders = embedders
        self.options = options
        self.query_prefix, self.pool_prefix = prefixes(options)
        self._lock = threading.Lock()
        self._pools: dict[tuple[str, str], Pool] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._rows: dict[str, list[int]] = {}
        self._param_rows: list[list[int]] = []

    @property
    def embedder(self) -> Embedder:
        return self.embedders.get(self.options.embedder)

    # --- library embeddings (cached on disk) --------------------------------------------------

    def _encode_cached(self, texts: list[str]) -> tuple[np.ndarray, list[int]]:
        """Vectors of the unique texts (one cache entry) and each text's row."""
        unique = list(dict.fromkeys(texts))
        where = {t: i for i, t in enumerate(unique)}
        vectors = self.embedders.cache.embeddings(self.embedder, unique)
        return vectors, [where[t] for t in texts]

    def build(self) -> "MetaBenchRetriever":
        """Embed (or load) every library text the current retriever needs."""
        with self._lock:
            self._build_locked()
        return self

    def _build_locked(self) -> None:
        if "tool" in self._vectors:
            return
        p = self.pool_prefix
        tools = self.library.tools
        texts = pool_texts(tools, self.options, p)
        if self.options.retriever == "meta_tool":
            descs = texts
            params = [[p + s for s in required_param_texts(t, self.options.param_fallback)] for t in tools]
            flat = [s for ps in params for s in ps]
            vectors, rows = self._encode_cached(descs + flat)
            self._vectors["tool"] = vectors
            self._rows["tool"] = rows[: len(descs)]
            flat_rows = rows[len(descs):]
            out, k = [], 0
            for ps in params:
                out.append(flat_rows[k : k + len(ps)])
                k += len(ps)
            self._param_rows = out
        else:
            vectors, rows = self._encode_cached(texts)
            self._vectors["tool"] = vectors
            self._rows["tool"] = rows
            self._param_rows = [[] for _ in tools]

    def pool(self, dialogue: Dialogue) -> Pool:
        key = (dialogue.id, self.options.retriever)
        with self._lock:
            if key not in self._pools:
                self._build_locked()
                self._pools[key] = self._make_pool(
                    build_pool(dialogue, self.library, self.options.pool_size, self.options.pool_seed)
                )
            return self._pools[key]

    def _make_pool(self, rows: list[int]) -> Pool:
        import faiss

        vectors = self._vectors["tool"]
        tool_vecs = np.ascontiguousarray(vectors[[self._rows["tool"][r] for r in rows]])
        index = faiss.IndexFlatIP(tool_vecs.shape[1])
        index.add(tool_vecs)
        param_rows = [self._param_rows[r] for r in rows]
        has = np.array([bool(pr) for pr in param_rows], dtype=bool)
        flat = [x for pr in param_rows for x in pr]
        starts = np.cumsum([0] + [len(pr) for pr in param_rows if pr])[:-1]
        dim = vectors.shape[1]
        pv = np.ascontiguousarray(vectors[flat]) if flat else np.zeros((0, dim), np.float32)
        return Pool(rows=rows, index=index, param_vectors=pv, param_starts=starts.astype(np.int64), has_params=has)

    # --- queries -----------------------------------------------------------------------------

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        """Query vectors through the per-text disk cache (the model loads only on a miss)."""
        with self._lock:
            return self.embedders.cache.query_embeddings(self.embedder, [self.query_prefix + t for t in texts])

    def _description_scores(self, pool: Pool, query: np.ndarray) -> np.ndarray:
        """Cosine of one query vector with every pool tool, in pool order (FAISS exact search)."""
        n = len(pool.rows)
        scores, ids = pool.index.search(query.reshape(1, -1), n)
        out = np.zeros(n, dtype=np.float64)
        out[ids[0]] = scores[0]
        return out

    def meta_tool_scores(
        self, pool: Pool, tool_description: str, param_description: list[str]
    ) -> np.ndarray:
        """Algorithm 1 similarity of one meta_tool query with every pool tool."""
        vecs = self._encode_queries([tool_description, *param_description])
        s_t = self._description_scores(pool, vecs[0])
        alpha = self.options.alpha
        n = len(pool.rows)
        s_p = np.zeros(n, dtype=np.float64)
        defined = np.zeros(n, dtype=bool)
        q = vecs[1:]
        if len(q) and len(pool.param_vectors):
            sims = q @ pool.param_vectors.T  # (r, m)
            per_tool = np.maximum.reduceat(sims, pool.param_starts, axis=1)  # (r, tools with params)
            s_p[pool.has_params] = per_tool.mean(axis=0)
            defined[pool.has_params] = True
        score = alpha * s_t + (1 - alpha) * s_p  # undefined S_p counts 0 here
        if self.options.empty_params == "fallback" and len(q) == 0:
            both_empty = ~pool.has_params
            score[both_empty] = s_t[both_empty]
        return score

    def text_scores(self, pool: Pool, text: str) -> np.ndarray:
        return self._description_scores(pool, self._encode_queries([text])[0])

    def rank(self, pool: Pool, scores: np.ndarray, k: int | None = None) -> list[tuple[str, float]]:
        """Top ``k`` (name, score), best first; ties keep pool order (stable sort) or, with
        ``ties="name"``, go alphabetically."""
        k = self.options.top_k if k is None else k
        if self.options.ties == "name":
            names = [self.library.tools[r]["name"] for r in pool.rows]
            order = np.array(sorted(range(len(scores)), key=lambda i: (-scores[i], names[i]))[:k], dtype=np.int64)
        else:
            order = np.argsort(-scores, kind="stable")[:k]
        return [(self.library.tools[pool.rows[i]]["name"], float(scores[i])) for i in order]

    # --- per-call entry points ---------------------------------------------------------------

    def search(self, dialogue: Dialogue, call: dict[str, Any], k: int | None = None) -> list[tuple[str, float]]:
        """Top-k for one well-formed retriever call (meta_tool or ToolSearcher)."""
        pool = self.pool(dialogue)
        params = call["parameters"]
        if call["name"] == META_TOOL_NAME and self.options.retriever == "meta_tool":
            scores = self.meta_tool_scores(pool, params["tool_description"], list(params["param_description"]))
        elif call["name"] == TOOLSEARCHER_NAME:
            scores = self.text_scores(pool, params["keywords"])
        else:  # a meta_tool call under a text baseline: embed its tool description
            scores = self.text_scores(pool, str(params.get("tool_description", "")))
        return self.rank(pool, scores, k)

    def search_history(self, dialogue: Dialogue, history: str, k: int | None = None) -> list[tuple[str, float]]:
        pool = self.pool(dialogue)
        return self.rank(pool, self.text_scores(pool, history), k)

    def tool(self, name: str) -> dict[str, Any]:
        return self.library.tools[self.library.index[name]]


def result_message(name: str, ranked: list[list[str]], retriever: MetaBenchRetriever) -> list[dict[str, Any]]:
    """The tool turn in the paper's format (Figs 12, 15): one entry per retriever call, its
    ``function_id`` the call's index, ``results`` the top-k tool JSONs (ToolSearcher: under
    ``best_matches``, its declared output **[INFERRED]**)."""
    out = []
    for i, names in enumerate(ranked):
        tools = [retriever.tool(n) for n in names]
        results: Any = {"best_matches": tools} if name == TOOLSEARCHER_NAME else tools
        out.append(tool_result_entry(name, i, results))
    return out
