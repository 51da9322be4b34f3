"""What pytest reads of a benchmark in every command, before any case: its name, title, options
(the ``--<name>-<field>`` flags and their values) and the markers of its case labels.

Every pytest command of an environment with the plugin installed declares the benchmarks' flags
and markers and builds their option values, most of them commands with no toolbench test (a
project's own unit tests, ``--help``). A bundled benchmark states its declaration in its light
``options.py``, and its benchmark class takes these four attributes from there, so such a
command never loads the benchmarks' modules (their records, runners, metrics: ~0.1 s of
imports; perf/README.md, twenty-third pass). An installed benchmark's declaration is read from
its registered object (benchmarks/__init__.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel


@dataclass(frozen=True)
class Declaration:
    name: str
    #: Human-readable name (option group titles, report headings), e.g. "ToolHop".
    title: str
    #: The benchmark's own options; each field is a ``--<name>-<field>`` flag (benchmarks/options.py).
    options_model: type[BaseModel]
    #: Marker name -> keyword used in the marker, e.g. {"hops": "n", "domain": "name"}.
    label_markers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, benchmark: Any) -> Declaration:
        """An installed benchmark's declaration, from its object (benchmarks/base.py Benchmark)."""
        return cls(benchmark.name, benchmark.title, benchmark.options_model, dict(benchmark.label_markers))
