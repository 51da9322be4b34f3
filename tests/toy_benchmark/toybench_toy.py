"""A toy benchmark, complete in one module: questions with one short answer each.

What a fifth benchmark needs (pytest_toolbench/benchmarks/base.py): an options model, cases from
a data file, a runner built from the one environment, metrics; registered by the entry point in
this folder's pyproject.toml. No fixtures, no edit of the package.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from pytest_toolbench.benchmarks.base import BenchmarkEnv, Case
from pytest_toolbench.benchmarks.result_builders import CallTally, base_fields, error_result, scored_result
from pytest_toolbench.models.base import CallContext, ChatModel, ChatRequest, ModelCallError, Sampling, content_text
from pytest_toolbench.results.aggregate import ReportTable
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.metrics import MetricSpec

DATA_DIR = Path(__file__).parent / "data"


class ToyOptions(BaseModel):
    #: Becomes --toy-topic (repeatable); narrows the selection through ``select``.
    topic: list[str] = Field(default_factory=list, description="only questions of these topics")
    #: Becomes --toy-case; chooses how answers are compared.
    case: Literal["sensitive", "insensitive"] = Field("insensitive", description="answer comparison")


class ToyRunner:
    def __init__(self, options: ToyOptions, sampling: Any):
        self.options = options
        self.sampling = sampling

    async def run(self, case: Case, model: ChatModel) -> CaseResult:
        record = case.sample
        prompt = record["question"] + (" Answer in one word." if case.scenario == "terse" else "")
        request = ChatRequest(messages=[{"role": "user", "content": prompt}], sampling=self.sampling)
        oracle = lambda _request: {"role": "assistant", "content": record["answer"]}  # noqa: E731
        base = base_fields(case, model, case.benchmark)
        tally = CallTally()
        transcript = list(request.messages)
        try:
            response = await model.complete(request, CallContext(case_id=case.id, oracle=oracle))
        except ModelCallError as exc:
            return error_result(base, exc, {}, transcript, str(exc), tally)
        tally.add(response)
        reply = content_text(response.message.get("content")).strip()
        transcript.append(response.message)
        expected = record["answer"]
        same = reply == expected if self.options.case == "sensitive" else reply.lower() == expected.lower()
        return scored_result(base, same, {"correct": float(same)}, {"reply": reply}, f"said {reply!r}",
                             transcript, tally)


class ToyBenchmark:
    name = "toy"
    title = "Toy"
    options_model = ToyOptions
    scenarios: tuple[str, ...] = ("plain", "terse")
    metrics: tuple[MetricSpec, ...] = (
        MetricSpec(name="accuracy", value="correct", description="answers equal to the gold one"),
    )
    breakdown_labels: tuple[str, ...] = ("topic",)
    label_markers: dict[str, str] = {"topic": "name"}

    def load_cases(self, data_dir: Path | None, scenarios: tuple[str, ...], options: Any = None) -> list[Case]:
        # --data-dir DIR holding toy/cases.json replaces the bundled sample; a DIR without one
        # (the other benchmarks' data) leaves it in place.
        folder = Path(data_dir) / "toy" if data_dir and (Path(data_dir) / "toy").is_dir() else DATA_DIR / "toy"
        path = folder / "cases.json"
        records = json.loads(path.read_text(encoding="utf-8"))
        return [
            Case(id=f"toy-{r['id']}-{scenario}", benchmark=self.name, scenario=scenario, sample_id=r["id"],
                 labels={"topic": r["topic"]}, stored_sample=r)
            for scenario in scenarios for r in records
        ]

    def select(self, cases: list[Case], options: ToyOptions) -> list[Case]:
        return [c for c in cases if not options.topic or c.labels["topic"] in options.topic]

    def make_runner(self, env: BenchmarkEnv) -> ToyRunner:
        return ToyRunner(env.options(self), Sampling(temperature=0.0, max_tokens=64))

    #: The ``details`` keys report_tables reads: none (the controller then holds none).
    report_details: tuple[str, ...] = ()

    def report_tables(self, results: list[CaseResult]) -> list[ReportTable]:
        scored = [r for r in results if not r.is_error]
        topics = sorted({str(r.labels["topic"]) for r in scored})
        rows = [[t, sum(1 for r in scored if r.labels["topic"] == t),
                 sum(r.values["correct"] for r in scored if r.labels["topic"] == t)] for t in topics]
        return [ReportTable(benchmark=self.name, name="topics", title="Toy answers by topic",
                            columns=["topic", "n", "correct"], rows=rows,
                            values={f"{row[0]}/correct": row[2] for row in rows})]


TOY = ToyBenchmark()
