"""ToolHop as the harness sees it: cases, metrics, labels and runner (Benchmark protocol)."""

from __future__ import annotations

from pathlib import Path

from pytest_toolbench.benchmarks.base import BenchmarkEnv, Case
from pytest_toolbench.benchmarks.data_source import BUNDLED_DATA_DIR, DataSource, is_bundled
from pytest_toolbench.benchmarks.toolhop.decoding import toolhop_sampling
from pytest_toolbench.benchmarks.toolhop.open_parsers import TOOLHOP_OPEN_PARSER
from pytest_toolbench.benchmarks.toolhop.options import DECLARATION, ToolHopOptions
from pytest_toolbench.benchmarks.toolhop.prompts import SCENARIOS
from pytest_toolbench.benchmarks.toolhop.runner import NoToolSandbox, ToolHopRunner, ToolSandboxLike
from pytest_toolbench.benchmarks.toolhop.schema import (
    ToolHopEntry,
    ToolHopRecord,
    load_toolhop_dir_entries,
    load_toolhop_entries,
    toolhop_files,
)
from pytest_toolbench.config import RunSettings
from pytest_toolbench.results.headline import Headline
from pytest_toolbench.results.metrics import MetricSpec

#: The bundled sample lives at <repo>/data/toolhop (read with --data sample and no --data-dir).
DEFAULT_DATA_DIR = BUNDLED_DATA_DIR


class ToolHopBenchmark:
    name = DECLARATION.name
    title = DECLARATION.title
    options_model = DECLARATION.options_model
    #: --decoding open: evaluation_open.py's parse_qwen25 / parse_llama31 read the raw text.
    open_protocol = "parsed"
    open_parser = TOOLHOP_OPEN_PARSER
    scenarios: tuple[str, ...] = SCENARIOS
    metrics: tuple[MetricSpec, ...] = (
        MetricSpec(
            name="accuracy",
            kind="mean",
            value="answer_correct",
            description="answer correctness, upstream scorer (code/evaluation_*.py); no answer counts wrong",
        ),
        MetricSpec(
            name="query_error_rate",
            kind="mean",
            value="query_error",
            scenarios=("mandatory",),
            higher_is_better=False,
            description="share of queries with >=1 invocation error (paper Table 4 'Query')",
        ),
        MetricSpec(
            name="instance_error_rate",
            kind="ratio",
            value="error_calls",
            denominator="calls",
            scenarios=("mandatory",),
            higher_is_better=False,
            description="erroneous tool calls / all tool calls (paper Table 4 'Instance')",
        ),
    )
    #: The end screen: answer accuracy per scenario (direct, mandatory, free), as paper Table 3,
    #: with its CI and n; ``-v`` adds the invocation error rates and the breakdown by hops.
    headline = Headline(metrics=("accuracy",))
    breakdown_labels: tuple[str, ...] = ("hops",)
    label_markers: dict[str, str] = DECLARATION.label_markers

    def load_cases(self, data_dir: Path | None, scenarios: tuple[str, ...], options: object = None) -> list[Case]:
        """One case per (record, scenario): scenario-major, then file order."""
        unknown = [s for s in scenarios if s not in self.scenarios]
        if unknown:
            raise ValueError(f"unknown ToolHop scenario(s) {unknown}; expected {self.scenarios}")
        entries = load_toolhop_dir_entries(Path(data_dir or DEFAULT_DATA_DIR) / "toolhop")
        return [self.make_case(entry, scenario) for scenario in scenarios for entry in entries]

    def data_sources(self, data_dir: Path | None, options: object = None) -> list[DataSource]:
        """Each ``toolhop/*.json`` file the cases come from (HasDataSources)."""
        folder = Path(data_dir or DEFAULT_DATA_DIR) / "toolhop"
        return [
            DataSource.for_file(
                self.name, path, len(load_toolhop_entries(path)), bundled=is_bundled(path, folder.parent)
            )
            for path in toolhop_files(folder)
        ]

    def make_case(self, entry: ToolHopEntry | ToolHopRecord, scenario: str) -> Case:
        """The case keeps where its record lies in its file (benchmarks/packed.py); ``case.sample``
        reads it back."""
        if isinstance(entry, ToolHopRecord):  # a record at hand (tests, tools)
            entry = ToolHopEntry.of(entry)
        return Case(
            id=f"toolhop-{entry.id}-{scenario}",
            benchmark=self.name,
            scenario=scenario,
            sample_id=entry.sample_id,
            labels=entry.labels,
            stored_sample=entry.kept,
        )

    def make_runner(self, env: BenchmarkEnv) -> ToolHopRunner:
        """The sandbox starts only when a case of this process can call a tool. A direct-only run
        runs no tool code: it neither pays for the pool's start nor needs the kernel's isolation
        layers (it would stop without them), and its report says no sandbox was started."""
        calls_tools = any(case.scenario != "direct" for case in env.cases(self.name))
        return self.runner(env.settings, env.sandbox if calls_tools else NoToolSandbox())

    def runner(self, settings: RunSettings, sandbox: ToolSandboxLike) -> ToolHopRunner:
        """The runner over a given sandbox (tests and tools hand in their own)."""
        return ToolHopRunner(sandbox, settings.options_for(self.name, ToolHopOptions),
                             toolhop_sampling(settings))


TOOLHOP = ToolHopBenchmark()
