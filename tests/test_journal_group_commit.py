"""Group-commit journal: a line is in the file when append returns, fsync is batched off-thread."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.journal import ResultJournal, read_journal


def result(i: int) -> CaseResult:
    return CaseResult(case_id=f"c{i}", benchmark="toolhop", scenario="direct", outcome=Outcome.PASSED)


def test_lines_survive_a_killed_process_without_close(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    code = (
        "import os, sys\n"
        "from pytest_toolbench.results.journal import ResultJournal\n"
        "from pytest_toolbench.results.case_result import CaseResult, Outcome\n"
        "j = ResultJournal(sys.argv[1])\n"
        "for i in range(50):\n"
        "    j.append(CaseResult(case_id=f'c{i}', benchmark='toolhop', scenario='direct', outcome=Outcome.FAILED))\n"
        "os._exit(0)  # no close, no atexit: as if killed right after the last append\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, cwd=Path(__file__).parents[1])
    assert [r.case_id for r in read_journal(path)] == [f"c{i}" for i in range(50)]


def test_threads_append_and_close_flushes(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    journal = ResultJournal(path)
    threads = [threading.Thread(target=lambda k=k: [journal.append(result(k * 100 + i)) for i in range(40)])
               for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    journal.close()
    journal.close()  # idempotent
    assert journal._synced == journal._written == 160
    assert sorted(r.case_id for r in read_journal(path)) == sorted(f"c{k * 100 + i}" for k in range(4) for i in range(40))
