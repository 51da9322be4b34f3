"""The result of comparing runs, as data: pydantic models, so a comparison is JSON in and out,
and a run record (run_record.py) holds its ``--baseline`` comparison as this type.

Run 0 is the reference (the first file of ``toolbench compare``, the ``--baseline`` run inside
pytest); every other run is compared with it, and each difference is *other minus reference*.
Computed in ``compare/``; kept here, beside the other result types, so every layer that reads a
run can read its comparison.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.results.aggregate import MetricPath
from pytest_toolbench.results.run_sections import TokenTotals


class McNemar(DeferredModel):
    """McNemar's test on paired binary outcomes.

    ``b``: cases the first run got right and the second wrong; ``c``: the other way round.
    Concordant pairs carry no information about the difference and do not enter the test.
    """

    b: int
    c: int
    p_value: float
    method: Literal["exact", "chi2"]


class CaseChanges(DeferredModel):
    """One scenario's cases that changed between the reference (A) and run ``run``."""

    run: int
    #: Right in the reference, wrong in this run (a regression when the reference is a baseline).
    worse: list[str] = Field(default_factory=list)
    #: Wrong in the reference, right in this run.
    better: list[str] = Field(default_factory=list)


class RunRef(DeferredModel):
    """Which run a column is: its label (the model, made unique), file and run id."""

    label: str
    model: str
    path: str | None = None
    run_id: str | None = None
    n_cases: int
    partial: bool = False
    #: Why the run is partial (RunInfo.partial_reason); None (not written) for a whole run.
    partial_reason: str | None = Field(default=None, exclude_if=lambda v: v is None)
    #: What data the run was on, per benchmark (results/provenance.py ``short_line``);
    #: None in comparisons recorded before provenance was kept.
    data: str | None = None
    #: The run's tokens (run.usage); None (not written) where its record kept none.
    usage: TokenTotals | None = Field(default=None, exclude_if=lambda v: v is None)
    #: Its model calls and how many of them the response cache answered (run.cache).
    model_calls: int | None = Field(default=None, exclude_if=lambda v: v is None)
    cached_calls: int | None = Field(default=None, exclude_if=lambda v: v is None)


class RunValue(DeferredModel):
    """One run's value of a metric as that run reports it (all of its scored cases)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


class PairedDiff(DeferredModel):
    """``run`` minus the reference over the cases both scored, with a paired bootstrap interval;
    McNemar's test when the metric's per-case values are all 0/1 in both runs."""

    run: int
    n_paired: int
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    mcnemar: McNemar | None = None


class MetricComparison(DeferredModel):
    benchmark: str
    scenario: str
    metric: str
    label: str | None = None
    group: str | None = None
    higher_is_better: bool = True
    is_rate: bool = True
    #: One entry per run (None: that run has no value for this metric or subgroup).
    values: list[RunValue | None]
    #: One entry per run after the reference, in run order.
    diffs: list[PairedDiff]

    @property
    def path(self) -> str:
        sub = f"[{self.label}={self.group}]" if self.label is not None else ""
        return f"{self.benchmark}.{self.scenario}{sub}.{self.metric}"

    @property
    def row_name(self) -> str:
        return self.metric if self.label is None else f"{self.metric} [{self.label}={self.group}]"


class PairCoverage(DeferredModel):
    """How the cases of one scenario pair up between the reference and ``run``.

    Nothing is dropped silently: cases in one run only are counted here, and paired cases where
    either run hit an infrastructure error (so no metric can pair them) are counted apart."""

    run: int
    n_paired: int
    only_in_reference: int
    only_in_run: int
    error_in_either: int = 0


class ScenarioComparison(DeferredModel):
    benchmark: str
    scenario: str
    coverage: list[PairCoverage]
    metrics: list[MetricComparison]
    #: Per run after the reference: the cases that went from right to wrong and back (by id).
    changes: list[CaseChanges] = Field(default_factory=list)


class UncomparedBenchmark(DeferredModel):
    """A benchmark no run can be compared on with the reference: the reference has no case of
    it, or no other run has. Its values are in each run's own report; as a table it was rows of
    ``-`` and ``n/a`` and scenarios of "0 paired" (a ToolHop run against a ToolHop + FamilyTool
    one: 469 lines, 440 of them FamilyTool's)."""

    benchmark: str
    #: Cases of it in each run, in run order (0: the run has none).
    n_cases: list[int]


class Comparison(DeferredModel):
    runs: list[RunRef]
    confidence: float
    n_boot: int
    seed: int
    scenarios: list[ScenarioComparison] = Field(default_factory=list)
    #: Benchmarks whose metric declarations were unknown (values shown, no paired statistics).
    unknown_benchmarks: list[str] = Field(default_factory=list)
    #: How the runs' data differ, one line per run that differs from the reference: non-empty
    #: only for a comparison made with --allow-different-data (otherwise it is refused).
    different_data: list[str] = Field(default_factory=list)
    #: Benchmarks left out of ``scenarios`` because no run pairs with the reference on them.
    not_compared: list[UncomparedBenchmark] = Field(default_factory=list,
                                                   exclude_if=lambda v: not v)

    def find(self, path: str | MetricPath) -> MetricComparison | None:
        """The row for a metric path such as ``toolhop.mandatory[hops=3].accuracy``."""
        p = path if isinstance(path, MetricPath) else MetricPath.parse(path)
        for s in self.scenarios:
            if (s.benchmark, s.scenario) != (p.benchmark, p.scenario):
                continue
            for m in s.metrics:
                if (m.metric, m.label, m.group) == (p.metric, p.label, p.group):
                    return m
        return None

    def scenario(self, benchmark: str, scenario: str) -> ScenarioComparison | None:
        return next(
            (s for s in self.scenarios if (s.benchmark, s.scenario) == (benchmark, scenario)), None
        )

    def benchmarks(self) -> list[str]:
        out: list[str] = []
        for s in self.scenarios:
            if s.benchmark not in out:
                out.append(s.benchmark)
        return out
