"""What the response cache's store costs, beside one SQLite file holding the same entries: CPU per
entry written and read back (by a later store, as a re-run reads them), and bytes on disk,
measured in one run, in turn.

Run: python perf/cache_store.py [--entries 3000] [--repeats 3] [--dir .toolbench]
``--dir``: where the temporary stores go (default: the default cache folder's parent, so the
figures are those of the file system a run's cache is on). The harness's store is
``models/cache_store.ResponseStore`` (pack files; up to the tenth pass a file per
entry); the SQLite one is the alternative the seventh pass proposed
(perf/README.md), in WAL mode with ``synchronous=NORMAL``, one autocommit insert per entry.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_toolbench.models.base import ChatResponse  # noqa: E402
from pytest_toolbench.models.cache import ResponseStore  # noqa: E402

#: A short tool-call reply, the common case of a first run.
REPLY = ChatResponse(message={"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_0", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "' + "x" * 200 + '"}'}}]},
    model="m")


def harness_store(root: Path, keys: list[str]) -> tuple[Callable[[], None], Callable[[], None]]:
    store = ResponseStore(root)

    def write() -> None:
        for key in keys:
            store.save(key, REPLY, {"model": "m", "case_id": "c"})
        store.close()

    def read() -> None:
        later = ResponseStore(root)  # a later run's store: indexing the packs is part of its cost
        for key in keys:
            assert later.load(key)[0] is not None

    return write, read


def sqlite_store(root: Path, keys: list[str]) -> tuple[Callable[[], None], Callable[[], None]]:
    root.mkdir(parents=True)
    db = sqlite3.connect(root / "responses.sqlite3", timeout=60, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, written REAL, entry BLOB) WITHOUT ROWID")

    def write() -> None:
        for key in keys:
            data = ResponseStore.encode(key, REPLY, {"model": "m", "case_id": "c"})  # the harness's bytes
            db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?)", (key, time.time(), data))

    def read() -> None:
        for key in keys:
            row = db.execute("SELECT entry FROM responses WHERE key = ?", (key,)).fetchone()
            assert ResponseStore.decode(key, row[0])[0] is not None

    return write, read


def disk_bytes(root: Path) -> tuple[int, int]:
    """(bytes allocated, files and folders) under ``root``."""
    used, count = 0, 0
    for path in [root, *root.rglob("*")]:
        used += os.lstat(path).st_blocks * 512
        count += 1
    return used, count


def cpu_per_entry(fn: Callable[[], None], n: int) -> float:
    start = time.process_time()
    fn()
    return (time.process_time() - start) / n * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path(".toolbench"))
    ns = parser.parse_args()
    ns.dir.mkdir(parents=True, exist_ok=True)
    figures: dict[str, list[tuple[float, float, int, int]]] = {"harness": [], "sqlite": []}
    for repeat in range(ns.repeats):
        keys = [hashlib.sha256(f"{repeat}-{i}-{time.time_ns()}".encode()).hexdigest() for i in range(ns.entries)]
        for name, make in (("harness", harness_store), ("sqlite", sqlite_store)):  # in turn: same machine state
            root = Path(tempfile.mkdtemp(prefix=f"cache-store-{name}-", dir=ns.dir)) / "cache"
            try:
                write, read = make(root, keys)
                w, r = cpu_per_entry(write, ns.entries), cpu_per_entry(read, ns.entries)
                used, count = disk_bytes(root)
                figures[name].append((w, r, used, count))
            finally:
                shutil.rmtree(root.parent, ignore_errors=True)
    print(f"{ns.entries} entries, {ns.repeats} repeats, in {ns.dir.resolve()} (least CPU of the repeats)")
    print(f"{'store':8} {'write ms/entry':>15} {'read ms/entry':>14} {'disk':>10} {'inodes':>7}")
    best = {name: (min(f[0] for f in rows), min(f[1] for f in rows), rows[0][2], rows[0][3])
            for name, rows in figures.items()}
    for name, (w, r, used, count) in best.items():
        print(f"{name:8} {w:15.3f} {r:14.3f} {used / 1e6:8.1f} MB {count:7d}")
    (fw, fr, fu, _), (sw, sr, su, _) = best["harness"], best["sqlite"]
    print(f"sqlite / harness: write {sw / fw:.2f}, read {sr / fr:.2f}, disk {su / fu:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
