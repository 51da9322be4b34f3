"""FamilyTool as the harness sees it: cases, metrics, labels, report tables and runner.

One case per record x scenario. Scenarios: ``extract-gs``/``extract-rr`` (KG extraction with
Greedy Search / Relation Retrieval, paper Tables 3 and 6) and ``tooluse-golden``/``tooluse-gs``/
``tooluse-rr``/``tooluse-full`` (tool use with the golden, extracted or full KG, Tables 4, 5, 7,
8). Labels (and markers): ``split(name=)``, ``hops(n=)``, ``step(name=)``, ``kg(mode=)``,
``extraction(method=)``.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_toolbench.benchmarks.base import BenchmarkEnv, Case, require_embedder
from pytest_toolbench.benchmarks.data_paths import check_data_file
from pytest_toolbench.benchmarks.data_source import (BUNDLED_DATA_DIR, KG_TRIPLES, DataSource,
                                                    is_bundled)
from pytest_toolbench.benchmarks.familytool.kg import KnowledgeGraph, load_triples
from pytest_toolbench.benchmarks.familytool.options import DECLARATION, FamilyToolOptions
from pytest_toolbench.benchmarks.familytool.schema import SPLITS, FamilyToolRecord, load_records
from pytest_toolbench.results.aggregate import ReportTable
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.headline import Headline, HeadlineColumn, HeadlineGrid
from pytest_toolbench.results.metrics import MetricSpec

if TYPE_CHECKING:  # the runner's modules load when a runner is built, not on every import
    from pytest_toolbench.benchmarks.familytool.runner import FamilyToolRunner
    from pytest_toolbench.models.base import ChatModel

#: The bundled sample lives at <repo>/data/familytool (read with --data sample and no --data-dir).
DEFAULT_DATA_DIR = BUNDLED_DATA_DIR

EXTRACT = ("extract-gs", "extract-rr")
TOOLUSE = ("tooluse-golden", "tooluse-gs", "tooluse-rr", "tooluse-full")
SCENARIO_LABELS: dict[str, dict[str, str]] = {
    "extract-gs": {"step": "extract", "extraction": "gs"},
    "extract-rr": {"step": "extract", "extraction": "rr"},
    "tooluse-golden": {"step": "tooluse", "kg": "golden"},
    "tooluse-gs": {"step": "tooluse", "kg": "extracted", "extraction": "gs"},
    "tooluse-rr": {"step": "tooluse", "kg": "extracted", "extraction": "rr"},
    "tooluse-full": {"step": "tooluse", "kg": "full"},
}


def data_file(data_dir: Path | None, split: str) -> Path:
    return Path(data_dir or DEFAULT_DATA_DIR) / "familytool" / f"familytool-{split}.jsonl"


def kg_file(data_dir: Path | None, split: str) -> Path:
    return Path(data_dir or DEFAULT_DATA_DIR) / "familytool" / f"familykg-{split}.txt"


def load_kg(data_dir: Path | None, split: str, options: FamilyToolOptions, extra=()) -> KnowledgeGraph:
    """Split b uses KG b, e uses KG e; ``--familytool-kg-file`` replaces both (inductive)."""
    return KnowledgeGraph.from_file(options.kg_file or kg_file(data_dir, split), extra)


def selected(case: Case, options: FamilyToolOptions) -> bool:
    """--familytool-split / --familytool-kg-mode / --familytool-extraction (empty = all): a
    label the case does not carry (no ``kg`` on extraction cases) does not deselect it."""
    labels = case.labels
    if options.split and labels["split"] not in options.split:
        return False
    if options.kg_mode and "kg" in labels and labels["kg"] not in options.kg_mode:
        return False
    if options.extraction and "extraction" in labels and labels["extraction"] not in options.extraction:
        return False
    return True


def kg_model(env: BenchmarkEnv, options: FamilyToolOptions) -> ChatModel | None:
    """--familytool-kg-model: a second model for the extraction step (paper Table 10).

    It follows the run's record/replay: ``--record`` writes its extraction replies to the same
    file (under the extraction's own call id), and a run that sends no request for the model
    under test (``--model replay:...`` or ``oracle``) sends none for it either: replay finds the
    recorded extraction replies, the oracle answers extraction as it does for one model. Its
    open protocols are the run's (``env.open_protocols``), as the model under test has them."""
    if not options.kg_model:
        return None
    from pytest_toolbench.models.factory import build_model

    settings, protocols = env.settings, env.open_protocols
    if settings.resolved_backend in ("replay", "oracle"):
        return build_model(settings, open_protocols=protocols)
    second = settings.model_copy(
        update={"model": options.kg_model, "base_url": options.kg_base_url, "backend": "openai"}
    )
    model = build_model(second, open_protocols=protocols)
    if settings.record_path:
        from pytest_toolbench.models.recording import RecordingModel  # filelock: only where recording

        model = RecordingModel(model, settings.record_path)
    return model


def _by_split(*metrics: tuple[str, str]) -> tuple[HeadlineColumn, ...]:
    """``b EM``, ``b Tool Acc``, ..., ``e ...``: each metric over one split, as the paper's tables."""
    return tuple(HeadlineColumn(f"{split} {title}", metric, "split", split)
                 for split in SPLITS for title, metric in metrics)


#: The end screen (paper Tables 4, 5, 7, 8 as one table, one row per KG input; then Tables 3/6's
#: lead numbers for the extraction step); ``-v`` shows every metric and the paper tables.
HEADLINE = Headline(grids=(
    HeadlineGrid(
        corner="familytool tool use",
        rows=(("tooluse-golden", "golden sub-KG (T4)"), ("tooluse-gs", "extracted sub-KG, GS (T5, T7)"),
              ("tooluse-rr", "extracted sub-KG, RR (T7)"), ("tooluse-full", "full KG (T8)")),
        columns=_by_split(("EM", "em"), ("Tool Acc", "tool_acc"), ("Value Acc", "value_acc")),
        note="x100 by KG input and split (b, e), as the paper's tool-use tables; -: split not in "
             "this run",
    ),
    HeadlineGrid(
        corner="familytool KG extraction",
        rows=(("extract-gs", "Greedy Search (GS, T3, T6)"), ("extract-rr", "Relation Retrieval (RR, T6)")),
        columns=_by_split(("EM", "em"), ("F1", "f1")),
        note="x100 by split, as paper Tables 3 and 6 (-v: No-Hal, Coverage, FmtErr)",
    ),
))


def _pct(total: float, n: int) -> float | None:
    return round(100 * total / n, 2) if n else None


class FamilyToolBenchmark:
    name = DECLARATION.name
    title = DECLARATION.title
    options_model = DECLARATION.options_model
    #: --decoding open: the raw text reaches the runner, which parses it as upstream's vLLM parsers
    #: do (Hermes2Pro for Qwen, Llama3Json for Llama-3.1; UnifiedToolHub ``models/``; tooluse.py); extraction
    #: replies are read whole, thinking included (upstream ``pipeline/KG_extraction.py``).
    open_protocol = "text"
    scenarios: tuple[str, ...] = (*EXTRACT, *TOOLUSE)
    metrics: tuple[MetricSpec, ...] = (
        MetricSpec(name="em", value="em", description="exact match: extracted link set == golden "
                   "(extraction, upstream metric_KG_extraction); gold call fully correct (tool use, "
                   "UnifiedToolHub metrics_for_single_round_tool_call)"),
        MetricSpec(name="f1", value="f1", scenarios=EXTRACT, description="per-sample link F1, macro"),
        MetricSpec(name="no_hallucination", kind="ratio", value="clean", denominator="parsed",
                   scenarios=EXTRACT, description="samples with no <bad_extract> / non-format-error samples"),
        MetricSpec(name="coverage", value="coverage", scenarios=EXTRACT,
                   description="golden entities used by the gold call all extracted"),
        MetricSpec(name="format_error", value="format_error", scenarios=EXTRACT, higher_is_better=False,
                   description="empty extraction string (no usable KG.search call)"),
        MetricSpec(name="em_per_tool", value="em_per_tool", scenarios=TOOLUSE,
                   description="ExactMatch-PerTool: share of gold calls fully correct (upstream logs it "
                   "beside EM; equal to EM when the gold has one call)"),
        MetricSpec(name="tool_acc", value="tool_acc", scenarios=TOOLUSE, description="gold tool called"),
        MetricSpec(name="value_acc", value="value_acc", scenarios=TOOLUSE,
                   description="per-sample share of gold values matched (0 on a wrong tool), macro"),
    )
    headline = HEADLINE
    breakdown_labels: tuple[str, ...] = ("split", "hops")
    #: report_tables reads no ``details`` key: the controller holds none.
    report_details: tuple[str, ...] = ()
    label_markers: dict[str, str] = DECLARATION.label_markers

    def load_cases(
        self, data_dir: Path | None, scenarios: tuple[str, ...], options: FamilyToolOptions | None = None
    ) -> list[Case]:
        """Scenario-major (extraction first), then split b, e, then file order."""
        unknown = [s for s in scenarios if s not in self.scenarios]
        if unknown:
            raise ValueError(f"unknown FamilyTool scenario(s) {unknown}; expected {self.scenarios}")
        records = {split: load_records(data_file(data_dir, split), split) for split in SPLITS}
        return [
            self.make_case(record, scenario)
            for scenario in scenarios
            for split in SPLITS
            for record in records[split]
        ]

    def select(self, cases: list[Case], options: FamilyToolOptions) -> list[Case]:
        """HasSelection: the cases of the chosen splits, KG modes and extraction methods."""
        return [case for case in cases if selected(case, options)]

    def check_data(self, settings: Any) -> None:
        """HasDataChecks: the KG of every selected split (or ``--familytool-kg-file``) is read
        before the first model call, so a bad line stops the run naming file and line instead
        of failing every case that needs the graph (the fixture reads it lazily)."""
        options = settings.options_for(self.name, FamilyToolOptions)
        paths = [options.kg_file] if options.kg_file else [
            kg_file(settings.data_dir, split) for split in (options.split or SPLITS)
        ]
        for path in dict.fromkeys(paths):
            load_triples(path)

    def make_case(self, record: FamilyToolRecord, scenario: str) -> Case:
        return Case(
            id=f"familytool-{record.split}-{record.index}-{scenario}",
            benchmark=self.name,
            scenario=scenario,
            sample_id=record.case_key,
            labels={"split": record.split, "hops": record.hops, **SCENARIO_LABELS[scenario]},
            stored_sample=record,
        )


    def data_sources(self, data_dir: Path | None, options: object = None) -> list[DataSource]:
        """Provenance (HasDataSources): each split's records and KG, each counted in non-blank
        lines (the pins' counts), a KG's as KG triples: never summed with the records."""
        out = []
        for split in SPLITS:
            for path, what, unit in (
                    (data_file(data_dir, split), "FamilyTool data file", "records"),
                    (kg_file(data_dir, split), "FamilyTool KG file", KG_TRIPLES)):
                if path.is_file():
                    check_data_file(path, what)  # unreadable: one line, not a raw EACCES
                    lines = sum(1 for line in path.read_bytes().splitlines() if line.strip())
                    out.append(DataSource.for_file(self.name, path, lines, unit=unit,
                                                   bundled=is_bundled(path, data_dir)))
        return out

    # --- running ----------------------------------------------------------------------------
    def make_runner(self, env: BenchmarkEnv) -> FamilyToolRunner:
        """Knowledge graphs load on first use, once per split; the relation retriever's embedder
        loads up front (a one-line stop if it cannot) only when a case of this process uses
        relation retrieval: golden-KG and GS runs never load it."""
        from pytest_toolbench.benchmarks.familytool.retriever import RelationRetriever, get_embedder
        from pytest_toolbench.benchmarks.familytool.memo import ExtractionMemo  # asyncio
        from pytest_toolbench.benchmarks.familytool.runner import FamilyToolRunner

        settings = env.settings
        options: FamilyToolOptions = env.options(self)
        kgs = cache(lambda split: load_kg(settings.data_dir, split, options))
        if any(case.labels.get("extraction") == "rr" for case in env.cases(self.name)):
            get_embedder(env.embedders, options.embedder)  # with trust_remote_code for jina
            require_embedder(env.embedders, options.embedder, "FamilyTool relation retrieval")
        retrievers = cache(lambda split: RelationRetriever(kgs(split), env.embedders, options.embedder))
        return FamilyToolRunner(
            options,
            kgs,
            retrievers,
            ExtractionMemo(env.scratch_dir("familytool-extractions")),
            backend=settings.resolved_backend,
            kg_model=kg_model(env, options),
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
        )

    # --- paper-layout tables (HasReportTables) -----------------------------------------------
    def report_tables(self, results: list[CaseResult]) -> list[ReportTable]:
        scored = [r for r in results if not r.is_error]
        return [t for t in (self._extraction_table(scored), self._tooluse_table(scored),
                            self._hops_table(scored)) if t.rows]

    @staticmethod
    def _group(results: list[CaseResult], *labels: str) -> dict[tuple, list[CaseResult]]:
        groups: dict[tuple, list[CaseResult]] = defaultdict(list)
        for r in results:
            groups[(r.scenario, *(r.labels.get(label) for label in labels))].append(r)
        return groups

    def _extraction_table(self, results: list[CaseResult]) -> ReportTable:
        rows, values = [], {}
        groups = self._group([r for r in results if r.scenario in EXTRACT], "split")
        for scenario in EXTRACT:
            for split in SPLITS:
                group = groups.get((scenario, split))
                if not group:
                    continue
                n = len(group)
                parsed = sum(r.values["parsed"] for r in group)
                row = {
                    "EM": _pct(sum(r.values["em"] for r in group), n),
                    "F1": _pct(sum(r.values["f1"] for r in group), n),
                    "No-Hal": _pct(sum(r.values["clean"] for r in group), int(parsed)),
                    "Coverage": _pct(sum(r.values["coverage"] for r in group), n),
                    "FmtErr": _pct(sum(r.values["format_error"] for r in group), n),
                }
                method = scenario.split("-")[1].upper()
                rows.append([method, split, n, *row.values()])
                values.update({f"{scenario}/{split}/{k}": v for k, v in row.items()})
        return ReportTable(
            benchmark=self.name, name="extraction", title="FamilyTool KG extraction (paper Tables 3, 6)",
            columns=["method", "split", "n", "EM", "F1", "No-Hal", "Coverage", "FmtErr"],
            rows=rows, values=values, note="x100; No-Hal denominator excludes format errors",
        )

    def _tooluse_table(self, results: list[CaseResult]) -> ReportTable:
        rows, values = [], {}
        groups = self._group([r for r in results if r.scenario in TOOLUSE], "split")
        names = {"tooluse-golden": "golden sub-KG (T4)", "tooluse-gs": "extracted GS (T5/T7)",
                 "tooluse-rr": "extracted RR (T7)", "tooluse-full": "full KG (T8)"}
        for scenario in TOOLUSE:
            for split in SPLITS:
                group = groups.get((scenario, split))
                if not group:
                    continue
                n = len(group)
                row = {m: _pct(sum(r.values[key] for r in group), n)
                       for m, key in (("EM", "em"), ("Tool Acc", "tool_acc"), ("Value Acc", "value_acc"))}
                rows.append([names[scenario], split, n, *row.values()])
                values.update({f"{scenario}/{split}/{k}": v for k, v in row.items()})
        return ReportTable(
            benchmark=self.name, name="tooluse", title="FamilyTool KG-augmented tool use (paper Tables 4, 5, 7, 8)",
            columns=["KG input", "split", "n", "EM", "Tool Acc", "Value Acc"], rows=rows, values=values,
            note="x100, mean over records",
        )

    def _hops_table(self, results: list[CaseResult]) -> ReportTable:
        rows, values = [], {}
        groups = self._group(results, "split", "hops")
        for (scenario, split, hops), group in sorted(
            groups.items(), key=lambda kv: (self.scenarios.index(kv[0][0]), kv[0][1], kv[0][2])
        ):
            em = _pct(sum(r.values["em"] for r in group), len(group))
            rows.append([scenario, split, hops, len(group), em])
            values[f"{scenario}/{split}/hops={hops}/EM"] = em
        return ReportTable(
            benchmark=self.name, name="hops", title="FamilyTool EM by split and hop count (paper Table 2 hops)",
            columns=["scenario", "split", "hops", "n", "EM"], rows=rows, values=values, note="x100",
        )


FAMILYTOOL = FamilyToolBenchmark()
