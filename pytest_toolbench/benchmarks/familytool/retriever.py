"""Relation Retrieval's retriever (upstream ``--KGretrieval_type relation_retrieval``): a FAISS inner-product index over the loaded KG's
relation names, built from the shared sentence-transformers layer (environments/retrieval.py).

Upstream uses ``jinaai/jina-embeddings-v3`` (``AutoModel(trust_remote_code=True)``, then
``encode(texts, normalize_embeddings=True)`` with no ``task`` argument, as upstream calls it). Its weights
ship custom code, so a jina embedder is loaded with ``trust_remote_code=True``; encode gets no
task either (through sentence-transformers the checkpoint's own default task applies, which
upstream's AutoModel call also leaves alone). It cannot be downloaded here, so the default is the
offline ``all-MiniLM-L6-v2``; give ``--familytool-embedder jinaai/jina-embeddings-v3`` (or a local
folder whose name contains ``jina-embeddings``) where it exists. The
relation set comes from whatever KG is loaded, so new relations are indexed with no code change;
its embeddings are computed once and cached on disk keyed by embedder and relation set.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pytest_toolbench.benchmarks.familytool.kg import KnowledgeGraph
from pytest_toolbench.environments.retrieval import Embedder, Embedders, TextIndex

UPSTREAM_EMBEDDER = "jinaai/jina-embeddings-v3"
UPSTREAM_K = 3  # k_kgtype=3 is hard-coded upstream; the --k flag is ignored there


def embedder_model_kwargs(name: str) -> dict[str, Any]:
    """Loader kwargs for ``name``: jina-embeddings models need their own code (upstream passes
    ``trust_remote_code=True``); nothing else is trusted with remote code."""
    return {"trust_remote_code": True} if "jina-embeddings" in name.lower() else {}


def get_embedder(embedders: Embedders, name: str) -> Embedder:
    """The process's embedder ``name``, created with :func:`embedder_model_kwargs`."""
    return embedders.get(name, embedder_model_kwargs(name))


class RelationRetriever:
    def __init__(self, kg: KnowledgeGraph, embedders: Embedders, embedder: str):
        self.embedder = embedder
        get_embedder(embedders, embedder)  # first: so the index gets the jina kwargs
        # Sorted, so the index (and FAISS tie order) does not depend on a hash seed.
        self.index: TextIndex = embedders.index(sorted(kg.relation_set), embedder)
        self.top_k = lru_cache(maxsize=4096)(self._top_k)

    def _top_k(self, relation: str, k: int) -> list[str]:
        hits = self.index.search([relation], k)[0]
        return [self.index.texts[row] for row, _ in hits]
