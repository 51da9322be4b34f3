"""Benchmark registry: name -> Benchmark. Register a new benchmark with one line here."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # keep this package light: sandbox workers import benchmark jobs from it
    from pytest_toolbench.benchmarks.base import Benchmark


def registry() -> "dict[str, Benchmark]":
    from pytest_toolbench.benchmarks.metabench.benchmark import METABENCH
    from pytest_toolbench.benchmarks.toolhop.benchmark import TOOLHOP

    return {b.name: b for b in (TOOLHOP, METABENCH)}
