"""Bootstrap estimates kept between runs, keyed by everything that decides them.

A percentile bootstrap over the same per-case values gives the same interval every time: its
resamples depend only on ``(n, n_boot, seed)`` (``bootstrap.py``). A re-run answered from the
response cache scores the same values, yet computing its intervals imports numpy, about 70 ms,
half of what the end of a cached re-run of 1,000 cases costs. While :func:`kept` is active,
``bootstrap_mean`` and ``bootstrap_ratio`` look their inputs up here first and compute (and keep)
only what was never seen. The key holds the values bit for bit (NaN included), ``n_boot``, the
seed, the confidence, and the code the result came from: ``bootstrap.py`` as installed and
numpy's version file. A different numpy or an edited ``bootstrap.py`` misses, and so does any
changed value.

The file lives in this user's private folder inside the response cache's folder (users may
share that folder; an estimate planted by someone else would be a wrong interval read as right).
A run told ``--no-cache`` keeps nothing. A file that cannot be read, or is torn, reads as empty.
Stdlib only: the point is not importing numpy.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import importlib.util
import json
import os
import stat
import struct
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pytest_toolbench import owned_folders
from pytest_toolbench.fileio import atomic_write_bytes

FOLDER = "estimates"
FILE = "bootstrap.json"
#: Estimates kept (the most recently used); ~130 bytes each, so the file stays under ~0.6 MB.
MAX_ENTRIES = 4096
#: Bumped when the file's layout changes (the stamp then differs: everything kept is dropped).
LAYOUT = 1

#: The memo the bootstrap functions consult in this context (None: compute everything).
_active: contextvars.ContextVar[EstimateMemo | None] = contextvars.ContextVar(
    "toolbench_estimate_memo", default=None)

#: (value, ci_low, ci_high, n), as ``bootstrap.Estimate`` holds them.
Kept = tuple[float | None, float | None, float | None, int]


def _file_stamp(path: str | None) -> list[Any]:
    if path is None:
        return [None]
    try:
        st = os.stat(path)
    except OSError:
        return [path]
    return [path, st.st_size, st.st_mtime_ns]


def code_stamp() -> list[Any]:
    """What an estimate depends on beside its inputs: this file layout, ``bootstrap.py`` as
    installed and numpy's version file (found without importing numpy)."""
    spec = importlib.util.find_spec("numpy")
    numpy_dir = os.path.dirname(spec.origin) if spec is not None and spec.origin else None
    version_file = os.path.join(numpy_dir, "version.py") if numpy_dir else None
    bootstrap = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bootstrap.py")
    return [LAYOUT, *_file_stamp(bootstrap), *_file_stamp(version_file)]


def input_key(kind: str, columns: Sequence[Sequence[float]], n_boot: int, seed: int,
              confidence: float) -> str | None:
    """The key of one estimate's inputs; None when a column is not a plain sequence of numbers
    (an array already built with numpy: nothing to save by keeping it)."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"{kind}\0{n_boot}\0{seed}\0".encode())
    digest.update(struct.pack("<d", confidence))
    for column in columns:
        if not isinstance(column, (list, tuple)):
            return None
        try:
            packed = array("d", column)
        except (TypeError, OverflowError):
            return None
        digest.update(struct.pack("<q", len(packed)))
        digest.update(packed.tobytes())
    return digest.hexdigest()


class EstimateMemo:
    """The kept estimates of one folder; read once, written back once by :func:`kept`."""

    def __init__(self, file: Path | None, stamp: list[Any]):
        self.file = file
        self.stamp = stamp
        self.entries: dict[str, Kept] = self._read() if file is not None else {}
        self.changed = False
        self.hits = 0

    def _read(self) -> dict[str, Kept]:
        assert self.file is not None
        try:
            with open(self.file, "rb") as fh:
                st = os.fstat(fh.fileno())
                # In this user's private folder; a file another user owns or may write is not read.
                if st.st_uid != os.geteuid() or st.st_mode & 0o022 or not stat.S_ISREG(st.st_mode):
                    return {}
                document = json.loads(fh.read())
        except (OSError, ValueError):  # not kept yet, torn, or not JSON: computed again
            return {}
        if not isinstance(document, dict) or document.get("stamp") != self.stamp:
            return {}
        entries = document.get("entries")
        if not isinstance(entries, dict):
            return {}
        return {key: (v[0], v[1], v[2], v[3]) for key, v in entries.items()
                if isinstance(v, list) and len(v) == 4 and isinstance(v[3], int)
                and all(x is None or isinstance(x, (int, float)) for x in v[:3])}

    def estimate(self, key: str | None, compute: Callable[[], Kept]) -> Kept:
        """The kept estimate of ``key``, else ``compute()``'s, kept."""
        if key is None:
            return compute()
        found = self.entries.pop(key, None)
        if found is not None:
            self.hits += 1
            self.entries[key] = found  # most recently used last: the bound drops the oldest
            self.changed = True
            return found
        result = compute()
        self.entries[key] = tuple(result)  # type: ignore[assignment]
        self.changed = True
        return result

    def save(self) -> None:
        """Write the estimates back (the most recent :data:`MAX_ENTRIES`), whole or not at all;
        no fsync: a lost file only means computing again. A full disk is not the run's failure."""
        if self.file is None or not self.changed:
            return
        recent = list(self.entries.items())[-MAX_ENTRIES:]
        document = {"stamp": self.stamp, "entries": {k: list(v) for k, v in recent}}
        with contextlib.suppress(OSError, ValueError):
            atomic_write_bytes(self.file, json.dumps(document, separators=(",", ":")).encode(),
                               durable=False)


def active() -> EstimateMemo | None:
    return _active.get()


@contextlib.contextmanager
def kept(cache_dir: str | os.PathLike[str] | None) -> Iterator[EstimateMemo | None]:
    """Within this block the bootstrap functions read and keep estimates in ``cache_dir`` (the
    response cache's folder); None, or a folder that is not this user's alone: nothing kept."""
    folder = owned_folders.user_folder(cache_dir, FOLDER) if cache_dir is not None else None
    if folder is None:
        yield None
        return
    memo = EstimateMemo(Path(folder) / FILE, code_stamp())
    token = _active.set(memo)
    try:
        yield memo
    finally:
        _active.reset(token)
    memo.save()  # only after a whole scoring: an exception above leaves the file as it was
