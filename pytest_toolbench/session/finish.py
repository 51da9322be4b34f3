"""The end of a run, without pytest: the results that arrived in, one :class:`RunRecord` out.

:func:`score_run` aggregates the metrics (per repeat with ``--repeats``), the benchmarks' own
tables, the ``--baseline`` comparison and the ``--gate`` / error-rate verdicts: the costly part,
done once. :func:`run_record` adds how the run ended (interrupted, cases missing, outputs
unwritten), the exit status that follows from it, and the run's identity: the run's one record,
built once. An output that fails while the reports are written from it is noted in that same
record (:func:`note_output_failures`), so every writer after it sees the failure and no two
writers see two different records.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_toolbench import __version__
from pytest_toolbench.benchmarks.base import Benchmark, HasReportTables
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.endpoint_pool import endpoint_totals
from pytest_toolbench.results import estimate_memo
from pytest_toolbench.results.aggregate import RunMetrics, aggregate
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.comparison import Comparison
from pytest_toolbench.results.gates import GateVerdict, error_rate_verdicts, evaluate_gates, parse_gate
from pytest_toolbench.output_errors import OutputFailure
from pytest_toolbench.results.repeats import RepeatStats, aggregate_repeats, repeat_stats, tables_per_repeat
from pytest_toolbench.results.provenance import provenance_dict
from pytest_toolbench.results.run_record import CacheCounts, Coverage, RunInfo, RunRecord
from pytest_toolbench.results.run_sections import TokenTotals
from pytest_toolbench.session.run_end import RunEnd, run_status, run_verdicts

if TYPE_CHECKING:
    from pytest_toolbench.benchmarks.data_source import DataSource
    from pytest_toolbench.compare.load import LoadedRun

__all__ = ["RunEnd", "RunIdentity", "Scores", "covered_cases", "note_output_failures",
           "run_record", "run_status", "run_verdicts", "score_run"]


@dataclass(frozen=True)
class Scores:
    """What the results score to: computed once per run."""

    metrics: RunMetrics
    repeats: RepeatStats | None
    comparison: Comparison | None
    #: The --gate verdicts and the per-scenario error-rate limits (empty without --gate).
    verdicts: list[GateVerdict]


@dataclass(frozen=True)
class RunIdentity:
    """Who ran what, where: the parts of the run's info the session knows before its end."""

    run_id: str
    started: float
    finished: float
    wall_s: float
    settings: RunSettings
    pytest_args: list[str]
    server: dict[str, Any] | None = None
    datasets: dict[str, str] = field(default_factory=dict)
    data_sources: list[dict[str, Any]] = field(default_factory=list)
    sandbox: dict[str, Any] | None = None
    startup_s: dict[str, float] = field(default_factory=dict)
    #: Benchmark -> cases in its whole suite (None: unknown).
    suite_sizes: Mapping[str, int] = field(default_factory=dict)


def score_run(results: Sequence[CaseResult], benchmarks: Mapping[str, Benchmark],
              settings: RunSettings, baseline: LoadedRun | None = None,
              data_sources: Sequence[DataSource] = (),
              keep_estimates_in: Path | None = None) -> Scores:
    """Metrics, repeat statistics, report tables, the baseline comparison and the gate verdicts
    of ``results``; ``benchmarks``: those the results belong to; ``baseline``: the loaded
    ``--baseline`` run (compare/load.py), if any; ``keep_estimates_in``: the response cache's
    folder, where the bootstrap intervals are kept for a re-run (results/estimate_memo.py)."""
    with estimate_memo.kept(keep_estimates_in):
        return _scores(list(results), benchmarks, settings, baseline, data_sources)


def _scores(results: list[CaseResult], benchmarks: Mapping[str, Benchmark], settings: RunSettings,
            baseline: LoadedRun | None, data_sources: Sequence[DataSource]) -> Scores:
    specs = {n: b.metrics for n, b in benchmarks.items()}
    order = {n: b.scenarios for n, b in benchmarks.items()}
    repeated = settings.repeats > 1
    metrics = (aggregate_repeats if repeated else aggregate)(
        results, specs, {n: b.breakdown_labels for n, b in benchmarks.items()},
        scenario_order=order, n_boot=settings.bootstrap_samples, seed=settings.seed,
    )
    repeats = (repeat_stats(results, specs, settings.repeats, n_boot=settings.bootstrap_samples,
                            seed=settings.seed, scenario_order=order) if repeated else None)
    for name, benchmark in benchmarks.items():
        if isinstance(benchmark, HasReportTables):
            own = sorted((r for r in results if r.benchmark == name), key=lambda r: r.case_id)
            if repeats is None:
                metrics.tables.extend(benchmark.report_tables(own))
            else:  # each repeat scored alone, as a run without repeats would be
                shown, per_repeat = tables_per_repeat(benchmark.report_tables, own)
                metrics.tables.extend(shown)
                repeats.per_repeat_tables.extend(per_repeat)
    comparison = None
    if baseline is not None:
        from pytest_toolbench.compare.baseline import compare_with_baseline

        comparison = compare_with_baseline(
            baseline, results, metrics, model=settings.model, n_boot=settings.bootstrap_samples,
            seed=settings.seed, data_sources=data_sources,
            allow_different_data=settings.allow_different_data)
    verdicts: list[GateVerdict] = []
    if settings.gates:
        from pytest_toolbench.compare.baseline import gate_baseline, with_data

        verdicts = evaluate_gates([parse_gate(g) for g in settings.gates], metrics,
                                  gate_baseline(baseline, comparison))
        verdicts += error_rate_verdicts(metrics, settings.max_error_rate)
        verdicts = with_data(verdicts, data_sources, baseline, comparison,
                             allow_different_data=settings.allow_different_data)
    return Scores(metrics=metrics, repeats=repeats, comparison=comparison, verdicts=verdicts)


def covered_cases(results: Sequence[CaseResult]) -> dict[str, int]:
    """Benchmark -> distinct cases that reported (a case run K times counts once)."""
    covered: dict[str, int] = {}
    for r in results:
        if (r.repeat or 1) == 1:
            covered[r.benchmark] = covered.get(r.benchmark, 0) + 1
    return covered


def run_record(scores: Scores, end: RunEnd, results: Sequence[CaseResult],
               identity: RunIdentity) -> RunRecord:
    """The run's one record: its info, metrics, verdicts (with the run's own, under --gate)
    and every case."""
    settings = identity.settings
    gated = bool(settings.gates)
    verdicts = [*scores.verdicts, *run_verdicts(end)] if gated else []
    status = run_status(end, verdicts, gated=gated)
    sizes = identity.suite_sizes
    # Every suite the run targeted is named, 0 where none of its cases reported (a run
    # interrupted before its first result; a selection that left a suite empty), so its index,
    # its data line and the leaderboard say what it was a run of.
    covered = {**dict.fromkeys(sizes, 0), **covered_cases(results)}
    endpoints = endpoint_totals([r.details for r in results])
    info = RunInfo(
        run_id=identity.run_id,
        started=identity.started,
        finished=identity.finished,
        toolbench_version=__version__,
        python=platform.python_version(),
        platform=platform.platform(),
        settings=settings.recorded(),
        server=identity.server,
        datasets=identity.datasets,
        data_sources=identity.data_sources,
        data=provenance_dict(identity.data_sources, sorted(covered)),
        partial=end.partial,
        interrupted_by=end.interrupted_by,
        pytest_stop=end.pytest_stop,
        missing_cases=list(end.missing),
        output_errors=[f.message() for f in end.output_failures],
        n_results=len(results),
        pytest_args=identity.pytest_args,
        sandbox=identity.sandbox,
        exit_status=status,
        coverage={n: Coverage(cases=c, suite_cases=sizes.get(n),
                              subset=sizes.get(n) is not None and c < sizes[n])
                  for n, c in sorted(covered.items())},
        endpoints=endpoints or None,
        wall_s=round(identity.wall_s, 1),
        startup_s={k: round(v, 1) for k, v in identity.startup_s.items()},
        cache=CacheCounts(model_calls=sum(r.model_calls for r in results),
                          replies_from_cache=sum(r.cached_calls for r in results),
                          results_from_cache=end.results_from_cache),
        usage=TokenTotals(prompt_tokens=sum(r.usage.prompt_tokens for r in results),
                          completion_tokens=sum(r.usage.completion_tokens for r in results)),
    )
    return RunRecord.build(run=info, metrics=scores.metrics, cases=list(results), gates=verdicts,
                           repeats=scores.repeats, baseline=scores.comparison)


def note_output_failures(record: RunRecord, end: RunEnd,
                         failures: Sequence[OutputFailure]) -> RunEnd:
    """Outputs that failed while the reports were written from ``record``: the record (the same
    object, so every writer after this sees it) becomes partial, names them, takes their failed
    verdict under --gate and the exit status that follows. Returns the run's new end; the record
    reads as :func:`run_record` would have built it with that end."""
    new = replace(end, output_failures=list(failures))
    gated = bool(record.run.settings.gates)
    if gated:  # the run's own verdicts are the last ones (run_record): replace them
        scored = record.gates[:len(record.gates) - len(run_verdicts(end))]
        record.gates = [*scored, *run_verdicts(new)]
    record.partial = record.run.partial = new.partial
    record.run.output_errors = [f.message() for f in new.output_failures]
    record.run.exit_status = run_status(new, record.gates, gated=gated)
    return new
