"""Meta-Bench as the harness sees it: cases, metrics, labels, runner and report tables."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_toolbench.benchmarks.base import BenchmarkEnv, Case, EnvironmentUnavailable
from pytest_toolbench.benchmarks.data_source import (BUNDLED_DATA_DIR, LIBRARY_TOOLS, DataSource,
                                                    is_bundled)
from pytest_toolbench.benchmarks.metabench.fields import CLOSED_CALL_CATEGORY
from pytest_toolbench.benchmarks.metabench.options import DECLARATION, MetaBenchOptions
from pytest_toolbench.benchmarks.metabench.pool import DISTRACTOR_FILE, build_library, load_distractors
from pytest_toolbench.benchmarks.metabench.schema import (
    Dialogue,
    JudgedTurn,
    dialogue_files,
    load_dialogues,
    load_file,
)
from pytest_toolbench.benchmarks.metabench import tables
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import Sampling, preset_sampling
from pytest_toolbench.results.aggregate import ReportTable
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.headline import Headline, HeadlineColumn, HeadlineGrid
from pytest_toolbench.results.metrics import MetricSpec

if TYPE_CHECKING:  # numpy/FAISS: imported by the session that builds them, not by every import
    from pytest_toolbench.benchmarks.metabench.retriever import MetaBenchRetriever
    from pytest_toolbench.benchmarks.metabench.runner import MetaBenchRunner
    from pytest_toolbench.environments.retrieval import Embedders

#: The bundled sample lives at <repo>/data/metabench (read with --data sample and no --data-dir).
DEFAULT_DATA_DIR = BUNDLED_DATA_DIR
BUNDLED_DIR = DEFAULT_DATA_DIR / "metabench"

#: The paper's "ten scenarios" in Table 2 order: per difficulty, open-world FM, FE, chat, then
#: closed-world calls (single in simple, multi in hard: fields.CLOSED_CALL_CATEGORY) and chat.
SCENARIOS: tuple[str, ...] = tuple(
    f"{d}-{s}"
    for d in ("simple", "hard")
    for s in ("open-function_missing", "open-function_existing", "open-chat",
              f"closed-{CLOSED_CALL_CATEGORY[d]}", "closed-chat")
)
#: The sampling Meta-Bench requests send for each --decoding (--temperature/--max-tokens override
#: it). Meta-Bench has no upstream evaluation code to copy; these are the values the harness has
#: always sent it (ToolHop's presets, which it used to inherit).
METABENCH_DECODING: dict[str, Sampling] = {
    "closed": Sampling(temperature=0.0, max_tokens=256),
    "open": Sampling(temperature=0.0, max_tokens=1024),
}
CALL_SCENARIOS = tuple(s for s in SCENARIOS if not s.endswith("chat"))
CHAT_SCENARIOS = tuple(s for s in SCENARIOS if s.endswith("chat"))
FM_SCENARIOS = tuple(s for s in SCENARIOS if s.endswith("function_missing"))


_WORLD_TITLES = {"open-function_missing": "open FM", "open-function_existing": "open FE",
                 "open-chat": "open chat", "closed-single_tool_call": "closed single",
                 "closed-multi_tool_call": "closed multi", "closed-chat": "closed chat"}
#: The end screen: paper Table 2 as one row per scenario (difficulty / world and category, the
#: paper's column groups): T-Acc and P-Acc of the tool-call scenarios, IRR of the chat ones;
#: ``-v`` adds FMD, HR@k, every CI and the paper tables.
HEADLINE = Headline(grids=(HeadlineGrid(
    corner="metabench",
    rows=tuple((s, f"{s.split('-', 1)[0]} {_WORLD_TITLES[s.split('-', 1)[1]]}") for s in SCENARIOS),
    columns=(HeadlineColumn("T-Acc", "t_acc"), HeadlineColumn("P-Acc", "p_acc"),
             HeadlineColumn("IRR", "irr")),
    ci=("T-Acc",),
    note="x100 as paper Table 2 (open/closed world; FM/FE: function missing/existing; single/"
         "multi tool call): T/P-Acc per gold call, IRR per chat turn; -: not measured there",
),))


def _ratio(name: str, num: str, den: str, scenarios: tuple[str, ...], description: str) -> MetricSpec:
    return MetricSpec(name=name, kind="ratio", value=num, denominator=den, scenarios=scenarios,
                      description=description)


class MetaBenchBenchmark:
    name = DECLARATION.name
    title = DECLARATION.title
    options_model = DECLARATION.options_model
    scenarios: tuple[str, ...] = SCENARIOS
    metrics: tuple[MetricSpec, ...] = (
        _ratio("t_acc", "t_hits", "gt_calls", CALL_SCENARIOS, "T-Acc: gold calls whose tool name is matched"),
        _ratio("p_acc", "p_hits", "gt_calls", CALL_SCENARIOS, "P-Acc: gold calls matched with all argument values"),
        MetricSpec(name="irr", value="irr_correct", scenarios=CHAT_SCENARIOS,
                   description="IRR: chat turns answered without invoking a tool"),
        _ratio("fmd", "fmd_hits", "fmd_units", FM_SCENARIOS,
               "FMD: meta_tool turns answered with a well-formed retriever call (per gold missing "
               "tool with --metabench-fmd-unit gold_tool)"),
        *(_ratio(f"hr_{k}", f"hr_{k}_hits", "gt_missing", FM_SCENARIOS,
                 f"HR@{k}: gold missing tools within the turn's retrieved top-{k} set") for k in (1, 3, 5)),
    )
    headline = HEADLINE
    breakdown_labels: tuple[str, ...] = ()
    #: The ``details`` keys report_tables reads (tables.py); the controller holds no other.
    report_details: tuple[str, ...] = ("retriever", "fmd_unit", "embedder", "alpha")
    label_markers: dict[str, str] = DECLARATION.label_markers

    # --- data ---------------------------------------------------------------------------------

    @staticmethod
    def data_folder(data_dir: Path | None) -> Path:
        return Path(data_dir or DEFAULT_DATA_DIR) / "metabench"

    def load_dialogues(self, data_dir: Path | None) -> list[Dialogue]:
        return load_dialogues(self.data_folder(data_dir))

    def load_cases(self, data_dir: Path | None, scenarios: tuple[str, ...], options: object = None) -> list[Case]:
        """One case per judged assistant turn: scenario-major (declared order), then file order."""
        unknown = [s for s in scenarios if s not in self.scenarios]
        if unknown:
            raise ValueError(f"unknown Meta-Bench scenario(s) {unknown}; expected {self.scenarios}")
        dialogues = self.load_dialogues(data_dir)
        return [
            self.make_case(d, turn)
            for scenario in scenarios
            for d in dialogues if d.scenario == scenario
            for turn in d.judged_turns
        ]

    def make_case(self, dialogue: Dialogue, turn: int) -> Case:
        kind = dialogue.messages[turn].turn_kind or "chat"
        return Case(
            id=f"metabench-{dialogue.id.replace('/', '-')}-t{turn}",
            benchmark=self.name,
            scenario=dialogue.scenario,
            sample_id=dialogue.id,
            labels={"category": dialogue.category, "difficulty": dialogue.difficulty,
                    "world": dialogue.world, "turn_kind": kind},
            stored_sample=JudgedTurn(dialogue=dialogue, turn=turn),
        )

    def data_sources(self, data_dir: Path | None, options: object = None) -> list[DataSource]:
        """Provenance (HasDataSources): every dialogue file read, and the distractor library."""
        folder = self.data_folder(data_dir)
        out = [
            DataSource.for_file(self.name, path, len(load_file(path, str(path.relative_to(folder)))),
                                bundled=is_bundled(path, folder.parent))
            for path in dialogue_files(folder)
        ]
        distractors = BUNDLED_DIR / DISTRACTOR_FILE
        out.append(DataSource.for_file(self.name, distractors, len(load_distractors(distractors)),
                                       bundled=True, unit=LIBRARY_TOOLS))
        return out

    def check_data(self, settings: RunSettings) -> None:
        """HasDataChecks: the distractor pool the session's retriever reads
        (``--metabench-distractors`` or the bundled one), before the first model call."""
        options = settings.options_for(self.name, MetaBenchOptions)
        load_distractors(options.distractors or BUNDLED_DIR / DISTRACTOR_FILE)

    # --- environment ----------------------------------------------------------------------------

    def make_retriever(self, settings: RunSettings, embedders: Embedders) -> MetaBenchRetriever:
        """The session's retriever over the library of all the benchmark's tools (+ distractors
        when they cannot fill a pool)."""
        from pytest_toolbench.benchmarks.metabench.retriever import MetaBenchRetriever

        options = settings.options_for(self.name, MetaBenchOptions)
        dialogues = self.load_dialogues(settings.data_dir)
        distractors = load_distractors(options.distractors or BUNDLED_DIR / DISTRACTOR_FILE)
        library = build_library(dialogues, options.pool_size, distractors)
        return MetaBenchRetriever(library, embedders, options)

    def make_runner(self, env: BenchmarkEnv) -> MetaBenchRunner:
        """The retriever is built (or loaded from the embedding cache) once per process; an
        embedder that cannot be loaded here (e.g. multilingual-e5-large with no hub: loaded from
        the hub cache only, so it fails in seconds) stops the run with one line. A warm cache
        loads no model at all."""
        from pytest_toolbench.environments.retrieval import EmbedderUnavailable, one_line

        try:
            retriever = self.make_retriever(env.settings, env.embedders).build()
        except EmbedderUnavailable as exc:
            raise EnvironmentUnavailable(one_line(f"Meta-Bench retriever: {exc}")) from exc
        return self.runner(env.settings, retriever)

    def runner(self, settings: RunSettings, retriever: MetaBenchRetriever) -> MetaBenchRunner:
        """The runner over a given retriever (tests and tools hand in their own)."""
        from pytest_toolbench.benchmarks.metabench.runner import MetaBenchRunner

        sampling = preset_sampling(METABENCH_DECODING, settings.resolved_decoding, settings.temperature,
                                   settings.max_tokens)
        return MetaBenchRunner(retriever, settings.options_for(self.name, MetaBenchOptions), sampling)

    def report_tables(self, results: list[CaseResult]) -> list[ReportTable]:
        return tables.report_tables(results)


METABENCH = MetaBenchBenchmark()
