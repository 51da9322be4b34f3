"""What data a run's numbers were computed on, per benchmark, as every output says it, and whether
two runs may be compared.

A run's ``run.data_sources`` (benchmarks/data_source.py, one entry per file read) are summed up
per benchmark as a :class:`BenchmarkData`: the kind (``real``, ``sample``, ``reconstruction`` for
Meta-Bench, ``local`` for ``--data-dir`` files matching no pin, ``unknown`` for a run recorded
before provenance was kept), the revision read, and a fingerprint (the first 12 hex digits of the
sha256 over the benchmark's sorted ``benchmark:sha256`` pairs, as
``benchmarks.data_source.data_fingerprint`` computes it: the same files give the same fingerprint
whatever their paths).

Two runs are comparable (``--baseline``, ``toolbench compare``) when every benchmark both have
was read from the same files (same fingerprint) and at least one case pairs. A run without
provenance (an older report) is "unknown": it is refused only when no case pairs. Anything else is
refused unless ``--allow-different-data`` is given; the comparison then says so everywhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from pytest_toolbench.deferred_model import DeferredModel


#: How each kind reads in the outputs.
KIND_TEXT = {
    "real": "real",
    "sample": "bundled sample (not the real benchmark)",
    "reconstruction": "this project's reconstruction (nothing released upstream)",
    "local": "local files (no pin matched)",
    "mixed": "mixed (real and other files)",
    "unknown": "unknown (recorded before data provenance)",
}
#: The short form, for a gate line or a table cell.
KIND_SHORT = {"sample": "sample", "reconstruction": "reconstruction", "unknown": "unknown data"}

ALLOW_FLAG = "--allow-different-data"


class BenchmarkData(DeferredModel):
    """One benchmark's data in a run."""

    benchmark: str
    kind: str = "unknown"
    #: The revision read (real data; None for the sample, a reconstruction or local files).
    revision: str | None = None
    #: False: a revision other than the pinned one (--data-revision).
    pinned: bool | None = None
    source: str | None = None
    #: None: unknown (a file without a recorded sha256).
    fingerprint: str | None = None
    files: int = 0
    #: The benchmark's records (a DataSource whose unit is "records"): a FamilyTool KG's
    #: triples, or Meta-Bench's tool library, are not records of the benchmark.
    records: int | None = None

    @property
    def known(self) -> bool:
        return self.kind != "unknown" and self.fingerprint is not None

    def short(self, *, name: bool = True) -> str:
        """``toolhop real@b439d72a1b2c fp 1a2b3c4d5e6f``, ``toolhop sample fp 1a2b3c4d5e6f``
        (without the benchmark's name: ``name=False``)."""
        kind = KIND_SHORT.get(self.kind, self.kind)
        if self.revision:
            kind += f"@{self.revision[:12]}"
            if self.pinned is False:
                kind += " (not pinned)"
        fp = f" fp {self.fingerprint}" if self.fingerprint else ""
        return f"{self.benchmark} {kind}{fp}" if name else f"{kind}{fp}"

    def text(self) -> str:
        """``toolhop: real, huggingface:... revision b439d72a1b2c, fingerprint 1a2b3c4d5e6f``."""
        parts = [KIND_TEXT.get(self.kind, self.kind)]
        if self.revision:
            where = f"{self.source} " if self.source and self.kind == "real" else ""
            rev = f"{where}revision {self.revision[:12]}"
            if self.pinned is False:
                rev += " (not the pinned one)"
            parts.append(rev)
        elif self.kind in ("sample", "reconstruction", "local"):
            parts.append("no upstream revision")
        if self.fingerprint:
            parts.append(f"fingerprint {self.fingerprint}")
        return f"{self.benchmark}: {', '.join(parts)}"


def _fingerprint(pairs: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(pairs)).encode()).hexdigest()[:12]


def _field(d: Any, name: str) -> Any:
    return d.get(name) if isinstance(d, dict) else getattr(d, name, None)


def _kind(d: Any) -> str:
    kind = _field(d, "kind")
    if isinstance(kind, str) and kind:
        return kind
    return "sample" if _field(d, "bundled") else "unknown"  # an older report: no kind kept


def is_records(source: Any) -> bool:
    """Whether a source counts the benchmark's records (an older report keeps no unit: yes)."""
    return (_field(source, "unit") or "records") == "records"


def run_data(data_sources: Iterable[Any], benchmarks: Iterable[str] = ()) -> list[BenchmarkData]:
    """Per benchmark (in first-seen order, then ``benchmarks`` without any source: unknown), what
    its data was. ``data_sources``: DataSource objects or their JSON dumps (a report's)."""
    grouped: dict[str, list[Any]] = {}
    for d in data_sources:
        grouped.setdefault(str(_field(d, "benchmark") or ""), []).append(d)
    out = []
    for name, group in grouped.items():
        kinds = {_kind(d) for d in group}
        kind = kinds.pop() if len(kinds) == 1 else ("unknown" if "unknown" in kinds else "mixed")
        shas = [_field(d, "sha256") for d in group]
        fp = _fingerprint(f"{name}:{s}" for s in shas) if all(shas) else None
        revisions = sorted({str(r) for d in group if (r := _field(d, "revision"))})
        pinned = [_field(d, "pinned") for d in group if _field(d, "pinned") is not None]
        records = [_field(d, "records") for d in group if is_records(d)]
        sources = sorted({str(s) for d in group if (s := _field(d, "source")) and _kind(d) == "real"})
        out.append(BenchmarkData(
            benchmark=name, kind=kind, revision=",".join(r[:12] for r in revisions) or None,
            pinned=all(pinned) if pinned else None, source=", ".join(sources) or None,
            fingerprint=fp, files=len(group),
            records=sum(records) if all(isinstance(r, int) for r in records) else None))
    for name in benchmarks:
        if name not in grouped:
            out.append(BenchmarkData(benchmark=name))
    return out


def find(data: Sequence[BenchmarkData], benchmark: str) -> BenchmarkData:
    return next((d for d in data if d.benchmark == benchmark), BenchmarkData(benchmark=benchmark))


def data_line(data: Sequence[BenchmarkData]) -> str:
    """Every benchmark's data on one line (JUnit properties, Allure, ``toolbench runs --json``)."""
    return "; ".join(d.text() for d in data) or "unknown (no data recorded)"


def short_line(data: Sequence[BenchmarkData]) -> str:
    return ", ".join(d.short() for d in data) or "unknown data"


def run_fingerprint(data_sources: Iterable[Any]) -> str | None:
    """One fingerprint over every file of the run (None when a file has no sha256 or none)."""
    items = list(data_sources)
    pairs = [f"{_field(d, 'benchmark')}:{_field(d, 'sha256')}" for d in items]
    if not items or not all(_field(d, "sha256") for d in items):
        return None
    return _fingerprint(pairs)


def provenance_dict(data_sources: Iterable[Any], benchmarks: Iterable[str] = ()) -> dict[str, Any]:
    """The JSON report's ``run.data``: kind per benchmark, the run's fingerprint, one line."""
    items = list(data_sources)
    data = run_data(items, benchmarks)
    kinds = sorted({d.kind for d in data})
    return {
        "kind": kinds[0] if len(kinds) == 1 else ("mixed" if kinds else "unknown"),
        "fingerprint": run_fingerprint(items),
        "benchmarks": [d.model_dump(mode="json") for d in data],
        "text": data_line(data),
    }


def differences(ref: Sequence[BenchmarkData], other: Sequence[BenchmarkData],
                shared: Iterable[str]) -> list[str]:
    """Per benchmark both runs have: how their data differs (empty: the same data, or unknown on
    a side, which :func:`refusal` judges by the cases instead)."""
    out = []
    for name in sorted(set(shared)):
        a, b = find(ref, name), find(other, name)
        if not (a.known and b.known) or a.fingerprint == b.fingerprint:
            continue
        what = []
        if a.kind != b.kind:
            what.append("real vs sample" if {a.kind, b.kind} == {"real", "sample"}
                        else f"{a.kind} vs {b.kind}")
        if a.revision != b.revision:
            what.append("another revision")
        what.append("another fingerprint")
        out.append(f"{name}: {a.short(name=False)} vs {b.short(name=False)} ({', '.join(what)})")
    return out


def unknown_side(ref: Sequence[BenchmarkData], other: Sequence[BenchmarkData],
                 shared: Iterable[str]) -> list[str]:
    """Benchmarks whose data one of the runs did not record (older reports)."""
    return [n for n in sorted(set(shared)) if not (find(ref, n).known and find(other, n).known)]


def mismatch(ref_name: str, ref: Sequence[BenchmarkData], other_name: str,
             other: Sequence[BenchmarkData], shared: Iterable[str], *, n_common: int,
             n_only_ref: int, n_only_other: int) -> str | None:
    """How two runs' data differ (one line naming both), or None when they may be compared.
    ``shared``: the benchmarks both have; ``n_common``: the cases they share."""
    shared = sorted(set(shared))
    diff = differences(ref, other, shared)
    if diff:
        return f"{ref_name} and {other_name} ran on different data: {'; '.join(diff)}"
    if n_common == 0:
        unknown = unknown_side(ref, other, shared)
        why = (f"; the data of {', '.join(unknown)} is unknown in one of them (recorded before "
               f"data provenance)" if unknown else "")
        return (f"{ref_name} and {other_name} have no case in common (only in {ref_name}: "
                f"{n_only_ref}, only in {other_name}: {n_only_other}){why}")
    return None


def refusal_line(what: str) -> str:
    """The one line a refused comparison prints (exit 4)."""
    return f"{what}; the numbers are not comparable ({ALLOW_FLAG} compares them anyway)"


def allowed_note(what: str) -> str:
    """What every output says of a comparison made with --allow-different-data."""
    return f"DIFFERENT DATA, compared anyway ({ALLOW_FLAG}): {what}"


__all__ = ["ALLOW_FLAG", "BenchmarkData", "allowed_note", "data_line", "differences", "find",
           "mismatch", "provenance_dict", "refusal_line", "run_data", "run_fingerprint", "short_line",
           "unknown_side"]
