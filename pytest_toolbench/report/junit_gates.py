"""Each gate as its own JUnit testcase, so a CI system reads the gates, not single answers.

With ``--junitxml``, pytest's own ``LogXML`` plugin writes the file at session end; the controller
feeds it one synthetic setup/call/teardown report per verdict just before, so the testcases are
real ``<testcase>`` elements (classname ``toolbench-gates`` for ``--gate`` expressions,
``toolbench-error-rate`` for the per-scenario ``--max-error-rate`` limits), with a ``<failure>``
holding the reason when a gate fails and the verdict as properties either way.

A selected case that never ran (the run was interrupted, its worker lost) would simply be absent
from the file, which then reads ``tests=8 failures=0 errors=0`` for a run that skipped 24 cases:
each such case gets its testcase with an ``<error message="not run: ...">``, so a JUnit reader
counts it.

The writers take the ``LogXML`` itself: the run's (:func:`junit_of`), or one that
``toolbench finish --junitxml`` makes for a run killed outright (report/junit_finish.py).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import NamedTuple

import pytest

from _pytest.junitxml import LogXML, bin_xml_escape, xml_key
from _pytest.reports import TestReport

from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.results.infra_errors import not_scored_text
from pytest_toolbench.results.junit_properties import summary_properties
from pytest_toolbench.results.safe_text import safe_text

GATE_CLASSNAME = "toolbench-gates"
ERROR_RATE_CLASSNAME = "toolbench-error-rate"
#: The run's own checks: every selected case reported, every output written.
RUN_CHECK_CLASSNAME = "toolbench-run"


def gate_nodeid(verdict: GateVerdict) -> str:
    prefix = {"metric": GATE_CLASSNAME, "error_rate": ERROR_RATE_CLASSNAME}.get(
        verdict.kind, RUN_CHECK_CLASSNAME)
    return f"{prefix}::{verdict.gate}"


def junit_of(config: pytest.Config) -> LogXML | None:
    """The run's JUnit XML writer (``--junitxml``), None when it writes none."""
    return config.stash.get(xml_key, None)


def write_missing_testcases(xml: LogXML, nodeids: Iterable[str], message: str) -> int:
    """One testcase with an ``<error>`` per selected node that never reported; returns how many."""
    n = 0
    for nodeid in nodeids:
        node = _open_testcase_node(xml, nodeid)
        reporter = xml.node_reporter(_report(nodeid, "passed", "teardown", node))
        error = ET.Element("error", message=bin_xml_escape(message))
        error.text = bin_xml_escape(f"{nodeid}: {message}")
        reporter.append(error)  # counted in the suite's errors
        # a passed teardown names the testcase (classname, name) and closes it
        xml.pytest_runtest_logreport(_report(nodeid, "passed", "teardown", node))
        n += 1
    return n


class Ended(NamedTuple):
    """A case that ran but whose own reports never reached the controller, as JUnit shows it."""

    nodeid: str
    outcome: str  # "passed" | "failed" | "error" | "skipped"
    message: str
    props: list[tuple[str, object]]  # the teardown's properties
    #: The testcase's time: the case's own wall time (``CaseResult.wall_s``; 0 for a result
    #: kept before it was), as a live run's reports are timed (session/case_timing.py).
    seconds: float


def ended_of(nodeid: str, result: CaseResult, *, gated: bool) -> Ended:
    """How the case's own reports would have shown it, for a case whose reports never came (an
    xdist worker's journal, a run killed outright): with gates a wrong answer passes and an
    infrastructure error is skipped, as session/controller.py lets the gates decide."""
    props = summary_properties(result)
    seconds = result.wall_s or 0.0
    if result.outcome is Outcome.PASSED or (gated and result.outcome is Outcome.FAILED):
        return Ended(nodeid, "passed", "", props, seconds)
    if result.outcome is Outcome.FAILED:
        return Ended(nodeid, "failed", safe_text(result.failure_message or "wrong answer"), props,
                     seconds)
    kind = result.error.kind if result.error else "error"
    if gated:
        return Ended(nodeid, "skipped", f"infrastructure error ({kind}), not scored; counted by "
                     "the error-rate gate", props, seconds)
    message = result.error.message if result.error else ""
    return Ended(nodeid, "error", not_scored_text(kind, message, multiline=False), props, seconds)


def write_unreported_testcases(xml: LogXML, ended: Iterable[Ended]) -> int:
    """A testcase for each case whose result the controller has (an xdist worker's journal) but
    whose test reports it never got: an interrupted worker stops before sending them, and pytest
    leaves such a test as a testcase without a name. Returns how many."""
    n = 0
    for nodeid, outcome, message, props, seconds in ended:
        node = _open_testcase_node(xml, nodeid)
        if outcome == "error":  # the case's time on the report that ended it, as pytest's run
            ending = _report(nodeid, "failed", "setup", node, message)
        elif outcome == "skipped":
            path, _, _ = nodeid.partition("::")
            ending = _report(nodeid, "skipped", "setup", node, (path, 0, message))
        else:
            ending = _report(nodeid, outcome, "call", node, message if outcome == "failed"
                             else None)
        ending.duration = seconds
        for report in [ending, _report(nodeid, "passed", "teardown", node, props=props)]:
            xml.pytest_runtest_logreport(report)
        n += 1
    return n


def _open_testcase_node(xml: LogXML, nodeid: str) -> object:
    """The xdist node of the testcase LogXML opened for ``nodeid`` and never closed (its test was
    cut short after its set-up), so what is written for it completes that testcase instead of
    leaving it without a name beside a second one; None when there is none."""
    return next((node for key, node in xml.node_reporters if str(key) == nodeid), None)


def _report(nodeid: str, outcome: str, when: str, node: object, longrepr: object = None,
            props: list[tuple[str, object]] | None = None) -> TestReport:
    path, _, name = nodeid.partition("::")
    report = TestReport(nodeid, (path, None, name), {}, outcome, longrepr, when,  # type: ignore[arg-type]
                        user_properties=props or [])
    if node is not None:
        report.node = node  # type: ignore[attr-defined]  # LogXML keys an xdist testcase by it
    return report


def write_data_properties(xml: LogXML, record: object) -> int:
    """The run's data as testsuite-level ``<properties>``:
    ``toolbench.data`` (every benchmark: real or sample, revision, fingerprint),
    ``toolbench.data.kind``, ``toolbench.data.fingerprint``, one ``toolbench.data.<benchmark>``
    each, and with ``--baseline`` the comparison's data notes (``toolbench.baseline.data``).
    Returns how many were added (none twice)."""
    from pytest_toolbench.results.provenance import provenance_dict

    run = getattr(record, "run", None)
    if run is None:
        return 0
    props = _data_props(run.data or provenance_dict(run.data_sources))
    baseline = getattr(record, "baseline", None)
    if baseline is not None:
        props.append(("toolbench.baseline.data", "; ".join(
            f"{r.label}: {r.data or 'unknown'}" for r in baseline.runs)))
        if baseline.different_data:
            props.append(("toolbench.baseline.different_data", "; ".join(baseline.different_data)))
    return _add_global_properties(xml, props)


def write_data_source_properties(xml: LogXML, data_sources: Iterable[object]) -> int:
    """The same data properties for a run with no record (an output failed before any case
    reported), from the data sources its start recorded: a CI reader still sees what
    data the run was on. Returns how many were added (none twice)."""
    from pytest_toolbench.results.provenance import provenance_dict

    sources = list(data_sources)
    return _add_global_properties(xml, _data_props(provenance_dict(sources))) if sources else 0


def _data_props(data: dict) -> list[tuple[str, object]]:
    props: list[tuple[str, object]] = [
        ("toolbench.data", data.get("text", "")),
        ("toolbench.data.kind", data.get("kind", "unknown")),
        ("toolbench.data.fingerprint", data.get("fingerprint") or "unknown")]
    for b in data.get("benchmarks", []):
        props.append((f"toolbench.data.{b.get('benchmark')}",
                      f"{b.get('kind')} revision {b.get('revision') or 'none'} "
                      f"fingerprint {b.get('fingerprint') or 'unknown'}"))
    return props


def _add_global_properties(xml: LogXML, props: list[tuple[str, object]]) -> int:
    have = {name for name, _ in xml.global_properties}
    n = 0
    for name, value in props:
        if name not in have:
            xml.add_global_property(name, safe_text(str(value)))
            n += 1
    return n


def write_gate_testcases(xml: LogXML, verdicts: Iterable[GateVerdict]) -> int:
    """Add one testcase per verdict to the JUnit XML; returns how many."""
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
