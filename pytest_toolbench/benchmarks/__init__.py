"""Benchmark registry: name -> Benchmark.

The bundled benchmarks are listed in :func:`registry`. Any installed package adds its own with one
entry point in the ``pytest_toolbench.benchmarks`` group, named as the benchmark, pointing at the
benchmark object (base.py's docstring and README.md describe the protocol):

.. code-block:: toml

    [project.entry-points."pytest_toolbench.benchmarks"]
    toy = "toy_benchmark.benchmark:TOY"
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # keep this package light: sandbox workers import benchmark jobs from it
    from pytest_toolbench.benchmarks.base import Benchmark
    from pytest_toolbench.benchmarks.declaration import Declaration

#: The entry point group through which other packages register benchmarks.
ENTRY_POINT_GROUP = "pytest_toolbench.benchmarks"


def registry() -> "dict[str, Benchmark]":
    from pytest_toolbench.benchmarks.familytool.benchmark import FAMILYTOOL
    from pytest_toolbench.benchmarks.metabench.benchmark import METABENCH
    from pytest_toolbench.benchmarks.toolbehonest.benchmark import TOOLBEHONEST
    from pytest_toolbench.benchmarks.toolhop.benchmark import TOOLHOP

    bundled = {b.name: b for b in (TOOLHOP, FAMILYTOOL, TOOLBEHONEST, METABENCH)}
    return {**bundled, **_registered(tuple(bundled))}


def declarations() -> "dict[str, Declaration]":
    """Every benchmark's name, title, options model and label markers, in :func:`registry`'s
    order: what every pytest command reads (flags, markers, option values) without loading the
    bundled benchmarks (benchmarks/declaration.py)."""
    from pytest_toolbench.benchmarks.declaration import Declaration
    from pytest_toolbench.benchmarks.familytool.options import DECLARATION as FAMILYTOOL
    from pytest_toolbench.benchmarks.metabench.options import DECLARATION as METABENCH
    from pytest_toolbench.benchmarks.toolbehonest.options import DECLARATION as TOOLBEHONEST
    from pytest_toolbench.benchmarks.toolhop.options import DECLARATION as TOOLHOP

    bundled = {d.name: d for d in (TOOLHOP, FAMILYTOOL, TOOLBEHONEST, METABENCH)}
    installed = {name: Declaration.of(b) for name, b in _registered(tuple(bundled)).items()}
    return {**bundled, **installed}


@functools.cache
def _registered(bundled: tuple[str, ...]) -> "dict[str, Benchmark]":
    """The benchmarks of the entry point group, read once per process (the registry is asked for
    on every result). A name that clashes with another benchmark, an object whose ``name`` is
    not its entry point's name (case ids and flags are keyed by that name), or one that does not
    load is left out, with its reason (entry_points.left_out): the other benchmarks still run."""
    from pytest_toolbench.benchmarks.base import Benchmark
    from pytest_toolbench.entry_points import load_group

    # what every command reads of a benchmark (its flags, markers, metrics): an object without
    # them would fail later, in pytest_addoption, as a traceback for every command
    needed = [*Benchmark.__annotations__, "load_cases", "make_runner"]

    def a_benchmark_of_its_name(point, benchmark):
        lacks = [attr for attr in needed if not hasattr(benchmark, attr)]
        if lacks:
            raise ValueError(f"not a benchmark (benchmarks/base.py Benchmark): it has no "
                             f"{', '.join(lacks)}")
        if benchmark.name != point.name:
            raise ValueError(f"the object's name is {benchmark.name!r}, not {point.name!r}")
        return benchmark

    return load_group(ENTRY_POINT_GROUP, "benchmark", taken=bundled, check=a_benchmark_of_its_name)


def unknown_benchmark(name: str) -> str:
    """Why no benchmark is called ``name``: its entry point's refusal, or the names there are."""
    from pytest_toolbench.entry_points import left_out_named

    refused = left_out_named(ENTRY_POINT_GROUP, name)
    if refused is not None:
        return f"no benchmark {name!r}: its {refused.text()}"
    return (f"no benchmark {name!r} (registered: {', '.join(registry())}); a package adds one "
            f"with an entry point in the group {ENTRY_POINT_GROUP!r}")
