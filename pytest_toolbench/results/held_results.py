"""The controller's copy of a journalled result: what scoring and the reports read, without the
bulk the run's journal already holds (the transcript, the ``details`` nothing there reads).

The controller holds every result of a run until the session end scores them. Held whole, a
FamilyTool oracle run over the shared data (5,628 cases, ``-n 2``) peaked at 509 MB in the
controller, 109 MB after collection: most of it the results' transcripts and the extraction
prompt each FamilyTool case keeps in ``details``, all of it in the journal already. Held without
them, a run of 100,000 such cases fits in a CI runner.

Nothing at the session end needs the bulk: metrics read ``values``, ``labels`` and ``outcome``;
of ``details`` the harness reads only :data:`SESSION_END_DETAILS`, and a benchmark's report
tables only the keys it declares (``report_details``, benchmarks/base.py
``details_read_at_session_end``; one that declares nothing keeps every key). So that a reader of
anything else fails loudly rather than reads nothing, a held result's ``details`` raise
:class:`LeftInJournal` for a key left in the journal, its transcript raises on any read, and a
record holding a held result refuses to write its cases inline (``RunRecord.report_dict``): the
writer reads them from the journal (:func:`whole_cases`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from pytest_toolbench.results.case_result import CaseResult

#: The ``details`` keys the harness itself reads at the session end: the run's endpoint totals
#: (session/finish.py, models/endpoint_pool.py ``endpoint_totals``) and the cases cut short
#: (results/aggregate.py).
SESSION_END_DETAILS = ("endpoints", "cut_replies")


class LeftInJournal(KeyError):
    """A held result's bulk was read: read the case from the run's journal instead."""


def _left(what: str) -> NoReturn:
    raise LeftInJournal(f"{what} of a result the controller holds is in the run's journal only "
                        "(results/held_results.py): read the case from the journal, or name the "
                        "key in the benchmark's report_details if its report tables read it")


class HeldDetails(dict[str, Any]):
    """A held result's short ``details``; reading a key ``left`` in the journal raises."""

    __slots__ = ("left",)

    def __init__(self, kept: dict[str, Any], left: frozenset[str]):
        super().__init__(kept)
        self.left = left

    def __getitem__(self, key: str) -> Any:
        if key in self.left:
            _left(f"details[{key!r}]")
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if key in self.left:
            _left(f"details[{key!r}]")
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.left or super().__contains__(key)

    # Every key, or how many: the left ones cannot be given, so none is (a silent partial view is
    # what this class exists to prevent). Nothing is left: the plain dict's answer.
    def __iter__(self) -> Iterator[str]:
        if self.left:
            _left("every key of details")
        return super().__iter__()

    def __len__(self) -> int:
        if self.left:
            _left("every key of details")
        return super().__len__()

    def keys(self) -> Any:
        return iter(self) and super().keys()

    def items(self) -> Any:
        return iter(self) and super().items()

    def values(self) -> Any:
        return iter(self) and super().values()


class HeldTranscript(list[dict[str, Any]]):
    """A held result's transcript: in the journal only; any read raises."""

    def __len__(self) -> int:
        _left("the transcript")

    def __bool__(self) -> bool:
        _left("the transcript")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        _left("the transcript")

    def __getitem__(self, index: Any) -> Any:
        _left("the transcript")


def held(result: CaseResult, keep: Collection[str] | None) -> CaseResult:
    """``result`` as the controller keeps it once the run's journal holds it whole: no
    transcript, and of ``details`` only the keys in ``keep`` (None: every key). A shallow copy:
    the result itself, which a test's teardown may still read, is left as it is."""
    update: dict[str, Any] = {"transcript": HeldTranscript()}
    if keep is not None:
        details = result.details
        update["details"] = HeldDetails({k: details[k] for k in keep if k in details},
                                        frozenset(k for k in details if k not in keep))
    return result.model_copy(update=update)


def is_held(result: CaseResult) -> bool:
    return isinstance(result.transcript, HeldTranscript)


def whole_cases(results: Sequence[CaseResult], run_dir: Path) -> Iterator[dict[str, Any]]:
    """The report's ``cases`` for ``results``, in their order, as JSON values, one at a time: a
    held one parsed from its line in the run's journal (its last, as a report reader reads it:
    results/case_store.py), any other dumped. A held result is only made once its journal line
    was written, so the journal has it even when a later write failed. The writer streams them
    (``RunRecord.json_chunks``): the lines stay bytes until each case's turn, so a report that
    holds its cases inline costs the journal's text in memory, not every case as Python values."""
    import pydantic_core

    from pytest_toolbench.results.case_store import CaseStoreError, journal_case_lines

    path, lines = (journal_case_lines(run_dir) if any(is_held(r) for r in results)
                   else (None, {}))
    for r in results:
        if not is_held(r):
            yield r.model_dump(mode="json")
            continue
        line = lines.get(r.case_id)
        if line is None:
            raise CaseStoreError(f"{path}: the journalled case {r.case_id} cannot be read back")
        try:
            yield pydantic_core.from_json(line)
        except ValueError as exc:
            raise CaseStoreError(f"{path}: the journalled case {r.case_id} cannot be read back "
                                 f"({exc})") from None
