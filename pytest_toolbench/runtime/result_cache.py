"""The result cache: a whole case's result, kept as its case ends, returned by a re-run that
would only have read every reply from the response cache and scored them again.

A fully cached re-run still built each request, read the response cache and rescored: about half
of the pytest floor's speed-up (issue 32, goal 5; perf/README.md "A whole-case result cache").
This cache skips all three: a case whose result it holds is answered at once, with no request
built and no scoring.

**Store.** The response cache's packs (models/cache_store.py :class:`PackStore`), under
``<cache-dir>/results/<namespace>/``: one append-only pack per writing process, no locks under
xdist, a torn last line is never indexed (a miss), a writer that failed a write starts a new pack,
what another worker stored meanwhile is found on a miss. An entry is the result's JSON (zlib and
base64 where that is shorter), self-contained: a result holds its whole transcript, never a
reference into a run folder. ``toolbench prune`` removes these packs by age as it does the
response cache's. The entry also says where this run's timings go in it (``started_at`` and
``wall_s``, left out of a stored result): a hit's journal line is the stored JSON with the two
spliced in, the very text ``model_dump_json`` writes for the hit, so the hit is parsed once and
never dumped again (:class:`StoredResult`).

**Key.** Per run (:func:`run_key`, the namespace): :data:`STORE_FORMAT`, the harness's version,
a digest of the code that can change a result (by path, size and mtime: this package, the
repository's ``suites/`` and ``conftest.py``, the package of every benchmark, model provider
and data source an entry point adds), the installed distributions (site-packages'
``*.dist-info`` names), the run's data fingerprint (the sha256 of every data source: a
knowledge graph, tool pool or tool library a case reads beside its own record), the response
cache's own model identity (name, base URL where it keys on it, ``key_extra``: the served-by
identity and the open-protocol plan), and every setting but those :data:`NOT_IN_KEY` names (a new
setting is in the key unless someone decides it cannot change a result). Per case
(:func:`case_key`): its id, repeat and its record's identity (file, byte span and CRC-32, or a
packed record's CRC-32), so a changed data file misses.

A hit runs none of the case's tools again (a ToolHop tool, a sandbox limit met on a busy
machine): its transcript is the stored run's, as the key's inputs promise; ``--rescore`` runs them.
Nor does it build its benchmark's runner (session/fixtures.py ``case_result``): a fully answered
run loads no embedder and starts no sandbox, and a broken environment stops only a run that has
a case to run.

**What is kept.** The result as a cached re-run would make it: every call a cached one
(``cached_calls == model_calls``), and without what only the wire gave the run that stored it
(``details`` of the call log: endpoint retries, per-endpoint counts, lost turns, the sandbox's
timings). A hit's ``started_at`` and ``wall_s`` are this run's. Never kept: infrastructure errors.

**When it is used** (:func:`result_cache_for`): only where the response cache answers the run's
model calls (not ``--no-cache``, not the oracle or replay, not ``--record``), and not under
``--rescore``, which scores the stored replies again and keeps the new results. ``--cache-only``
reads it (a hit is an answered case) but writes nothing (its cache folder may be read-only).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import site
import sys
import time
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import pydantic_core

from pytest_toolbench import __version__, output_errors
from pytest_toolbench.models.cache_store import RESULT_PACKS, PackStore
from pytest_toolbench.results.case_result import CaseResult, Outcome

#: Bump when what an entry holds, or the key's recipe, changes: old entries then stop matching.
#: 2: an entry says where its timings go (:class:`StoredResult`); the case key hashes the
#: store's folder as a prefix, then the case's fields (:func:`case_key`).
STORE_FORMAT = 2
#: Settings that cannot change a case's result: how fast, where outputs go, how the run is
#: judged or shown, which cases are selected (each case's own key says which case it is), how
#: the endpoint is reached. Any other setting, a new one included, is in the key.
NOT_IN_KEY = frozenset({
    "api_key", "concurrency", "http_transport", "sdk_process", "request_timeout_s", "max_retries",
    "retry_after_max_s", "unreachable_after_s", "base_url", "base_urls", "base_urls_file",
    "cache_dir", "runs_dir", "use_cache", "cache_only", "rescore", "record_path", "json_path",
    "md_path", "allure_html", "view_dir", "plots", "progress", "gates", "max_error_rate",
    "bootstrap_samples", "baseline_path", "allow_different_data", "limit", "sample_ids",
})
#: Within a setting's model: fields that cannot change a result either.
NOT_IN_KEY_NESTED = {"sandbox": {"workers"}}
#: ``details`` keys only the wire of the storing run gave (models/call_log.py): a cached re-run
#: has none of them, or its own timings.
WIRE_DETAILS = ("endpoint_retries", "endpoints", "lost_turns", "sandbox_calls_ms",
                "sandbox_wall_ms", "sandbox_worker_ms")
_PACKAGE = Path(__file__).resolve().parents[1]
_COMPRESS_FROM = 2048  # bytes of JSON: smaller entries are kept as they are
#: Timings no run has (finite, exact in JSON): where ``encode`` finds the timings' place.
_MARK_WALL, _MARK_STARTED = 1.2345678901234567e-300, 7.654321098765432e-300


class StoredResult(NamedTuple):
    """A read entry: the result, its JSON as stored (no timings) and where in that JSON
    ``"wall_s":..,"started_at":..,`` go (``model_dump_json``'s order; -1: not known, dump)."""

    result: CaseResult
    json: str
    timings_at: int

    def line(self) -> str:
        """The result's ``model_dump_json`` text, its timings spliced into the stored JSON (the
        same bytes: tests/test_result_cache.py), or dumped where the place is not known."""
        result, at = self.result, self.timings_at
        if at < 0 or result.wall_s is None or result.started_at is None:
            return result.model_dump_json()
        timings = (f'"wall_s":{pydantic_core.to_json(result.wall_s).decode()},'
                   f'"started_at":{pydantic_core.to_json(result.started_at).decode()},')
        return self.json[:at] + timings + self.json[at:]


class ResultStore(PackStore[StoredResult]):
    """Case key -> the case's result, in the cache folder's ``results/<run key>/`` packs."""

    def __init__(self, cache_dir: Path, namespace: str):
        super().__init__(cache_dir, namespace, RESULT_PACKS)

    def decode(self, key: str, raw: bytes) -> tuple[StoredResult | None, bool]:
        """An entry: ``J<at> <JSON>`` or ``Z<at> <base64 of its zlib>`` (:meth:`encode`); any
        other, a torn or corrupt one, is unreadable (a miss)."""
        try:
            tag, (at, data) = raw[:1], raw[1:].split(b" ", 1)
            if tag == b"Z":
                data = zlib.decompress(base64.b64decode(data))
            elif tag != b"J":
                return None, True
            timings_at = int(at)
            text = data.decode("utf-8", "surrogatepass")
            if not -1 <= timings_at <= len(text):
                return None, True
            return StoredResult(CaseResult.model_validate_json(data), text, timings_at), False
        except ValueError:  # pydantic's ValidationError, binascii.Error, zlib.error, a bad split
            return None, True

    @staticmethod
    def encode(result: CaseResult) -> bytes:
        """One line: JSON escapes every newline in its strings, base64 has none. ``result`` has
        no timings; where they go is found by dumping it once more with marks in their place."""
        text = result.model_dump_json()
        marked = result.model_copy(update={"wall_s": _MARK_WALL, "started_at": _MARK_STARTED})
        with_marks = marked.model_dump_json()
        marks = (f'"wall_s":{pydantic_core.to_json(_MARK_WALL).decode()},'
                 f'"started_at":{pydantic_core.to_json(_MARK_STARTED).decode()},')
        at = with_marks.find(marks)
        if at < 0 or with_marks.count(marks) != 1 or with_marks[:at] + with_marks[at + len(marks):] != text:
            at = -1
        data = text.encode("utf-8", "surrogatepass")
        if len(data) >= _COMPRESS_FROM:
            packed = base64.b64encode(zlib.compress(data, 6))
            if len(packed) < len(data):
                return b"Z%d " % at + packed
        return b"J%d " % at + data


class ResultCache:
    """The run's result cache in one process: lookups, and the entries this process adds."""

    def __init__(self, store: ResultStore, *, writes: bool, reads: bool = True):
        """``reads`` False: ``--rescore`` (stored results ignored, new ones kept)."""
        self.store = store
        self.writes = writes
        self.reads = reads
        self._keys: dict[tuple[str, int | None], str | None] = {}
        self._prefix = key_prefix(self.store.folder)

    def key_of(self, case: Any) -> str | None:
        """The case's key (None: its record has no identity to key on; never cached)."""
        ident = (case.id, case.repeat)
        key = self._keys.get(ident, False)
        if key is False:
            key = self._keys[ident] = case_key(self.store.folder, case, self._prefix)
        return key

    def has(self, case: Any) -> bool:
        """Whether the case will be answered (the lookahead's question: an index look-up, the
        entry is read once, by :meth:`get`)."""
        key = self.key_of(case) if self.reads else None
        return key is not None and self.store.holds(key)

    def lookup(self, case: Any) -> StoredResult | None:
        """The case's stored result, with this run's timings, and its journal line's makings
        (:meth:`StoredResult.line`), or None."""
        started = time.monotonic()
        key = self.key_of(case) if self.reads else None
        if key is None:
            return None
        stored, _ = self.store.load(key)
        if stored is None:
            return None
        result = stored.result
        if result.case_id != case.id or result.outcome is Outcome.ERROR:
            return None
        result.started_at = round(time.time(), 3)
        result.wall_s = round(time.monotonic() - started, 6)
        return stored

    def put(self, case: Any, result: CaseResult) -> None:
        """Keep ``result`` as a cached re-run would make it (module docstring); an
        infrastructure error is not kept. A failed write stops the run, as the response
        cache's does (output_errors.py): a cache that silently stops filling hides a full disk."""
        if not self.writes or result.outcome is Outcome.ERROR or result.case_id != case.id:
            return
        key = self.key_of(case)
        if key is None:
            return
        details = {k: v for k, v in result.details.items() if k not in WIRE_DETAILS}
        kept = result.model_copy(update={"details": details, "cached_calls": result.model_calls,
                                         "started_at": None, "wall_s": None})
        try:
            self.store.save_entry(key, ResultStore.encode(kept))
        except OSError as exc:
            output_errors.record(output_errors.OutputFailure.of(
                "result cache entry", self.store.pack_path, exc))

    def close(self) -> None:
        self.store.close()


@functools.cache
def _record_kinds() -> tuple[type, type, type]:
    """(FileSpanRecord, PackedRecord, BaseModel): imported once, at the first key, not per case."""
    from pydantic import BaseModel

    from pytest_toolbench.benchmarks.packed import FileSpanRecord, PackedRecord

    return FileSpanRecord, PackedRecord, BaseModel


def record_identity(sample: Any) -> list[Any] | None:
    """What identifies a case's stored record: a file span and its CRC-32, a packed record's
    CRC-32, a validated model's JSON digest; None for anything else (not cached)."""
    FileSpanRecord, PackedRecord, BaseModel = _record_kinds()
    if isinstance(sample, FileSpanRecord):
        return ["span", sample.model.__qualname__, sample.path, sample.start, sample.size, sample.crc]
    if isinstance(sample, PackedRecord):
        return ["packed", sample.model.__qualname__, len(sample.blob), zlib.crc32(sample.blob)]
    if isinstance(sample, BaseModel):
        text = sample.model_dump_json().encode("utf-8", "surrogatepass")
        return ["model", type(sample).__qualname__, hashlib.sha256(text).hexdigest()]
    return None


def key_prefix(namespace: str) -> Any:
    """The hash every case key of ``namespace`` starts from (:func:`case_key`)."""
    return hashlib.sha256(json.dumps(namespace, ensure_ascii=False).encode("utf-8", "surrogatepass")
                          + b"\n")


def case_key(namespace: str, case: Any, prefix: Any = None) -> str | None:
    """sha256 of the namespace's JSON and a newline, then the case's fields' JSON (``prefix``:
    :func:`key_prefix` of ``namespace``, hashed once per store rather than once per case)."""
    ident = record_identity(case.stored_sample)
    if ident is None:
        return None
    h = (prefix or key_prefix(namespace)).copy()
    h.update(json.dumps([case.id, case.benchmark, case.scenario, case.repeat, ident],
                        ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


# -- the run's key ---------------------------------------------------------------------------

def _tree_digest(h: Any, root: Path) -> None:
    """Every ``.py`` file under ``root`` (or ``root`` itself) by path, size and mtime."""
    if root.is_file():
        st = root.stat()
        h.update(f"{root}:{st.st_size}:{st.st_mtime_ns};".encode("utf-8", "surrogatepass"))
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(".py"):
                try:
                    st = os.stat(os.path.join(dirpath, name))
                except OSError:
                    continue
                h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns};"
                         .encode("utf-8", "surrogatepass"))


def plugin_roots() -> list[Path]:
    """The package folder (or module file) of every benchmark, model provider and data source
    installed from outside through an entry point, found without importing it (the bundled ones
    are in this package)."""
    import importlib.util

    from pytest_toolbench.benchmarks import ENTRY_POINT_GROUP as BENCHMARKS
    from pytest_toolbench.datasets.registry import DATA_ENTRY_POINT_GROUP as DATA
    from pytest_toolbench.entry_points import entry_points_of
    from pytest_toolbench.models.providers import ENTRY_POINT_GROUP as PROVIDERS

    roots: set[Path] = set()
    for group in (BENCHMARKS, PROVIDERS, DATA):
        for point in entry_points_of(group):
            try:
                spec = importlib.util.find_spec(point.module.split(".")[0])
            except (ImportError, ValueError):
                continue
            if spec is None or not spec.origin or not os.path.isabs(spec.origin):
                continue
            origin = Path(spec.origin).resolve()
            root = origin.parent if origin.name == "__init__.py" else origin
            if root != _PACKAGE and _PACKAGE not in root.parents:
                roots.add(root)
    return sorted(roots)


def code_digest(rootpath: Path) -> str:
    h = hashlib.sha256()
    for root in [_PACKAGE, rootpath / "suites", rootpath / "conftest.py", *plugin_roots()]:
        if root.exists():
            _tree_digest(h, root)
    return h.hexdigest()


def distributions_digest() -> str:
    """The installed distributions, by their ``*.dist-info`` folders' names (name and version)."""
    h = hashlib.sha256()
    for folder in sorted({*site.getsitepackages(), site.getusersitepackages(), *sys.path}):
        try:
            names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".dist-info"))
        except OSError:
            continue
        h.update(f"{folder}:{','.join(names)};".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def settings_in_key(settings: Any) -> dict[str, Any]:
    exclude: dict[str, Any] = {name: True for name in NOT_IN_KEY}
    exclude.update({name: {f: True for f in fields} for name, fields in NOT_IN_KEY_NESTED.items()})
    dumped = settings.model_dump(mode="json", exclude=exclude)
    dumped["resolved"] = {"backend": settings.resolved_backend, "decoding": settings.resolved_decoding,
                          "open_protocol": settings.open_protocol}
    return dumped


def run_key(settings: Any, cached_model: Any, rootpath: Path, data: str) -> str:
    """The namespace of the run's entries (module docstring); ``data``: the run's data
    fingerprint (every data source's sha256: a knowledge graph or tool pool a case reads beside
    its own record changes it)."""
    inner = cached_model.inner
    identity = {
        "model": cached_model.name,
        "base_url": inner.describe().get("base_url") if cached_model.include_base_url else None,
        "extra": cached_model.key_extra,
    }
    text = json.dumps({"format": STORE_FORMAT, "version": __version__, "code": code_digest(rootpath),
                       "dists": distributions_digest(), "data": data, "model": identity,
                       "settings": settings_in_key(settings)},
                      sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def response_cache_of(model: Any) -> Any:
    """The response cache among the layers of the run's model (models/factory.py), or None."""
    from pytest_toolbench.models.cache import CachedModel

    seen = 0
    while model is not None and seen < 16:
        if isinstance(model, CachedModel):
            return model
        model = vars(model).get("inner") if hasattr(model, "__dict__") else None
        seen += 1
    return None


def result_cache_for(settings: Any, model: Any, rootpath: Path,
                     data: str | None) -> ResultCache | None:
    """The run's result cache, or None where it is off (module docstring, "When it is used");
    ``data`` None (the run's data sources are not known in this process): off."""
    if not settings.use_cache or settings.record_path is not None or data is None:
        return None
    cached = response_cache_of(model)
    if cached is None:  # the oracle, replay: nothing the response cache answers
        return None
    return ResultCache(ResultStore(settings.cache_dir, run_key(settings, cached, rootpath, data)),
                       writes=not settings.cache_only, reads=not settings.rescore)
