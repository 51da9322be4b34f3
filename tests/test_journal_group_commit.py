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


def test_fsyncs_are_paced_and_flush_covers_every_line(tmp_path: Path, monkeypatch) -> None:
    """One fsync per SYNC_INTERVAL_S at most while lines stream in (woken per line, the fsync
    thread took the GIL from the appending thread for every case); flush() ends the pause.

    The interval is 30 s here, not 0.2 s: a flush that waited out the pause would then take 10 s or
    more, while one that ends it may still wait seconds for a slow fsync on a busy CI disk (at
    0.2 s, one slow fsync alone would have failed the check)."""
    import os
    import time

    from pytest_toolbench.results import journal as journal_module

    monkeypatch.setattr(journal_module, "SYNC_INTERVAL_S", 30.0)
    calls: list[float] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        calls.append(time.monotonic())
        real_fsync(fd)

    monkeypatch.setattr(journal_module.os, "fsync", counting_fsync)
    journal = ResultJournal(tmp_path / "results.jsonl")
    started = time.monotonic()
    for i in range(300):  # ~0.6 s of lines, one every 2 ms
        journal.append(result(i))
        time.sleep(0.002)
    took = time.monotonic() - started
    flushed_at = time.monotonic()
    journal.flush()
    assert journal._synced == journal._written == 300
    # flush does not wait out the pause that began at the first line (10 s or more of it remain)
    assert took < 20 and time.monotonic() - flushed_at < 10, took
    paced = [t for t in calls if t < flushed_at]
    assert 1 <= len(paced) <= took / journal_module.SYNC_INTERVAL_S + 2
    journal.close()
    assert len(list(read_journal(tmp_path / "results.jsonl"))) == 300


def test_an_idle_fsync_thread_wakes_for_a_new_line(tmp_path: Path) -> None:
    """After a quiet spell the next line is fsynced without a flush (the thread sleeps until
    append wakes it), within about one interval."""
    import time

    from pytest_toolbench.results import journal as journal_module

    journal = ResultJournal(tmp_path / "results.jsonl")
    journal.append(result(0))
    time.sleep(3 * journal_module.SYNC_INTERVAL_S)  # synced, paused, then idle
    assert journal._syncer_idle
    journal.append(result(1))
    deadline = time.monotonic() + 10
    while journal._synced < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert journal._synced == journal._written == 2
    journal.close()


def test_sync_soon_ends_the_pause_and_returns_at_once(tmp_path: Path, monkeypatch) -> None:
    """At a run's end the last group commit starts at once (its fsync overlaps the end's work)
    instead of after the thread's pause; the caller does not wait for it."""
    import time

    from pytest_toolbench.results import journal as journal_module

    monkeypatch.setattr(journal_module, "SYNC_INTERVAL_S", 60.0)  # a pause no test would outwait
    journal = ResultJournal(tmp_path / "results.jsonl")
    journal.append(result(0))
    deadline = time.monotonic() + 10
    while journal._synced < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    journal.append(result(1))  # while the thread pauses: left for the next commit
    time.sleep(0.1)
    assert journal._synced == 1
    started = time.monotonic()
    journal.sync_soon()
    assert time.monotonic() - started < 1.0
    while journal._synced < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert journal._synced == journal._written == 2
    journal.close()


def test_a_result_passed_on_as_json_is_the_same_line(tmp_path: Path) -> None:
    """The controller journals a worker's JSON as received: the same bytes append() writes for
    the result it validates to, control characters escaped alike."""
    rich = CaseResult(case_id="c\u202e1", benchmark="toolhop", scenario="direct", outcome=Outcome.FAILED,
                      failure_message="tab\there, DEL \x7f, bidi \u202e, emoji \U0001f600", values={"accuracy": 0.5})
    received = rich.model_dump_json()
    with ResultJournal(tmp_path / "a.jsonl") as a, ResultJournal(tmp_path / "b.jsonl") as b:
        a.append(CaseResult.model_validate_json(received))
        b.append_json(received)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert list(read_journal(tmp_path / "b.jsonl")) == [rich]
