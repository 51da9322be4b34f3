"""Relation Retrieval's retriever (spec §2.4): a FAISS inner-product index over the loaded KG's
relation names, built from the shared sentence-transformers layer (environments/retrieval.py).

Upstream uses ``jinaai/jina-embeddings-v3`` (``encode(texts, normalize_embeddings=True)``, no task
adapter). It cannot be downloaded here, so the default is the offline ``all-MiniLM-L6-v2``; give
``--familytool-embedder jinaai/jina-embeddings-v3`` (or a local folder) where it exists. The
relation set comes from whatever KG is loaded, so new relations are indexed with no code change;
its embeddings are computed once and cached on disk keyed by embedder and relation set.
"""

from __future__ import annotations

from functools import lru_cache

from pytest_toolbench.benchmarks.familytool.kg import KnowledgeGraph
from pytest_toolbench.environments.retrieval import Embedders, TextIndex

UPSTREAM_EMBEDDER = "jinaai/jina-embeddings-v3"
UPSTREAM_K = 3  # k_kgtype=3 is hard-coded upstream; the --k flag is ignored there


class RelationRetriever:
    def __init__(self, kg: KnowledgeGraph, embedders: Embedders, embedder: str):
        self.embedder = embedder
        # Sorted, so the index (and FAISS tie order) does not depend on a hash seed.
        self.index: TextIndex = embedders.index(sorted(kg.relation_set), embedder)
        self.top_k = lru_cache(maxsize=4096)(self._top_k)

    def _top_k(self, relation: str, k: int) -> list[str]:
        hits = self.index.search([relation], k)[0]
        return [self.index.texts[row] for row, _ in hits]
