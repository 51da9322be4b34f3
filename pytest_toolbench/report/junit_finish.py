"""The JUnit XML of a run killed outright, written by ``toolbench finish --junitxml`` outside pytest.

A CI job whose pytest was OOM-killed has no JUnit file, so its test-report step shows nothing or
fails on the missing file. The run kept each selected case's node id beside its id
(results/case_store.py ``write_selection``), so the file can hold what the run's own
``--junitxml`` would have: a testcase per case that finished, as its reports would have shown it
(with ``--gate`` a wrong answer passes and an infrastructure error is skipped), one with an
``<error>`` per selected case left without a result, the data as suite properties and each gate
as its own testcase (a run killed before any case finished has a record too, without a case).
It is pytest's own writer (``LogXML``) fed the reports the run would have sent, as
report/junit_gates.py feeds it at a run's end, so a reader sees the same layout.

The file is written beside its place and renamed into it: a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from _pytest.junitxml import LogXML

from pytest_toolbench.output_streams import write_in_place, writes_in_place
from pytest_toolbench.report.junit_gates import (
    ended_of,
    write_data_properties,
    write_gate_testcases,
    write_missing_testcases,
    write_unreported_testcases,
)

if TYPE_CHECKING:
    from pytest_toolbench.results.run_record import RunRecord


@dataclasses.dataclass(frozen=True)
class _RunSpan:
    """The run's start and wall time where ``LogXML`` reads its suite's (``suite_start``): the
    file's timestamp and time are the killed run's, not this command's."""

    started: float
    wall_s: float

    def elapsed(self) -> _RunSpan:
        return self

    @property
    def seconds(self) -> float:
        return self.wall_s

    def as_utc(self) -> datetime:
        return datetime.fromtimestamp(self.started, timezone.utc)


def write_killed_run_junit(path: Path, record: RunRecord, nodes: dict[str, str], *,
                           not_run_message: str) -> None:
    """Write the JUnit XML of the killed run ``record`` to ``path``: ``nodes`` maps each selected
    case's id to its node id, in selection order. A result whose case has no node id (it cannot
    happen for a run that kept them) is named ``<benchmark>::<case id>``, after the others."""
    gated = bool(record.run.settings.gates)
    results = {c.case_id: c for c in record.cases}
    with _junit_file(path, _RunSpan(record.run.started or 0.0, record.run.wall_s or 0.0)) as xml:
        for case_id, nodeid in nodes.items():  # in selection order, as the run's own file lists them
            result = results.get(case_id)
            if result is not None:
                write_unreported_testcases(xml, [ended_of(nodeid, result, gated=gated)])
            else:
                write_missing_testcases(xml, [nodeid], not_run_message)
        write_unreported_testcases(xml, [ended_of(f"{r.benchmark}::{i}", r, gated=gated)
                                         for i, r in results.items() if i not in nodes])
        write_data_properties(xml, record)
        if record.gates:
            write_gate_testcases(xml, record.gates)


@contextlib.contextmanager
def _junit_file(path: Path, span: _RunSpan) -> Iterator[LogXML]:
    """pytest's writer for ``path``, its suite timed as ``span``; the file is written beside
    its place and renamed into it once the block has added every testcase, or written through a
    device or stream (/dev/stdout: fileio.py ``writes_in_place``), which a rename would replace."""
    path = Path(os.path.expanduser(str(path)))
    through = writes_in_place(path)
    folder = Path(tempfile.gettempdir()) if through else path.parent
    tmp = folder / f".{path.name}.{os.getpid()}.tmp"
    xml = LogXML(str(tmp), None, family="xunit2")
    xml.suite_start = span  # type: ignore[assignment]
    try:
        yield xml
        xml.pytest_sessionfinish()
        if through:
            write_in_place(path, [tmp.read_bytes()])
        else:
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
