"""The JSON run record (``--toolbench-json``, a run folder's ``report.json``) as the site reads it.

Its own pydantic models over the document's stable keys, every model tolerant of keys it does not
know (``extra="allow"``), every field but ``cases`` defaulted: the site reads records written by
older and newer versions alike, and does not break when the writer's Python types change while
the document stays the same. (``toolbench compare``'s loader, compare/load.py, is used only for
the side-by-side pages, whose numbers must be exactly compare's.)
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class MetricValue(_Open):
    name: str = ""
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    higher_is_better: bool = True
    is_rate: bool = True


class GroupMetrics(_Open):
    label: str
    group: str
    n_cases: int = 0
    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    n_errors: int = 0


class ErrorSummary(_Open):
    kind: str = ""
    count: int = 0
    cause: str = ""
    hint: str = ""
    attempts_min: int | None = None
    attempts_max: int | None = None
    unreachable: str | None = None

    def text(self) -> str:
        """The cause, the attempts per call and the option that would help, on one line."""
        parts = [self.unreachable or self.cause or self.kind]
        if self.attempts_max is not None:
            span = (str(self.attempts_max) if self.attempts_min in (None, self.attempts_max)
                    else f"{self.attempts_min}-{self.attempts_max}")
            parts.append(f"{span} attempt{'s' if self.attempts_max != 1 else ''} per call")
        if self.hint:
            parts.append(f"try: {self.hint}")
        return "; ".join(parts)


class ScenarioMetrics(_Open):
    benchmark: str
    scenario: str
    n_cases: int = 0
    n_errors: int = 0
    error_kinds: dict[str, int] = Field(default_factory=dict)
    n_parse_failures: int = 0
    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    breakdown: dict[str, list[GroupMetrics]] = Field(default_factory=dict)
    n_cases_cut_short: int = 0
    error_details: dict[str, ErrorSummary] = Field(default_factory=dict)


class ReportTable(_Open):
    benchmark: str
    name: str = ""
    title: str = ""
    columns: list[str] = Field(default_factory=list)
    rows: list[list[Any]] = Field(default_factory=list)
    note: str = ""


class RunMetrics(_Open):
    scenarios: list[ScenarioMetrics] = Field(default_factory=list)
    tables: list[ReportTable] = Field(default_factory=list)

    def scenario(self, benchmark: str, scenario: str) -> ScenarioMetrics | None:
        return next((s for s in self.scenarios
                     if (s.benchmark, s.scenario) == (benchmark, scenario)), None)


class GateVerdict(_Open):
    gate: str = ""
    actual: float | None = None
    passed: bool = False
    reason: str = ""
    kind: str = "metric"


class InfraError(_Open):
    kind: str = ""
    message: str = ""
    attempts: int | None = None
    hint: str | None = None


class CaseResult(_Open):
    case_id: str
    benchmark: str = ""
    scenario: str = ""
    model: str = ""
    #: passed / failed / error (results/case_result.py ``Outcome``).
    outcome: str = "failed"
    labels: dict[str, Any] = Field(default_factory=dict)
    #: Numbers, or a benchmark's own nan (kept as JSON writes it).
    values: dict[str, Any] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)
    failure_message: str | None = None
    error: InfraError | None = None
    transcript: list[dict[str, Any]] = Field(default_factory=list)
    usage: dict[str, Any] = Field(default_factory=dict)
    latency_s: float = 0.0
    model_calls: int = 0
    cached_calls: int = 0
    parse_failures: list[Any] = Field(default_factory=list)
    repeat: int | None = None

    @property
    def base_id(self) -> str:
        """The case id without its ``-r<k>`` repeat suffix (results/repeats.py)."""
        suffix = f"-r{self.repeat}" if self.repeat is not None else ""
        return self.case_id[: -len(suffix)] if suffix and self.case_id.endswith(suffix) else self.case_id


class Coverage(_Open):
    cases: int = 0
    suite_cases: int | None = None
    subset: bool = False


class RunInfo(_Open):
    run_id: str | None = None
    started: float | None = None
    finished: float | None = None
    toolbench_version: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)
    data_sources: list[dict[str, Any]] = Field(default_factory=list)
    partial: bool = False
    interrupted_by: str | None = None
    missing_cases: list[str] = Field(default_factory=list)
    output_errors: list[str] = Field(default_factory=list)
    exit_status: int | None = None
    coverage: dict[str, Coverage] = Field(default_factory=dict)
    endpoints: dict[str, Any] | None = None
    wall_s: float | None = None


class RunRecord(_Open):
    partial: bool = False
    missing_cases: list[str] = Field(default_factory=list)
    run: RunInfo = Field(default_factory=RunInfo)
    metrics: RunMetrics = Field(default_factory=RunMetrics)
    gates: list[GateVerdict] = Field(default_factory=list)
    cases: list[CaseResult]

    @property
    def model(self) -> str:
        return str(self.run.settings.get("model") or "") or next(
            (c.model for c in self.cases if c.model), "")

    def benchmarks(self) -> list[str]:
        return sorted({c.benchmark for c in self.cases} | {s.benchmark for s in self.metrics.scenarios})
