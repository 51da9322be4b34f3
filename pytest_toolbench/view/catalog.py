"""``toolbench list``: what can be run and selected, at 80 columns.

Per benchmark (the bundled ones and those installed through the ``pytest_toolbench.benchmarks``
entry point group, benchmarks/__init__.py): its scenarios, its metrics with their one-line
meanings (``MetricSpec.description``), its ``-m`` markers with the values that exist in the data
read, and where that data is. ``pytest --markers`` lists the marker names only (``hops`` once per
benchmark that has it) and no values; a misspelt value then selects nothing.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_toolbench.deferred_model import DeferredModel


WIDTH = 80
#: Most values listed per marker before "... (N more)".
SHOWN_VALUES = 12


class MarkerValues(DeferredModel):
    name: str
    keyword: str
    values: list[str]


class BenchmarkEntry(DeferredModel):
    name: str
    title: str
    source: str
    scenarios: list[str]
    metrics: list[tuple[str, str, list[str] | None]]
    markers: list[MarkerValues]
    data: list[str]
    data_error: str | None = None
    n_cases: int | None = None


def _source(benchmark: Any) -> str:
    module = benchmark.__module__ if isinstance(benchmark, type) else type(benchmark).__module__
    if module.startswith("pytest_toolbench."):
        return "built-in"
    return f"installed ({module.split('.')[0]}, entry point)"


def _natural(v: str) -> tuple:
    import re

    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", v) if p)


def describe(benchmark: Any, data_dir: Path | None) -> BenchmarkEntry:
    """One benchmark, its marker values read from ``data_dir`` (None: its bundled sample)."""
    metrics = [(m.name, m.description, list(m.scenarios) if m.scenarios else None)
               for m in benchmark.metrics]
    values: dict[str, set[str]] = {label: set() for label in benchmark.label_markers}
    data: list[str] = []
    error = None
    n_cases = None
    try:
        with warnings.catch_warnings():  # a dataset's own warnings belong to a run, not a listing
            warnings.simplefilter("ignore")
            cases = benchmark.load_cases(data_dir, tuple(benchmark.scenarios))
            if hasattr(benchmark, "data_sources"):
                data = [f"{s.path} ({s.records} {s.unit})" if getattr(s, "records", None) is not None
                        else str(s.path) for s in benchmark.data_sources(data_dir)]
        n_cases = len(cases)
        for c in cases:
            for label, v in c.labels.items():
                values.setdefault(label, set()).add(_literal(v))
    except Exception as exc:  # noqa: BLE001 - a benchmark without data here is listed, not fatal
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    markers = [MarkerValues(name=label, keyword=kw, values=sorted(values.get(label, ()), key=_natural))
               for label, kw in benchmark.label_markers.items()]
    return BenchmarkEntry(name=benchmark.name, title=benchmark.title, source=_source(benchmark),
                          scenarios=list(benchmark.scenarios), metrics=metrics, markers=markers,
                          data=data, data_error=error, n_cases=n_cases)


def _literal(value: Any) -> str:
    """The value as a ``-m`` expression spells it: ``3``, ``False``, ``'Film'``."""
    return repr(value) if isinstance(value, str) else str(value)


def _wrap(text: str, indent: str, hang: str | None = None) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=hang or indent,
                         break_on_hyphens=False) or [indent.rstrip()]


def render(entries: list[BenchmarkEntry], where: str) -> str:
    lines = [f"data: {where}", ""]
    for e in entries:
        lines.append(f"{e.name} - {e.title} [{e.source}]")
        lines += _wrap("scenarios: " + ", ".join(e.scenarios), "  ", "    ")
        lines.append("  metrics:")
        for name, meaning, only in e.metrics:
            scope = "" if only is None else f" [{', '.join(only)}]" if len(only) <= 2 else f" [{len(only)} scenarios]"
            lines += _wrap(f"{name}{scope}: {meaning or '(no description)'}", "    ", "        ")
        lines.append("  markers (-m):")
        lines += _wrap(f"scenario(name=...): {', '.join(e.scenarios)}", "    ", "        ")
        for m in e.markers:
            shown = m.values[:SHOWN_VALUES]
            more = f" ... ({len(m.values) - SHOWN_VALUES} more)" if len(m.values) > SHOWN_VALUES else ""
            vals = ", ".join(shown) + more if m.values else "(none in this data)"
            lines += _wrap(f"{m.name}({m.keyword}=...): {vals}", "    ", "        ")
        if e.data_error:
            lines += _wrap(f"data: not readable here ({e.data_error})", "  ", "    ")
        else:
            # data_sources is optional (benchmarks/base.py): without it the cases are counted,
            # and no "from" is left hanging before an empty list of files
            lines += _wrap(f"data: {e.n_cases} cases" + (" from" if e.data else ""), "  ", "    ")
            for d in e.data:
                lines += _wrap(d, "    ", "      ")
        lines.append("")
    return "\n".join(line.rstrip() for line in lines).rstrip("\n") + "\n"


def list_benchmarks(benchmarks: Mapping[str, Any], data_dir: Path | None) -> list[BenchmarkEntry]:
    return [describe(b, data_dir) for b in benchmarks.values()]


def add_list_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "list", help="list benchmarks, scenarios, metrics and marker values",
        description="List every benchmark (built-in and installed), its scenarios, its metrics "
                    "with their meanings, and its -m markers with the values in the data read.")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="read marker values from DIR/<benchmark>/ (the pytest option's layout; "
                        "default: the bundled samples, data/<benchmark>/; `toolbench data list` "
                        "shows the real data)")
    # positional as `toolbench data fetch toolhop` takes it; --benchmark kept for scripts
    p.add_argument("names", nargs="*", metavar="BENCHMARK",
                   help="only these benchmarks (default: every one)")
    p.add_argument("--benchmark", action="append", default=None, metavar="NAME",
                   help="only this benchmark (repeatable; the same as naming it)")
    p.add_argument("--json", action="store_true", help="print the listing as JSON")
    p.set_defaults(func=cmd_list)


def cmd_list(args: argparse.Namespace) -> int:
    import json

    from pytest_toolbench.benchmarks import registry, unknown_benchmark

    reg = registry()
    wanted = list(dict.fromkeys([*args.names, *(args.benchmark or [])]))
    if wanted:
        unknown = [n for n in wanted if n not in reg]
        if unknown:
            print(f"toolbench list: {unknown_benchmark(unknown[0])}", file=sys.stderr)
            return 2
        reg = {n: reg[n] for n in wanted}
    entries = list_benchmarks(reg, args.data_dir)
    if args.json:
        print(json.dumps([e.model_dump() for e in entries], indent=2))
        return 0
    where = (f"--data-dir {args.data_dir}" if args.data_dir else
             "the bundled samples (--data-dir DIR lists another folder's values)")
    sys.stdout.write(render(entries, where))
    return 0
