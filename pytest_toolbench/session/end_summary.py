"""The run's record as the terminal shows it: the notes under the metrics and the summary text
(on one screen, and in full for Allure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from pytest_toolbench.benchmarks.data_source import DataSource
from pytest_toolbench.models.endpoint_pool import endpoint_notes
from pytest_toolbench.report.terminal import cache_note, coverage_notes, render_run
from pytest_toolbench.results.headline import Headline, headlines_of
from pytest_toolbench.results.partial_run import METRICS_COVER_ONLY
from pytest_toolbench.results.run_record import RunRecord


def run_notes(record: RunRecord, partial_notes: list[str], data_sources: Sequence[DataSource],
              suite_sizes: Mapping[str, int]) -> list[str]:
    """The lines under the metrics: partial results first, then the data, coverage, cache, tokens
    and endpoints."""
    notes = list(partial_notes)
    notes += [f"data: {d.describe()}" for d in data_sources]
    notes += coverage_notes({n: c.cases for n, c in record.run.coverage.items()}, suite_sizes,
                            partial_said=any(METRICS_COVER_ONLY in n for n in partial_notes))
    cache = record.run.cache
    cached = (cache_note(cache.model_calls, cache.replies_from_cache, cache.results_from_cache)
              if cache else None)
    notes += [cached] if cached else []
    tokens = record.run.tokens_text()
    notes += [f"tokens: {tokens}"] if tokens else []
    notes += endpoint_notes(record.run.endpoint_counts())
    return notes


def summaries(config: pytest.Config, record: RunRecord, notes: list[str],
              data_sources: Sequence[DataSource]) -> tuple[str, str]:
    """(the terminal's text, the full text for Allure); ``-v`` puts every table above the one
    screen the terminal ends on."""
    return render_run(record, notes=notes, data_sources=data_sources,
                          verbose=config.get_verbosity() > 0,
                          width=max(40, config.get_terminal_writer().fullwidth),
                          headlines=run_headlines(record))


def run_headlines(record: RunRecord) -> dict[str, Headline]:
    """Each benchmark of the run's declared headline (results/headline.py); a benchmark that
    declares none, or is no longer registered, shows each scenario's first metric."""
    from pytest_toolbench.benchmarks import registry

    names = {s.benchmark for s in record.metrics.scenarios}
    return headlines_of({n: b for n, b in registry().items() if n in names})
