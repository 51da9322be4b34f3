"""Each data file is parsed once per process and file version, whichever benchmark reads it.

The controller reads a benchmark's files for the data fingerprint (``data_sources``), again for
the cases, and a session fixture may read them a third time (Meta-Bench's tool library). Parsing
and validating is most of collection time on a large file, so every loader wraps its
file parser in :func:`parsed_once`:

* the key is the resolved path, the file's version (mtime, size, inode) and the parser's other
  arguments, so an edited or replaced file is parsed again and two spellings of one path share;
* the parser is always called with the path as the caller spelt it, so its error messages name
  the file the user gave; errors are not cached (the next load reports them again);
* warnings the parse raised are recorded and raised again on every load, so each caller's
  ``warnings`` filters see what a fresh parse would have shown;
* each call returns a new list; the items are shared, so parsers return frozen records.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from pytest_toolbench.fileio import file_version

P = ParamSpec("P")
T = TypeVar("T")

#: Files kept per parser (a run reads a handful; a test session many small ones).
MAX_FILES = 32

_Entry = tuple[tuple[object, ...], tuple[warnings.WarningMessage, ...]]


def parsed_once(
    parse: Callable[Concatenate[Path, P], list[T]],
) -> Callable[Concatenate[str | Path, P], list[T]]:
    """``parse(path, *args)`` memoised per (file version, args); see the module docstring."""
    entries: OrderedDict[Hashable, _Entry] = OrderedDict()
    lock = threading.Lock()

    @functools.wraps(parse)
    def load(path: str | Path, *args: P.args, **kwargs: P.kwargs) -> list[T]:
        path = Path(path)
        try:
            key: Hashable = (file_version(path), args, tuple(sorted(kwargs.items())))
        except OSError:
            return parse(path, *args, **kwargs)  # the parser reports a missing file its own way
        with lock:
            entry = entries.get(key)
            if entry is not None:
                entries.move_to_end(key)
        if entry is None:
            with warnings.catch_warnings(record=True) as notes:
                warnings.simplefilter("always")
                items = tuple(parse(path, *args, **kwargs))
            entry = (items, tuple(notes))
            with lock:
                entries[key] = entry
                while len(entries) > MAX_FILES:
                    entries.popitem(last=False)
        items, recorded = entry
        for note in recorded:
            warnings.warn(note.message, note.category, stacklevel=2)
        return list(items)  # type: ignore[arg-type]

    return load
