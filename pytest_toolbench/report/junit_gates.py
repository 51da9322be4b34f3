"""Each gate as its own JUnit testcase, so a CI system reads the gates, not single answers.

With ``--junitxml``, pytest's own ``LogXML`` plugin writes the file at session end; the controller
feeds it one synthetic setup/call/teardown report per verdict just before, so the testcases are
real ``<testcase>`` elements (classname ``toolbench-gates`` for ``--gate`` expressions,
``toolbench-error-rate`` for the per-scenario ``--max-error-rate`` limits), with a ``<failure>``
holding the reason when a gate fails and the verdict as properties either way.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from _pytest.junitxml import xml_key
from _pytest.reports import TestReport

from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.results.safe_text import safe_text

GATE_CLASSNAME = "toolbench-gates"
ERROR_RATE_CLASSNAME = "toolbench-error-rate"
#: The run's own checks: every selected case reported, every output written.
RUN_CHECK_CLASSNAME = "toolbench-run"


def gate_nodeid(verdict: GateVerdict) -> str:
    prefix = {"metric": GATE_CLASSNAME, "error_rate": ERROR_RATE_CLASSNAME}.get(
        verdict.kind, RUN_CHECK_CLASSNAME)
    return f"{prefix}::{verdict.gate}"


def write_gate_testcases(config: pytest.Config, verdicts: Iterable[GateVerdict]) -> int:
    """Add one testcase per verdict to the JUnit XML (if one is being written); returns how many."""
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return 0
    n = 0
    for verdict in verdicts:
        # a reason quotes case ids and endpoint errors: escaped like every text a CI log shows
        verdict = verdict.model_copy(update={"gate": safe_text(verdict.gate),
                                             "reason": safe_text(verdict.reason)})
        nodeid = gate_nodeid(verdict)
        location = (nodeid.split("::")[0], None, verdict.gate)
        props = [
            ("toolbench.gate.verdict", "passed" if verdict.passed else "failed"),
            ("toolbench.gate.actual", "n/a" if verdict.actual is None else f"{verdict.actual:.6g}"),
            ("toolbench.gate.reason", verdict.reason),
        ]
        # pytest reads "[...]" in a node id as parameters and would write a subgroup gate
        # ("toolhop.mandatory[hops=3].accuracy>=0.5") with a stray "]"; a name set on the
        # reporter beforehand is kept as a user attribute.
        reporter = xml.node_reporter(nodeid)
        reporter.attrs["name"] = verdict.gate
        call_outcome = "passed" if verdict.passed else "failed"
        longrepr = None if verdict.passed else f"gate failed: {verdict.gate}: {verdict.reason}"
        for when, outcome, text, user_props in (
            ("setup", "passed", None, []),
            ("call", call_outcome, longrepr, []),
            ("teardown", "passed", None, props),
        ):
            xml.pytest_runtest_logreport(
                TestReport(nodeid, location, {}, outcome, text, when, user_properties=user_props)  # type: ignore[arg-type]
            )
        n += 1
    return n
