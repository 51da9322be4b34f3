"""What a case's JUnit testcase carries of its result: the properties its teardown report holds.

One module for the run's own reports (session/transport.py, as each case ends) and for the
testcases written for cases whose reports never came (report/junit_gates.py: an interrupted
worker's, and ``toolbench finish --junitxml`` for a run killed outright), so a CI reader sees
the same properties either way.
"""

from __future__ import annotations

from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.safe_text import safe_text


def summary_properties(result: CaseResult) -> list[tuple[str, object]]:
    """``toolbench.outcome``, each value, the error kind, the failure message (cut to 500
    characters) and the endpoint retries."""
    props: list[tuple[str, object]] = [("toolbench.outcome", result.outcome.value)]
    props += [(f"toolbench.{k}", v) for k, v in sorted(result.values.items())]
    if result.error is not None:
        props.append(("toolbench.error_kind", result.error.kind))
    if result.failure_message:
        props.append(("toolbench.failure_message", safe_text(result.failure_message[:500])))
    retries = result.details.get("endpoint_retries")
    if retries:
        props.append(("toolbench.endpoint_retries", retries["count"]))
    return props
