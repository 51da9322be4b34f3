"""No lock files left behind (fileio.py ``PathLock``): a FamilyTool run's extraction memo kept
one empty ``.lock`` file per entry (937 of its 1,874 files) with filelock's Unix lock."""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path

from pytest_toolbench.benchmarks.familytool.memo import ExtractionMemo, memo_key
from pytest_toolbench.fileio import PathLock


def _hold_and_count(path: str, counter: str, rounds: int) -> None:
    for _ in range(rounds):
        lock = PathLock(path)
        lock.acquire()
        try:  # a read-modify-write that loses updates unless the lock excludes the others
            value = int(Path(counter).read_text() or 0)
            Path(counter).write_text(str(value + 1))
        finally:
            lock.release()


def test_path_lock_excludes_other_processes_and_leaves_no_file(tmp_path):
    counter = tmp_path / "counter"
    counter.write_text("0")
    lock_path = str(tmp_path / "entry.json.lock")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hold_and_count, args=(lock_path, str(counter), 40)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert counter.read_text() == "120"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counter"]


def test_the_extraction_memo_leaves_no_lock_files(tmp_path):
    memo = ExtractionMemo(tmp_path / "memo")

    async def make() -> dict:
        return {"raw_output": "x"}

    async def run() -> list[bool]:
        keys = [memo_key("sample", i % 3) for i in range(9)]
        return [made for _, made in await asyncio.gather(*(memo.get_or_make(k, make) for k in keys))]

    assert sum(asyncio.run(run())) == 3  # one extraction per key
    files = [p for p in (tmp_path / "memo").rglob("*") if p.is_file()]
    assert len(files) == 3 and not any(p.name.endswith(".lock") for p in files)
    # one gzip file per entry, in one folder (no two-hex subfolders), read back as made
    assert all(p.parent == tmp_path / "memo" and p.name.endswith(".json.gz") for p in files)
    again = ExtractionMemo(tmp_path / "memo")

    async def fail() -> dict:
        raise AssertionError("made again")

    assert asyncio.run(again.get_or_make(memo_key("sample", 0), fail)) == ({"raw_output": "x"}, False)


def test_a_holder_killed_with_the_lock_leaves_a_file_the_next_holder_takes_and_removes(tmp_path):
    import subprocess
    import sys

    lock_path = tmp_path / "entry.json.lock"
    code = ("import os, sys\n"
            "from pytest_toolbench.fileio import PathLock\n"
            "PathLock(sys.argv[1]).acquire()\n"
            "os._exit(0)  # killed while holding it: no release\n")
    subprocess.run([sys.executable, "-c", code, str(lock_path)], check=True, timeout=60)
    assert lock_path.exists()
    lock = PathLock(lock_path)
    lock.acquire()  # the kernel released the dead holder's flock: no wait
    lock.release()
    assert not lock_path.exists()


def test_a_case_cancelled_while_it_waits_for_the_memo_lock_leaves_the_lock_free(tmp_path):
    """A case stopped (its --case-timeout, Ctrl-C) while another process holds the entry's lock
    took it later anyway and never gave it back: the wait ran on a thread that went on after the
    cancellation, and the release lay past the await. Every later maker of that key (another
    worker, or this one through a new descriptor) then waited for it until its own timeout."""
    memo = ExtractionMemo(tmp_path / "memo")
    key = memo_key("sample", "model")
    lock_path = str(memo._path(key)) + ".lock"
    (tmp_path / "memo").mkdir()
    holder = PathLock(lock_path)  # another worker, making the same entry
    holder.acquire()
    assert not PathLock(lock_path).try_acquire()  # held: no wait, no descriptor left open

    async def make():
        return {"reply": "made"}

    async def cancelled_while_waiting():
        task = asyncio.ensure_future(memo.get_or_make(key, make))
        await asyncio.sleep(0.3)
        assert not task.done()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        holder.release()  # the other worker's make failed: it stored nothing
        await asyncio.sleep(0.5)

    asyncio.run(cancelled_while_waiting())
    after = PathLock(lock_path)
    assert after.try_acquire(), "the cancelled case's wait took the lock and kept it"
    after.release()
    value, made = asyncio.run(memo.get_or_make(key, make))
    assert made and value == {"reply": "made"}
    assert not Path(lock_path).exists()
