"""Which selected cases reported: the controller's record of the selected nodes, and the
infrastructure error that stands for a case whose xdist worker died under it.

Results reach the controller one test report at a time; a worker killed mid-case (SIGKILL, the
OOM killer), a worker xdist gave up on, an exception in the transport or ``-x`` can each leave a
selected case without one. The controller records which nodes were selected (its own collection,
or under xdist the node ids each worker collected) and, at session end, compares them with the
results that arrived: whatever is left is *missing* (results/partial_run.py words it).

A node xdist reports as crashed ("worker 'gw1' crashed while running ...") is turned into an
infrastructure error of kind ``worker_crashed`` carrying that message, so it is counted by the
error-rate gate like any lost endpoint call rather than vanishing from the metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.benchmarks.result_builders import base_fields, error_result
from pytest_toolbench.results.case_result import CaseResult, InfraError
from pytest_toolbench.runtime.repeat import expand_repeats


CRASH_KIND = "worker_crashed"


#: The crash's cause and the option that would help, as ``InfraError.hint`` carries them
#: (``cause | try: option``, read by results/infra_errors.py).
CRASH_HINT = ("the xdist worker running the case died (killed, out of memory, or a crash in native "
              "code) | try: see the worker's output above; --lf reruns the case")


def param_id(nodeid: str) -> str | None:
    """``a.py::test_x[toolhop-17-direct]`` -> ``toolhop-17-direct`` (None: not parametrised)."""
    name = nodeid.rsplit("::", 1)[-1]
    start = name.find("[")
    if start < 0 or not name.endswith("]"):
        return None
    return name[start + 1:-1]


def crash_message(report: Any) -> str | None:
    """The message of a report xdist made up for a node whose worker died under it, else None.

    xdist (``DSession.handle_crashitem``) sends a failed report with ``when="???"`` and the text
    ``worker 'gwN' crashed while running '<nodeid>'``; both are checked so a change to either is
    still caught."""
    if not getattr(report, "failed", False):
        return None
    text = str(getattr(report, "longrepr", "") or "").strip()
    if getattr(report, "when", None) == "???" or "crashed while running" in text:
        return text or f"the worker running {getattr(report, 'nodeid', '?')} crashed"
    return None


def crashed_result(case: Case, message: str, model: str = "") -> CaseResult:
    """The infrastructure error standing for a case whose worker died while running it."""
    return error_result(base_fields(case, model),
                        InfraError(kind=CRASH_KIND, message=message, hint=CRASH_HINT))


class CaseTracker:
    """Controller side: the selected nodes and which of them the controller has heard from."""

    def __init__(self) -> None:
        #: node id -> its Case (None: a node that is not a known benchmark case).
        self.expected: dict[str, Case | None] = {}
        #: Nodes whose test ended (a result arrived, or for a non-case node its teardown).
        self.ended: set[str] = set()
        #: The selection is known (collected, if empty): a run stopped before it cannot say
        #: which cases it left without a result.
        self.collected = False

    def expect_items(self, items: Iterable[Any]) -> None:
        """In-process: the session's items after deselection."""
        self.collected = True
        for item in items:
            callspec = getattr(item, "callspec", None)
            case = callspec.params.get("case") if callspec is not None else None
            self.expected[item.nodeid] = case if isinstance(case, Case) else None

    def expect_node_ids(self, ids: Iterable[str], cases_by_id: Mapping[str, Case]) -> None:
        """Under xdist: the node ids a worker collected; their cases are found by parameter id
        among the cases the controller loaded itself (``cases_by_id``)."""
        self.collected = True
        for nodeid in ids:
            if nodeid not in self.expected:
                pid = param_id(nodeid)
                self.expected[nodeid] = cases_by_id.get(pid) if pid is not None else None

    def forget_selection(self) -> None:
        """What a collection cut short recorded is not the selection: unknown again."""
        self.collected = False
        self.expected.clear()

    def case_of(self, nodeid: str) -> Case | None:
        return self.expected.get(nodeid)

    def saw_report(self, report: Any, *, with_result: bool) -> None:
        if with_result or report.when == "teardown" or crash_message(report) is not None:
            self.ended.add(report.nodeid)

    def missing(self, results: Mapping[str, CaseResult]) -> list[str]:
        """Ids of the selected cases (node ids for other nodes) without a result, in
        selection order."""
        return [case.id if case is not None else nodeid
                for nodeid, case in self._missing(results)]

    def missing_nodes(self, results: Mapping[str, CaseResult]) -> list[str]:
        """Node ids of the same selected nodes (what a JUnit testcase is named after)."""
        return [nodeid for nodeid, _ in self._missing(results)]

    def missing_cases(self, results: Mapping[str, CaseResult]) -> list[tuple[str, Case | None]]:
        """(node id, its Case or None) of the same selected nodes (what an Allure result that
        stands for a case never run is built from)."""
        return self._missing(results)

    def unreported(self, results: Mapping[str, CaseResult]) -> list[tuple[str, CaseResult]]:
        """(node id, result) of the cases whose result arrived some other way than on their own
        test report (an xdist worker's journal, read at the session end)."""
        return [(nodeid, results[case.id]) for nodeid, case in self.expected.items()
                if case is not None and case.id in results and nodeid not in self.ended]

    def _missing(self, results: Mapping[str, CaseResult]) -> list[tuple[str, Case | None]]:
        return [(nodeid, case) for nodeid, case in self.expected.items()
                if (case.id not in results if case is not None else nodeid not in self.ended)]


def cases_by_id(cases: Mapping[str, list[Case]], repeats: int) -> dict[str, Case]:
    """Every case the controller selected, by the id its pytest node carries (repeats expanded)."""
    return {c.id: c for group in cases.values() for c in expand_repeats(group, repeats)}
