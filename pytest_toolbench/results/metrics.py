"""How a benchmark declares its metrics, so aggregation stays generic.

A metric is either the mean of one per-case value (accuracy = mean of answer_correct) or a ratio
of sums (instance error rate = sum of error calls / sum of calls). Cases lacking the value are not
in that metric's n. Cases with an infrastructure error are never in any metric.
"""

from __future__ import annotations

from typing import Literal

from pytest_toolbench.deferred_model import DeferredModel


class MetricSpec(DeferredModel):
    name: str
    kind: Literal["mean", "ratio"] = "mean"
    #: For "mean": the per-case value to average. For "ratio": the numerator value.
    value: str
    #: For "ratio" only: the denominator value.
    denominator: str | None = None
    #: Which scenarios the metric applies to (None = all).
    scenarios: tuple[str, ...] | None = None
    higher_is_better: bool = True
    description: str = ""

    def applies_to(self, scenario: str) -> bool:
        return self.scenarios is None or scenario in self.scenarios
