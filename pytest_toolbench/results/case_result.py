"""The typed, JSON-serialisable result of one case: the unit that crosses process boundaries.

A worker turns a finished case into a :class:`CaseResult`, ships it to the controller through
``TestReport.user_properties`` (see plugin.py), and the controller aggregates the results into
metrics. Nothing else about a case is needed after it ran.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import ConfigDict, Field

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.models.base import Usage


class Outcome(str, Enum):
    PASSED = "passed"  # the benchmark's correctness criterion held
    FAILED = "failed"  # wrong answer (or no answer), scored as the benchmark scores it
    ERROR = "error"  # infrastructure failure; excluded from metrics, counted apart


class InfraError(DeferredModel):
    kind: str
    message: str
    #: Requests sent before giving up (None: the error did not come from an endpoint call).
    attempts: int | None = None
    #: The option that would help (e.g. "--request-timeout"), when the source knew one.
    hint: str | None = None

    @classmethod
    def of(cls, exc: Any) -> "InfraError":
        """From a ModelCallError, keeping its attempts and hint."""
        return cls(kind=exc.kind, message=exc.message, attempts=getattr(exc, "attempts", None),
                   hint=getattr(exc, "hint", None))


class CaseResult(DeferredModel):
    #: A value may be nan where the benchmark's upstream gives nan (e.g. a mean of no scores):
    #: JSON keeps it as ``NaN``, as json.dumps writes it, so the xdist transport and the journal
    #: read it back (pydantic's default would write null, which ``values`` rejects).
    model_config = ConfigDict(ser_json_inf_nan="constants")

    case_id: str
    benchmark: str
    scenario: str
    model: str = ""
    outcome: Outcome
    #: Subgroup labels such as hops / domain / answer_type (strings or ints).
    labels: dict[str, str | int] = Field(default_factory=dict)
    #: Per-case numeric values the benchmark's metrics aggregate (e.g. answer_correct: 1.0).
    #: A missing key means "not applicable" for that metric (excluded from its n).
    values: dict[str, float] = Field(default_factory=dict)
    #: Anything else worth keeping: gold, prediction, invocation-error flags, deviations...
    details: dict[str, Any] = Field(default_factory=dict)
    #: Short human-readable reason for a failure (question, gold, model answer).
    failure_message: str | None = None
    error: InfraError | None = None
    transcript: list[dict[str, Any]] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    #: Seconds the model's calls took (failed attempts and backoff waits included); a cached or
    #: replayed reply counts the time it took when it was stored.
    latency_s: float = 0.0
    #: Seconds the case ran in this run, from its start in its process to its result (model
    #: calls, tools, scoring), whatever answered; None in results written before it was kept.
    #: Cases run side by side, so these can add up to more than the run's wall time. Left out
    #: of the JSON when None, so an older record reads and writes back byte for byte.
    wall_s: float | None = Field(default=None, exclude_if=lambda v: v is None)
    #: When the case started (Unix time, seconds, to the millisecond), so a run's cases can be laid
    #: out in time (which ones an endpoint's outage hit; Allure's timeline); None as ``wall_s``.
    started_at: float | None = Field(default=None, exclude_if=lambda v: v is None)
    model_calls: int = 0
    cached_calls: int = 0
    parse_failures: list[dict[str, Any]] = Field(default_factory=list)
    #: ``--repeats K``: which run of the case (1..K), None without repeats; ``case_id`` then ends
    #: in ``-r<repeat>`` (results/repeats.py groups the runs of one case back together).
    repeat: int | None = None

    @property
    def is_error(self) -> bool:
        return self.outcome is Outcome.ERROR
