"""``toolbench prune``: remove old run folders and response-cache entries by age or total size.

Items are whole run folders (``runs/<run_id>``) and the cache folder's files: the response
cache's packs (one per process that stored replies, models/cache_store.py), the result cache's
(``results/``, one per process that stored whole cases' results) and entries of the older
one-file-per-entry layout, and the parsed data files kept between runs (benchmarks/parsed_files.py:
``parsed/u<uid>/*.pickle``, whose time is their last use). An item's age is its last write: the
newest file in a run folder, the file's time for the cache. ``--older-than`` removes every item
older than the limit; ``--max-size`` then removes the oldest remaining items (runs and cache files
alike) until the total fits. A run whose process is still running is never removed, nor a pack
that a process of this host is still appending to (what it stored after the removal would be lost).

Only what the harness wrote is an item: a folder of the runs folder is a run when its name is a
run id or it holds a run's files, and a cache file only by the names the cache gives. A mistyped
``--runs-dir .`` or ``--cache-dir ~`` would otherwise remove a project's or a home's folders; what
is left alone for that reason is named (:func:`foreign_folders`).
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_toolbench.benchmarks.parsed_files import KEPT_FOLDER
from pytest_toolbench.counting import counted
from pytest_toolbench.models.cache_store import PACK_AREAS, PACK_SUFFIX, pack_writer_alive
from pytest_toolbench.results import case_store
from pytest_toolbench.runs.record import INDEX_NAME, REPORT_NAME, read_index

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
#: Every unit spelt so that it cannot be misread; a bare number is days.
_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("", "d", "day", "days"), 86400),
    **dict.fromkeys(("w", "week", "weeks"), 7 * 86400),
}
#: Read as minutes by some and months by others: `1m` meant as a month removed every run older
#: than a minute. `m` is minutes only where no one could mean months (60 or more: `90m`);
#: below that it is refused, with the spellings that say which.
_AMBIGUOUS = ("m", "M")
_PLAINLY_MINUTES = 60
#: Months have no fixed length; refused rather than guessed.
_MONTHS = ("mo", "mon", "month", "months")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)(b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}

Kind = Literal["run", "cache"]
#: A run folder's name as the plugin makes it (session/identity.py ``new_run_id``).
_RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")
#: An entry of the cache's older layout: ``<key[:2]>/<key[2:4]>/<key>.json``, key a sha256.
_OLD_ENTRY = re.compile(r"([0-9a-f]{2})([0-9a-f]{2})[0-9a-f]{60}\.json")
_HEX2 = re.compile(r"[0-9a-f]{2}")


def parse_duration(text: str) -> float:
    """``30d``, ``12h``, ``90min``, ``90m``, ``2w``, ``45s`` (a bare number is days) -> seconds.

    ``m`` below 60 (``1m``, ``6m``) and months in any spelling are refused as ambiguous: a limit
    that reads as a month to one user and a minute to another must not decide what gets
    deleted; ``90m`` can only mean minutes."""
    m = _DURATION.match(text)
    unit = m.group(2) if m is not None else ""
    if m is not None and unit in _AMBIGUOUS and float(m.group(1)) >= _PLAINLY_MINUTES:
        return float(m.group(1)) * 60
    if m is not None and unit in _AMBIGUOUS:
        raise ValueError(f"--older-than {text!r}: {unit!r} is ambiguous (minutes or months?): "
                         f"write e.g. 90min or 30d")
    if m is not None and unit.lower() in _MONTHS:
        raise ValueError(f"--older-than {text!r}: months have no fixed length: write days, "
                         f"e.g. 30d")
    if m is None or unit.lower() not in _UNITS:
        raise ValueError(f"--older-than {text!r}: expected a number with s, min, h, d or w, "
                         f"e.g. 30d, 12h or 90min")
    return float(m.group(1)) * _UNITS[unit.lower()]


def parse_size(text: str) -> int:
    """``2GB`` (10^9), ``2GiB`` (2^30), ``500MB``, ``100k``, ``123`` (bytes) -> bytes."""
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"--max-size {text!r}: expected a size such as 2GB, 500MB or 1GiB")
    number, unit, binary = float(m.group(1)), m.group(2).lower(), bool(m.group(3))
    return int(number * (1024 if binary else 1000) ** _POWERS[unit])


def format_size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n:.1f} TB"


@dataclass
class Item:
    kind: Kind
    path: Path
    mtime: float
    size: int
    live: bool = False  # a run whose process is still running, a pack being written: never removed


def _tree(path: Path) -> tuple[int, float]:
    size, newest = 0, path.stat().st_mtime
    for f in path.rglob("*"):
        try:
            st = f.stat()
        except OSError:
            continue
        if f.is_file():
            size += st.st_size
        newest = max(newest, st.st_mtime)
    return size, newest


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` is a run's: named by a run id, or holding a run's index, report or
    journal (a run folder renamed by hand still is)."""
    return bool(_RUN_ID.fullmatch(folder.name)) or (folder / INDEX_NAME).exists() \
        or (folder / REPORT_NAME).exists() or bool(case_store.journal_parts(folder))


def foreign_folders(runs_dir: Path) -> list[Path]:
    """The folders of ``runs_dir`` that are not runs: never pruned, named to the user."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    return sorted(d for d in root.iterdir() if d.is_dir() and not is_run_folder(d))


def _old_entry(path: Path) -> bool:
    m = _OLD_ENTRY.fullmatch(path.name)
    return m is not None and (path.parent.parent.name, path.parent.name) == m.groups()


def collect(cache_dir: Path, runs_dir: Path, *, only: Kind | None = None) -> list[Item]:
    """Run folders under ``runs_dir`` and cache entries under ``cache_dir``; nothing else."""
    items: list[Item] = []
    root = Path(runs_dir)
    if only != "cache" and root.is_dir():
        for d in sorted(p for p in root.iterdir() if p.is_dir() and is_run_folder(p)):
            size, mtime = _tree(d)
            index = read_index(d)
            items.append(Item("run", d, mtime, size, live=index is not None and index.status == "running"))
    if only != "run" and Path(cache_dir).is_dir():
        root = Path(cache_dir)
        for f in [*sorted(f for f in root.glob("??/??/*.json") if _old_entry(f)),
                  *(f for area in PACK_AREAS for f in sorted(root.glob(f"{area}/*/*{PACK_SUFFIX}"))),
                  *sorted(root.glob(f"{KEPT_FOLDER}/u*/*.pickle"))]:
            try:
                st = f.stat()
            except OSError:
                continue
            items.append(Item("cache", f, st.st_mtime, st.st_size, live=pack_writer_alive(f.name, st.st_mtime)))
    return items


def plan(items: list[Item], *, older_than_s: float | None, max_size: int | None,
         now: float | None = None) -> list[Item]:
    """The items to remove, oldest first."""
    now = time.time() if now is None else now
    candidates = sorted((i for i in items if not i.live), key=lambda i: (i.mtime, str(i.path)))
    remove = [i for i in candidates if older_than_s is not None and now - i.mtime > older_than_s]
    if max_size is not None:
        gone = {id(i) for i in remove}
        total = sum(i.size for i in items if id(i) not in gone)
        for i in candidates:
            if total <= max_size:
                break
            if id(i) not in gone:
                remove.append(i)
                gone.add(id(i))
                total -= i.size
    return sorted(remove, key=lambda i: (i.mtime, str(i.path)))


def apply(items: list[Item], cache_dir: Path) -> None:
    for i in items:
        if i.kind == "run":
            shutil.rmtree(i.path, ignore_errors=True)
        else:
            i.path.unlink(missing_ok=True)
    root = Path(cache_dir)
    shards = [*sorted(root.glob("??/??"), reverse=True), *sorted(root.glob("??"))]
    folders = [*(d for d in shards if all(_HEX2.fullmatch(n) for n in d.relative_to(root).parts)),
               *(d for area in PACK_AREAS for d in [*sorted(root.glob(f"{area}/*")), root / area])]
    for shard in folders:
        try:
            shard.rmdir()  # only when empty
        except OSError:
            pass


def describe(removed: list[Item], items: list[Item], *, dry_run: bool, now: float | None = None) -> str:
    now = time.time() if now is None else now
    verb = "would remove" if dry_run else "removed"
    lines = []
    for i in removed:
        if i.kind == "run":
            days = (now - i.mtime) / 86400
            lines.append(f"{verb} run {i.path.name} ({format_size(i.size)}, {days:.1f} days old)")
    cache = [i for i in removed if i.kind == "cache"]
    packs = [i for i in cache if i.path.name.endswith(PACK_SUFFIX)]
    parsed = [i for i in cache if i.path.parent.parent.name == KEPT_FOLDER]
    entries = [i for i in cache if not i.path.name.endswith(PACK_SUFFIX) and i not in parsed]
    if packs:
        lines.append(f"{verb} {counted(len(packs), 'cache pack')} "
                     f"({format_size(sum(i.size for i in packs))})")
    if entries:
        lines.append(f"{verb} {counted(len(entries), 'cache entry', 'cache entries')} "
                     f"({format_size(sum(i.size for i in entries))})")
    if parsed:
        lines.append(f"{verb} {counted(len(parsed), 'kept parsed data file')} "
                     f"({format_size(sum(i.size for i in parsed))})")
    kept = [i for i in items if all(i is not r for r in removed)]
    lines.append(
        f"{verb} {counted(len(removed), 'item')}, {format_size(sum(i.size for i in removed))}; "
        f"kept {counted(sum(i.kind == 'run' for i in kept), 'run')} and "
        f"{counted(sum(i.kind == 'cache' for i in kept), 'cache file')}, "
        f"{format_size(sum(i.size for i in kept))}"
    )
    return "\n".join(lines) + "\n"
