"""Which data a run used: each file's path, record count and checksum, and whether it is the
small sample bundled with the harness rather than the real benchmark.

Benchmarks describe their files through the optional ``data_sources`` hook
(:class:`~pytest_toolbench.benchmarks.base.HasDataSources`); the summary and the JSON report show
them, so a number is never read without knowing what it was computed on. Each source also says
what the file is (``kind``: the real benchmark, the bundled sample, this project's reconstruction,
or local files), where the real one comes from (source, URL, revision, whether that is the pinned
revision), what it was checked against (expected sha256 and records) and a short fingerprint:
``pytest_toolbench.datasets`` fills these in.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from typing import Literal

from pydantic import Field

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.fileio import file_version
from pytest_toolbench.package_data import BUNDLED_DATA_DIR

#: What a data file is (pytest_toolbench.datasets.resolve.FileProvenance.kind).
DataKind = Literal["real", "sample", "reconstruction", "local"]


#: What ``DataSource.records`` counts in a file that holds no benchmark records.
KG_TRIPLES = "KG triples"
LIBRARY_TOOLS = "library tools"


class DataSource(DeferredModel):
    benchmark: str
    path: Path
    #: The items of the file that its pin counts: the benchmark's records, or ``unit``'s.
    records: int
    #: What ``records`` counts: "records" (the benchmark's samples), or the items of a file
    #: the cases read beside them (FamilyTool's KG: KG_TRIPLES): summed apart, so a
    #: summary never adds KG triples to records.
    unit: str = "records"
    sha256: str
    #: True for the harness's own small sample (data/), which is not the real benchmark.
    bundled: bool = False
    # --- provenance (pytest_toolbench/datasets) ---
    #: real: the benchmark's own file (fetched and checked, or a local copy matching its pin);
    #: sample: the bundled sample; reconstruction: this project's reconstruction (Meta-Bench);
    #: local: --data-dir files matching no pin.
    kind: DataKind = "local"
    #: ``huggingface:owner/name``, ``github:owner/name``, "bundled sample" or "this project's
    #: reconstruction".
    source: str | None = None
    url: str | None = None
    #: The file's path in the upstream repository.
    upstream_path: str | None = None
    #: The revision read, the pinned one, and whether they are the same (False: chosen with
    #: --data-revision; the pins' checks then only warned).
    revision: str | None = None
    pinned_revision: str | None = None
    pinned: bool | None = None
    #: The commit the file was read at, where known.
    commit: str | None = None
    expected_sha256: str | None = None
    expected_records: int | None = None
    size: int | None = None
    #: Every check against the pin held.
    verified: bool = False
    #: Short fingerprint of the file (its sha256's first 12 hex digits).
    fingerprint: str = ""
    #: Where the pins came from ("built-in" or $TOOLBENCH_DATA_REGISTRY's file).
    registry: str = "built-in"
    notes: list[str] = Field(default_factory=list)

    @classmethod
    def for_file(cls, benchmark: str, path: Path, records: int, *, bundled: bool,
                 unit: str = "records") -> DataSource:
        """The file's source, its provenance filled in (``datasets.resolve.provenance_of_file``):
        a real file is shown at its place in the cache, not through the run's data folder."""
        # on first use: the pins and the fetch code stay out of processes that never read data
        from pytest_toolbench.datasets.resolve import provenance_of_file, shown_path

        sha = file_sha256(path)
        prov = provenance_of_file(benchmark, path, sha, bundled=bundled, records=records)
        return cls(
            benchmark=benchmark, path=prov.path if prov.kind == "real" and prov.path else shown_path(path),
            records=records, unit=unit, sha256=sha, bundled=bundled, kind=prov.kind, source=prov.source,
            url=prov.url, upstream_path=prov.upstream_path, revision=prov.revision,
            pinned_revision=prov.pinned_revision, pinned=prov.pinned, commit=prov.commit,
            expected_sha256=prov.expected_sha256, expected_records=prov.expected_records,
            size=_size(path), verified=prov.verified, fingerprint=sha[:12],
            registry=prov.registry, notes=list(prov.notes))

    @classmethod
    def fetched_for(cls, benchmark: str) -> list[DataSource]:
        """The files this process fetched and verified for ``benchmark`` (``--data real``), for
        a benchmark that names no sources of its own (``HasDataSources`` is optional): an
        installed benchmark's pinned files are then still in every report. A process that never
        loaded the fetch code fetched nothing (the pins stay out of runs that read no real
        data, session/data.py)."""
        import sys

        resolve = sys.modules.get("pytest_toolbench.datasets.resolve")
        if resolve is None:
            return []
        return [cls.for_file(benchmark, Path(prov.path), prov.records or 0, bundled=False)
                for prov in resolve.resolved_files(benchmark) if prov.path is not None]

    def describe(self) -> str:
        """``toolhop: data/toolhop/ToolHop.json, 20 records, sha256 1a2b3c4d5e6f``, then what the
        data is (bundled sample, this project's reconstruction, real with its revision)."""
        if self.kind == "reconstruction":
            note = " - this project's reconstruction (nothing released upstream)"
        elif self.bundled:
            note = " - bundled sample (not the real benchmark)"
        elif self.kind == "real" and self.revision:
            note = f" - real, {self.source} @ {self.revision[:12]}"
            if self.pinned is False:
                note += f" (not the pinned {str(self.pinned_revision)[:12]})"
        else:
            note = ""
        return (f"{self.benchmark}: {self.path}, {self.records} {self.unit}, "
                f"sha256 {self.sha256[:12]}{note}")


def data_fingerprint(sources: "list[DataSource] | list[dict]") -> str:
    """One short fingerprint of a run's data: the first 12 hex digits of the sha256 over every
    (benchmark, file sha256) pair, sorted; the same files give the same fingerprint whatever
    their paths. Sources may be DataSource objects or their JSON dumps (a report's)."""
    pairs = sorted(
        f"{d['benchmark'] if isinstance(d, dict) else d.benchmark}:"
        f"{d['sha256'] if isinstance(d, dict) else d.sha256}" for d in sources)
    return hashlib.sha256("\n".join(pairs).encode()).hexdigest()[:12]


def _size(path: Path) -> int | None:
    try:
        return Path(path).stat().st_size
    except OSError:
        return None


def file_sha256(path: str | Path) -> str:
    """The file's sha256, computed once per file version: the data fingerprint at the start of a
    run and the report's checksums at its end read the same (possibly large) files."""
    return _sha256_of_version(*file_version(path))


@functools.lru_cache(maxsize=256)
def _sha256_of_version(path: str, mtime_ns: int, ctime_ns: int, size: int, inode: int, device: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_within(path: Path, folder: Path) -> bool:
    """Whether ``path`` lies inside ``folder`` (both resolved)."""
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def is_bundled(path: Path, data_dir: Path | None) -> bool:
    """Whether ``path`` is one of the harness's own samples: a file of the bundled folder, or a
    byte-identical copy at the same place in ``data_dir``. The copy is what a checkout run on a
    wheel install reads (``--data sample`` takes the checkout's ``data/``, options.py); it is the
    sample all the same, and called a user's local files it made such a run's data "mixed" and
    its sample's deliberate oddities a warning."""
    if is_within(path, BUNDLED_DATA_DIR):
        return True
    if data_dir is None:
        return False
    try:
        twin = BUNDLED_DATA_DIR / Path(path).resolve().relative_to(Path(data_dir).resolve())
    except ValueError:
        return False
    return twin.is_file() and Path(path).is_file() and file_sha256(twin) == file_sha256(path)
