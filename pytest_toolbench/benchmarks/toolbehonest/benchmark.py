"""ToolBeHonest as the harness sees it: cases, metrics, labels, runner and tables.

Cases: every record x level (L1 detecting, L2 planning, L3 diagnosing) x variant (solvable,
unsolvable), in upstream's order (subtask by first appearance, file order, L1->L3, solvable
then unsolvable; upstream ``utils/process.py``). Case ids carry upstream's position ``<subtask>-<k>`` (``convert_hf_data``'s ``results[subtask][level][k]``).

``Case.scenario`` is the paper's scenario (MNT, PT, LFT), so the shared ``scenario(name=...)``
marker, ``--scenario`` and the per-scenario metric tables are exactly the paper's Table 2
groups (the unsolvable L1-EM/L2-PR/L3-PR/L3-MS declared below). Level, subtask and variant are
labels with their own markers: ``level(n=1)``, ``subtask(name='os')``, ``solvable(value=False)``.
"""

from __future__ import annotations

from pathlib import Path

from pytest_toolbench.benchmarks.base import BenchmarkEnv, Case, require_embedder
from pytest_toolbench.benchmarks.data_source import BUNDLED_DATA_DIR, DataSource, is_bundled
from pytest_toolbench.benchmarks.toolbehonest import report
from pytest_toolbench.benchmarks.toolbehonest.options import DECLARATION, ToolBeHonestOptions
from pytest_toolbench.benchmarks.toolbehonest.prompts import LEVELS
from pytest_toolbench.benchmarks.toolbehonest.runner import ToolBeHonestRunner, upstream_sampling
from pytest_toolbench.benchmarks.toolbehonest.schema import (
    SCENARIOS,
    ToolBHRecord,
    data_file,
    group_by_subtask,
    load_toolbehonest_file,
)
from pytest_toolbench.benchmarks.toolbehonest.scoring import ToolMatcher
from pytest_toolbench.config import RunSettings
from pytest_toolbench.results.aggregate import ReportTable
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.headline import Headline, HeadlineColumn, HeadlineGrid, HeadlineTotal
from pytest_toolbench.results.metrics import MetricSpec

#: The bundled sample lives at <repo>/data/toolbehonest (read with --data sample and no --data-dir).
DEFAULT_DATA_DIR = BUNDLED_DATA_DIR


def _mean(name: str, value: str, description: str) -> MetricSpec:
    return MetricSpec(name=name, kind="mean", value=value, description=description)


class ToolBeHonestBenchmark:
    name = DECLARATION.name
    title = DECLARATION.title
    options_model = DECLARATION.options_model
    scenarios: tuple[str, ...] = SCENARIOS
    metrics: tuple[MetricSpec, ...] = (
        _mean("l1_em", "l1_em", "L1 solvability detection, exact match (unsolvable; Table 2)"),
        _mean("l2_pr", "l2_pr", "L2 planning progress rate (unsolvable; Table 2)"),
        _mean("l3_pr", "l3_pr", "L3 diagnosing progress rate (unsolvable; Table 2)"),
        _mean("l3_ms", "l3_ms", "L3 matching score, MiniLM (unsolvable; Table 2)"),
        MetricSpec(
            name="overall", kind="ratio", value="overall_sum", denominator="overall_n",
            description="pooled mean of the scenario's unsolvable L1/L2/L3-PR/L3-MS numbers",
        ),
    )
    #: The solvable side (l1_em_solvable, l2_pr_solvable, l3_pr_solvable) is in each case's
    #: values and in the Table 3 report table, not in the per-scenario tables (upstream's
    #: leaderboard has none of it).
    #: The end screen: the paper's Table 2 per scenario (its three scenarios spelled out), each
    #: scenario's pooled Overall, and the run's Overall (the leaderboard's number, the one the
    #: paper leads with). ``-v`` shows every metric with its CI and the paper tables (80
    #: columns leave no room for a CI column beside five numbers and the spelled-out names).
    headline = Headline(grids=(HeadlineGrid(
        corner="toolbehonest (unsolvable)",
        rows=(("MNT", "MNT: missing necessary tools"), ("PT", "PT: potential tools"),
              ("LFT", "LFT: limited functionality tools")),
        columns=(HeadlineColumn("L1-EM", "l1_em"), HeadlineColumn("L2-PR", "l2_pr"),
                 HeadlineColumn("L3-PR", "l3_pr"), HeadlineColumn("L3-MS", "l3_ms"),
                 HeadlineColumn("Overall", "overall")),
        total=HeadlineTotal("all scenarios (the paper's Overall)", "leaderboard",
                            {"Overall": "overall"}),
        note="x100, unsolvable variant, as paper Table 2 (L1 detecting solvability, L2 planning, "
             "L3 diagnosing missing tools); Overall pools the L1/L2/L3-PR/L3-MS numbers; "
             "-: level not in this run (the Overall then pools the levels that ran)",
    ),))
    breakdown_labels: tuple[str, ...] = ("subtask",)
    #: The ``details`` keys report_tables reads (report.py); the controller holds no other.
    report_details: tuple[str, ...] = ("matching_score", "condition")
    label_markers: dict[str, str] = DECLARATION.label_markers

    # --- data ---------------------------------------------------------------------------------

    def data_path(self, data_dir: Path | None, lang: str = "en") -> Path:
        """``test_<lang>.json``: ``--toolbehonest-lang`` picks both the prompts and this file."""
        return data_file(Path(data_dir or DEFAULT_DATA_DIR) / self.name, lang)

    def records(self, data_dir: Path | None, lang: str = "en") -> list[ToolBHRecord]:
        """Every record of the data file, file order (also the tool database's source)."""
        return load_toolbehonest_file(self.data_path(data_dir, lang))

    def data_sources(self, data_dir: Path | None, options: ToolBeHonestOptions | None = None) -> list[DataSource]:
        """Provenance (HasDataSources): the file the cases come from."""
        lang = _lang(options)
        path = self.data_path(data_dir, lang)
        return [DataSource.for_file(self.name, path, len(self.records(data_dir, lang)),
                                    bundled=is_bundled(path, data_dir))]

    def load_cases(
        self, data_dir: Path | None, scenarios: tuple[str, ...], options: ToolBeHonestOptions | None = None
    ) -> list[Case]:
        unknown = [s for s in scenarios if s not in self.scenarios]
        if unknown:
            raise ValueError(f"unknown ToolBeHonest scenario(s) {unknown}; expected {self.scenarios}")
        cases: list[Case] = []
        for subtask, records in group_by_subtask(self.records(data_dir, _lang(options))).items():
            for k, record in enumerate(records):
                if record.scenario not in scenarios:
                    continue
                for level in LEVELS:
                    for solvable in (True, False):
                        cases.append(self.make_case(record, k, level, solvable))
        return cases

    def make_case(self, record: ToolBHRecord, k: int, level: int, solvable: bool) -> Case:
        variant = "solvable" if solvable else "unsolvable"
        return Case(
            id=f"{self.name}-{record.subtask}-{k}-L{level}-{variant}",
            benchmark=self.name,
            scenario=record.scenario,
            sample_id=f"{record.subtask}-{k}",
            labels={"level": level, "subtask": record.subtask, "solvable": solvable,
                    "variant": variant},
            stored_sample=record,
        )

    # --- running ------------------------------------------------------------------------------

    def make_runner(self, env: BenchmarkEnv) -> ToolBeHonestRunner:
        """The L3 matcher's tool database is built from EVERY record of the data file (never only
        the selected cases), so a selection scores each case as the full run would; its
        embeddings are cached on disk (shared by xdist workers and later runs)."""
        from pytest_toolbench.benchmarks.toolbehonest.tooldb import ToolMatcherIndex, build_tool_database

        options: ToolBeHonestOptions = env.options(self)
        database = build_tool_database(self.records(env.settings.data_dir, options.lang))
        require_embedder(env.embedders, options.embedder, "ToolBeHonest L3 matching")
        return self.runner(env.settings, ToolMatcherIndex(database, env.embedders, options.embedder))

    def runner(self, settings: RunSettings, matcher: ToolMatcher | None) -> ToolBeHonestRunner:
        """The runner over a given L3 matcher (tests hand in their own, or none)."""
        options = settings.options_for(self.name, ToolBeHonestOptions)
        overrides = {"temperature": settings.temperature, "max_tokens": settings.max_tokens}
        from pytest_toolbench.models.base import Sampling

        base = Sampling(**{k: v for k, v in overrides.items()})
        sampling = upstream_sampling(settings.resolved_backend, options, base)
        return ToolBeHonestRunner(options, sampling, matcher)

    def report_tables(self, results: list[CaseResult]) -> list[ReportTable]:
        return report.report_tables(results)


def _lang(options: ToolBeHonestOptions | None) -> str:
    return options.lang if options is not None else ToolBeHonestOptions().lang


TOOLBEHONEST = ToolBeHonestBenchmark()
