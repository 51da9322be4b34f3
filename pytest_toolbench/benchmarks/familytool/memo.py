"""Extraction runs once per (sample, extraction model, prompt), however many cases need it and on
whichever xdist worker they run: a file-locked on-disk memo in the run's folder.

The extraction prompt does not depend on the method (GS and RR post-process the same reply, as
upstream's post-process script does on one results file), so one reply serves both methods.

An entry is one gzip file, ``<key>.json.gz``, in one folder: the memo is the run folder's second
largest part after the journal (FamilyTool's 5,628 cases: 937 entries of the prompt and reply,
4.66 MB as JSON in 248 two-hex subfolders, 5.68 MB with the folders, against 1.5 MB gzipped in
one folder). Only this run reads it (each run has its own folder), and only while it runs: it is
a scratch folder of the run (``BenchmarkEnv.scratch_dir``), removed once the run has ended whole,
as every case's result holds its extraction.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pytest_toolbench.fileio import PathLock, atomic_write_bytes

#: How often a case waiting for another process's extraction of the same entry looks again:
#: that extraction is a model call of seconds.
LOCK_POLL_S = 0.05


def memo_key(*parts: Any) -> str:
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ExtractionMemo:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._locks: dict[str, asyncio.Lock] = {}

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.json.gz"

    def _load(self, path: Path) -> dict[str, Any] | None:
        try:
            return json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
        except (OSError, EOFError, zlib.error, ValueError):  # absent (or unreadable: made again)
            return None

    async def get_or_make(
        self, key: str, make: Callable[[], Awaitable[dict[str, Any]]]
    ) -> tuple[dict[str, Any], bool]:
        """``(value, made_here)``: the stored value, or ``make()``'s, stored for everyone else.
        A failing ``make`` stores nothing (the next case retries)."""
        path = self._path(key)
        found = self._load(path)
        if found is not None:
            return found, False
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one coroutine per process, then one process per key
            found = self._load(path)
            if found is not None:
                return found, False
            path.parent.mkdir(parents=True, exist_ok=True)
            # PathLock: no empty .lock file per entry left in the run folder (filelock kept one)
            file_lock = PathLock(str(path) + ".lock")
            # Polled, not waited for on a thread: a case cancelled meanwhile (its timeout,
            # Ctrl-C) holds nothing, where the thread took the lock later and kept it.
            while not file_lock.try_acquire():
                await asyncio.sleep(LOCK_POLL_S)
            try:
                found = self._load(path)
                if found is not None:
                    return found, False
                value = await make()
                data = json.dumps(value, ensure_ascii=False).encode("utf-8")
                atomic_write_bytes(path, gzip.compress(data, mtime=0))
                return value, True
            finally:
                file_lock.release()
