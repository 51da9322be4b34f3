"""A run's real data: every pinned file of the benchmarks it runs fetched (or found in the
cache), checked against its pin, and laid out as a ``--data-dir`` folder the loaders read as they
read any other (``DIR/<benchmark>/<file>``, symbolic links into the cache); and what each file is,
for the report (:class:`FileProvenance`).

The controller resolves once, at configure, before xdist starts its workers; the workers are
handed the folder and only read it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.datasets import cache
from pytest_toolbench.datasets.download import ProgressFactory
from pytest_toolbench.datasets.fetch import Choice, DataRefused, check, fetch, file_url
from pytest_toolbench.datasets.registry import BenchmarkData, Registry, load_registry, refused_pin
from pytest_toolbench.secret_args import masked_url

DataKind = Literal["real", "sample", "reconstruction", "local"]


class FileProvenance(DeferredModel):
    """Where one file of a run's data came from and what it was checked against."""

    benchmark: str
    #: real: the benchmark's own file; sample: the bundled sample (not the benchmark);
    #: reconstruction: this project's reconstruction (Meta-Bench: nothing released);
    #: local: files given with --data-dir that match no pin.
    kind: DataKind
    #: ``huggingface:owner/name``, ``github:owner/name``, or "this project's reconstruction".
    source: str | None = None
    url: str | None = None
    #: The file's path in the upstream repository.
    upstream_path: str | None = None
    #: The revision taken, the pinned one, and whether they are the same.
    revision: str | None = None
    pinned_revision: str | None = None
    pinned: bool | None = None
    #: The commit the file was read at, where known (a Hub snapshot's).
    commit: str | None = None
    path: Path | None = None
    sha256: str | None = None
    expected_sha256: str | None = None
    size: int | None = None
    records: int | None = None
    expected_records: int | None = None
    #: Every check against the pin held (sha256 where one is published, size, records).
    verified: bool = False
    #: Where the pins came from: "built-in" or $TOOLBENCH_DATA_REGISTRY's file.
    registry: str = "built-in"
    notes: list[str] = Field(default_factory=list)

    @property
    def fingerprint(self) -> str:
        return (self.sha256 or "")[:12]


class Resolution(DeferredModel):
    #: The folder to read (``--data-dir`` layout); None when no targeted benchmark has real files.
    data_dir: Path | None = None
    files: list[FileProvenance] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


#: realpath of every file resolved in this process -> its provenance (read by DataSource).
_RESOLVED: dict[str, FileProvenance] = {}


def parse_revisions(given: Iterable[str], registry: Registry | None = None) -> dict[str, str]:
    """``--data-revision NAME=REV`` values -> {name: rev}; ValueError (one line) for a value
    that is not NAME=REV or names a benchmark without released data."""
    registry = registry or load_registry()
    out: dict[str, str] = {}
    for value in given:
        name, eq, rev = str(value).partition("=")
        name, rev = name.strip(), rev.strip()
        if not eq or not name or not rev or any(c.isspace() for c in rev):
            raise ValueError(f"--data-revision {value!r}: expected NAME=REV, e.g. toolhop=main")
        spec = registry.get(name)
        choices = ", ".join(b.benchmark for b in registry.benchmarks if b.host != "none")
        if spec is None:
            why = refused_pin(name)
            raise ValueError(f"--data-revision {value!r}: no benchmark {name!r} with pinned data "
                             + (f"(its {why})" if why else f"(one of {choices})"))
        if spec.host == "none":
            raise ValueError(f"--data-revision {value!r}: {name} has no released data to choose a "
                             f"revision of (its data is this project's reconstruction)")
        out[name] = rev
    return out


def choices_for(names: Sequence[str], revisions: Mapping[str, str],
                registry: Registry | None = None) -> list[Choice]:
    registry = registry or load_registry()
    out = []
    for name in names:
        spec = registry.get(name)
        if spec is None and (why := refused_pin(name)) is not None:
            raise DataRefused(f"{name}: its real data cannot be had: its {why}")
        if spec is not None and spec.host != "none" and spec.files:
            out.append(Choice(spec, revisions.get(name) or str(spec.revision)))
    return out


def resolve(names: Sequence[str], revisions: Mapping[str, str] | None = None, *,
            fallback_dirs: Sequence[Path] = (), progress: ProgressFactory | None = None,
            force: bool = False, on_wait=None) -> Resolution:
    """Fetch and check every pinned file of ``names``; lay them out. Benchmarks with no pinned
    files (Meta-Bench, third-party ones) get their folder from the first of ``fallback_dirs``
    that has one (the project's ``data/``, as before there was real data). Raises
    :class:`DataRefused` (one line) on the first file that cannot be had or is not the pinned
    one."""
    registry = load_registry()
    revisions = dict(revisions or {})
    out = Resolution()
    links: dict[str, Path] = {}
    chosen = choices_for(names, revisions, registry)
    for choice in chosen:
        spec = choice.spec
        for file in spec.files:
            got = fetch(choice, file, progress=progress, force=force, on_wait=on_wait)
            checked = check(choice, file, got.path)
            if checked.problems:
                raise DataRefused(checked.problems[0])
            notes = list(checked.warnings)
            if not choice.pinned:
                notes.insert(0, f"revision {choice.revision} chosen with --data-revision, not the "
                                f"pinned {spec.revision}")
            prov = FileProvenance(
                benchmark=spec.benchmark, kind="real", source=spec.source,
                url=masked_url(file_url(spec, file, choice.revision)), upstream_path=file.path,
                revision=choice.revision, pinned_revision=spec.revision, pinned=choice.pinned,
                commit=got.commit, path=got.path, sha256=checked.sha256,
                expected_sha256=file.sha256 if choice.pinned else None, size=checked.size,
                records=checked.records, expected_records=file.records if choice.pinned else None,
                verified=choice.pinned and checked.verified and file.sha256 is not None,
                registry=registry.origin_of(spec.benchmark), notes=notes)
            out.files.append(prov)
            out.warnings += checked.warnings
            _RESOLVED[os.path.realpath(got.path)] = prov
            links[f"{spec.benchmark}/{file.name}"] = got.path
        if not choice.pinned:
            out.warnings.append(f"{spec.benchmark}: revision {choice.revision} chosen with "
                                f"--data-revision, not the pinned {str(spec.revision)[:12]}: the "
                                "sha256 and record checks only warn")
    fetched = {c.spec.benchmark for c in chosen}
    for name in names:
        if name in fetched:
            continue
        folder = next((d / name for d in fallback_dirs if (d / name).is_dir()), None)
        if folder is not None:
            links[name] = folder.resolve()
    if links:
        out.data_dir = make_view(links)
    return out


def make_view(links: Mapping[str, Path]) -> Path:
    """A folder with ``links`` (relative path -> target) as symbolic links, named by their
    content, made complete in a temporary folder and renamed into place: two runs making it at
    once both end with the same, whole folder."""
    key = hashlib.sha256(json.dumps(sorted((k, str(v)) for k, v in links.items())).encode())
    try:
        return _make_view(cache.assets_cache() / "views" / key.hexdigest()[:16], links)
    except OSError:  # a read-only cache (copied to an air-gapped machine): links in the temp dir
        import tempfile

        folder = Path(tempfile.gettempdir()) / f"pytest-toolbench-views-{os.getuid()}"
        return _make_view(folder / key.hexdigest()[:16], links)


def _make_view(root: Path, links: Mapping[str, Path]) -> Path:
    if _view_ok(root, links):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = root.with_name(f".{root.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    try:
        for rel, target in links.items():
            link = tmp / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.symlink(target, link, target_is_directory=Path(target).is_dir())
            except OSError:  # no symbolic links here: a hard link, else a copy
                if Path(target).is_dir():
                    shutil.copytree(target, link)
                else:
                    try:
                        os.link(os.path.realpath(target), link)
                    except OSError:
                        shutil.copy2(target, link)
        if root.exists() and not _view_ok(root, links):
            shutil.rmtree(root, ignore_errors=True)
        try:
            os.rename(tmp, root)
        except OSError:  # made by another process meanwhile
            if not _view_ok(root, links):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def _view_ok(root: Path, links: Mapping[str, Path]) -> bool:
    try:
        return root.is_dir() and all(
            os.path.realpath(root / rel) == os.path.realpath(target) for rel, target in links.items())
    except OSError:
        return False


def shown_path(path: str | Path) -> Path:
    """A path through a run's data folder as the file it links to (a report names the file in
    data/ or in the cache, not the folder of links)."""
    import tempfile

    absolute = Path(path).absolute()
    for views in (cache.assets_cache() / "views",
                  Path(tempfile.gettempdir()) / f"pytest-toolbench-views-{os.getuid()}"):
        if absolute.is_relative_to(views):
            return Path(os.path.realpath(path))
    return Path(path)


def resolved_files(benchmark: str) -> list[FileProvenance]:
    """The files this process fetched and checked for ``benchmark``, in fetch order."""
    return [prov for prov in _RESOLVED.values() if prov.benchmark == benchmark]


def resolved_provenance(path: str | Path) -> FileProvenance | None:
    """What this process resolved ``path`` (through any link) from, if it did."""
    return _RESOLVED.get(os.path.realpath(path))


def provenance_of_file(benchmark: str, path: str | Path, sha256: str, *, bundled: bool,
                       records: int | None = None) -> FileProvenance:
    """What a file a benchmark reads is: resolved here (real, with its pin), the bundled sample,
    this project's reconstruction, a file matching a pin by sha256 (real, e.g. --data-dir with the
    real files), or local files matching none."""
    found = resolved_provenance(path)
    if found is not None:
        return found
    try:
        registry = load_registry()
    except ValueError:
        registry = Registry(benchmarks=[])
    spec = registry.get(benchmark)
    if bundled:
        if spec is not None and spec.host == "none":
            return FileProvenance(benchmark=benchmark, kind="reconstruction", source=spec.source,
                                  path=Path(path), sha256=sha256, records=records,
                                  registry=registry.origin_of(benchmark),
                                  notes=["this project's reconstruction: no released data"])
        return FileProvenance(benchmark=benchmark, kind="sample", source="bundled sample",
                              path=Path(path), sha256=sha256, records=records,
                              registry=registry.origin_of(benchmark),
                              notes=["bundled sample, not the real benchmark"])
    match = _pin_matching(spec, sha256)
    if spec is not None and match is not None:
        return FileProvenance(
            benchmark=benchmark, kind="real", source=spec.source,
            url=masked_url(file_url(spec, match, str(spec.revision))), upstream_path=match.path,
            revision=spec.revision, pinned_revision=spec.revision, pinned=True, path=Path(path),
            sha256=sha256, expected_sha256=match.sha256, records=records,
            expected_records=match.records,
            verified=match.records is None or records is None or records == match.records,
            registry=registry.origin_of(benchmark),
            notes=["a local copy of the pinned file (sha256 matches)"])
    return FileProvenance(benchmark=benchmark, kind="local", path=Path(path), sha256=sha256,
                          records=records, registry=registry.origin_of(benchmark),
                          notes=["local files (--data-dir) matching no pinned file"])


def _pin_matching(spec: BenchmarkData | None, sha256: str):
    if spec is None:
        return None
    return next((f for f in spec.files if f.sha256 and f.sha256 == sha256), None)
