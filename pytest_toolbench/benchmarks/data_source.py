"""Which data a run used: each file's path, record count and checksum, and whether it is the
small sample bundled with the harness rather than the real benchmark.

Benchmarks describe their files through the optional ``data_sources`` hook
(:class:`~pytest_toolbench.benchmarks.base.HasDataSources`); the summary and the JSON report show
them, so a number is never read without knowing what it was computed on.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from pydantic import BaseModel

from pytest_toolbench.fileio import file_version

#: The harness's own small samples (``data/`` at the repository root), used when no --data-dir.
BUNDLED_DATA_DIR = Path(__file__).resolve().parents[2] / "data"


class DataSource(BaseModel):
    benchmark: str
    path: Path
    records: int
    sha256: str
    #: True for the harness's own small sample (data/), which is not the real benchmark.
    bundled: bool = False

    @classmethod
    def for_file(cls, benchmark: str, path: Path, records: int, *, bundled: bool) -> DataSource:
        return cls(benchmark=benchmark, path=path, records=records, sha256=file_sha256(path),
                   bundled=bundled)

    def describe(self) -> str:
        """``toolhop: data/toolhop/ToolHop.json, 20 records, sha256 1a2b3c4d5e6f``."""
        note = " - bundled sample (not the real benchmark)" if self.bundled else ""
        return (f"{self.benchmark}: {self.path}, {self.records} records, "
                f"sha256 {self.sha256[:12]}{note}")


def file_sha256(path: str | Path) -> str:
    """The file's sha256, computed once per file version: the data fingerprint at the start of a
    run and the report's checksums at its end read the same (possibly large) files."""
    return _sha256_of_version(*file_version(path))


@functools.lru_cache(maxsize=256)
def _sha256_of_version(path: str, mtime_ns: int, size: int, inode: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_within(path: Path, folder: Path) -> bool:
    """Whether ``path`` lies inside ``folder`` (both resolved; used to flag bundled samples)."""
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True
