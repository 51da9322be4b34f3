"""Each data file is parsed once per process and file version, whichever benchmark reads it.

The controller reads a benchmark's files for the data fingerprint (``data_sources``), again for
the cases, and a session fixture may read them a third time (Meta-Bench's tool library). Parsing
and validating is most of collection time on a large file, so every loader wraps its
file parser in :func:`parsed_once`:

* the key is the resolved path, the file's version (``fileio.file_version``) and the parser's other
  arguments, so an edited or replaced file is parsed again and two spellings of one path share;
* the parser is always called with the path as the caller spelt it, so its error messages name
  the file the user gave; errors are not cached (the next load reports them again);
* warnings the parse raised are recorded and raised again on every load, so each caller's
  ``warnings`` filters see what a fresh parse would have shown;
* each call returns a new list; the items are shared, so parsers return frozen records.

Under xdist every worker loads the same files again (collection must be the same everywhere),
and parsing 2,000 ToolHop records costs each process ~0.35 s. So the controller keeps what it
parsed in a private folder of the run (:func:`share_parsed_files`, a ``mkdtemp`` only its user
can write to) and each worker reads it from there (:func:`read_shared_parsed_files`, which first
checks that the folder is still that private folder: unpickling runs code): a pickle of the items
and the warnings, named by the parser and the key above, so a file edited since is parsed afresh.
A file that cannot be written or read back is simply parsed.

The controller removes that folder at the run's end. A controller killed outright (SIGKILL, a CI
timeout) cannot, so the folder is made as the sandbox makes its own (``owned_folders.py``): its
lock is held while the controller lives, and the next controller removes every such folder whose
lock nobody holds before it makes its own.

Between runs, each parsed file is also kept in the response cache's folder (:func:`keep_parsed_files`,
``<cache-dir>/parsed/u<uid>``, private to its user like the run's folder), so a run over unchanged
data does not parse it again: 1,000 ToolHop records cost ~0.1 s to parse and pack, 4 ms to unpickle.
One file per (parser, data file, arguments), stamped with what must not have changed for the parse
to hold: the data file's version (``fileio.file_version``, the in-process key's), and this package's code (every module's size and mtime), its
version and Python's and pydantic's. A stamp that differs is parsed afresh and the file replaced; the
folder is kept under :data:`KEPT_MAX_BYTES`, least recently used first.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import stat
import tempfile
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from pytest_toolbench import owned_folders
from pytest_toolbench.fileio import atomic_write_bytes, file_version

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
            key = (file_version(path), args, tuple(sorted(kwargs.items())))
        except OSError:
            return parse(path, *args, **kwargs)  # the parser reports a missing file its own way
        with lock:
            entry = entries.get(key)
            if entry is not None:
                entries.move_to_end(key)
        if entry is None:
            name = _shared_name(parse, key)
            entry = _read_shared(name)
            if entry is None:
                kept = _kept_place(parse, key)
                entry = _read_kept(kept)
                if entry is None:
                    with warnings.catch_warnings(record=True) as notes:
                        warnings.simplefilter("always")
                        items = tuple(parse(path, *args, **kwargs))
                    entry = (items, tuple(notes))
                    _write_kept(kept, entry)
                _write_shared(name, entry)
            with lock:
                entries[key] = entry
                while len(entries) > MAX_FILES:
                    entries.popitem(last=False)
        items, recorded = entry
        for note in recorded:
            warnings.warn(note.message, note.category, stacklevel=2)
        return list(items)  # type: ignore[arg-type]

    return load


# ----------------------------------------------------------------------------- shared with xdist workers
#: The run's folder of parsed files, and whether this process writes it (the controller) or
#: reads it (a worker); None: neither (no xdist, or a process outside a run).
_shared: list[tuple[Path, bool] | None] = [None]
#: The controller's hold on its folder's lock (-1: none), released once the folder is gone.
_lock_fd: list[int] = [-1]
FOLDER_PREFIX = "toolbench-parsed-"


def share_parsed_files() -> Path:
    """Controller: keep every file parsed from now on for the workers; returns the folder (the
    caller removes it at the run's end, :func:`stop_sharing`). First removes the folders of
    controllers that were killed (nobody holds their lock)."""
    path, _lock_fd[0] = owned_folders.claim_folder(tempfile.gettempdir(), FOLDER_PREFIX)
    folder = Path(path)
    _shared[0] = (folder, True)
    return folder


def shared_folder() -> Path | None:
    """The folder this process (the controller) keeps parsed files in, else None."""
    shared = _shared[0]
    return shared[0] if shared is not None and shared[1] else None


def read_shared_parsed_files(folder: str | Path) -> None:
    """Worker: look for a file's items in the controller's ``folder`` before parsing it.

    Unpickling runs code, so the folder is used only when it is what ``mkdtemp`` made for this
    user: a real folder (not a link), owned by this process's user, that nobody else may write
    to. Anything else (a path swapped for another user's folder or a link, modes widened) is
    ignored and every file is parsed here: slower, never less safe."""
    path = Path(folder)
    if owned_folders.private_folder(path):
        _shared[0] = (path, False)


def stop_sharing() -> None:
    """Remove the controller's folder (a worker only forgets it)."""
    shared, _shared[0] = _shared[0], None
    if shared is not None and shared[1]:
        fd, _lock_fd[0] = _lock_fd[0], -1
        owned_folders.release_folder(str(shared[0]), fd)


def _shared_name(parse: Callable[..., object], key: Hashable) -> str | None:
    if _shared[0] is None:
        return None
    text = repr((*_parser_id(parse), key))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() + ".pickle"


def _parser_id(parse: Callable[..., object]) -> tuple[str, str]:
    """The parser by name, as another process names it too (its function is another object there):
    module-level parsers, one per name."""
    return parse.__module__, getattr(parse, "__qualname__", type(parse).__qualname__)


def _read_shared(name: str | None) -> _Entry | None:
    shared = _shared[0]
    if name is None or shared is None or shared[1]:
        return None
    try:
        with open(shared[0] / name, "rb") as fh:
            entry = pickle.load(fh)
    except Exception:  # not there (yet), or unreadable: parse it here
        return None
    return entry if isinstance(entry, tuple) and len(entry) == 2 else None


def _write_shared(name: str | None, entry: _Entry) -> None:
    shared = _shared[0]
    if name is None or shared is None or not shared[1]:
        return
    try:
        # Whole or absent: a worker never reads a half-written file. No fsync: the folder lives
        # only as long as the run, and a lost file is parsed again.
        atomic_write_bytes(shared[0] / name, pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL),
                           durable=False)
    except Exception:  # an item that does not pickle, a full disk: the workers parse it
        pass


# ----------------------------------------------------------------------------- kept between runs
#: This user's folder of parsed files kept between runs; None: none (a process outside a run).
_kept: list[Path | None] = [None]
#: The folder's size bound: least recently used files go first once a write passes it.
KEPT_MAX_BYTES = 256 * 2**20
KEPT_FOLDER = "parsed"


def keep_parsed_files(cache_dir: str | Path) -> Path | None:
    """Keep parsed files between runs in ``cache_dir`` (the response cache's folder, which users
    may share): in a folder of this user's own, made private (0700). Unpickling runs code, so a
    folder that is not private to this user (a link, another owner, widened modes) is not used:
    every file is then parsed, as before. Returns the folder, or None."""
    folder = owned_folders.user_folder(cache_dir, KEPT_FOLDER)
    _kept[0] = Path(folder) if folder is not None else None
    return _kept[0]


def stop_keeping() -> None:
    _kept[0] = None


def _kept_place(parse: Callable[..., object],
                key: tuple[tuple[str, int, int, int, int, int], tuple[object, ...], tuple[object, ...]],
                ) -> tuple[Path, tuple[object, ...]] | None:
    """Where the file's parse is kept (named by parser, path and arguments) and the stamp it must
    carry (the file's version of the in-process key, and the code's); None: nothing is kept."""
    folder = _kept[0]
    if folder is None:
        return None
    (real, *version), arguments = key[0], key[1:]
    name = hashlib.sha256(repr((*_parser_id(parse), real, arguments)).encode(
        "utf-8", "surrogatepass")).hexdigest()[:40] + ".pickle"
    return folder / name, (*version, code_identity())


def _read_kept(place: tuple[Path, tuple[object, ...]] | None) -> _Entry | None:
    if place is None:
        return None
    file, stamp = place
    try:
        with open(file, "rb") as fh:
            st = os.fstat(fh.fileno())
            # In this user's private folder; a file another user owns or may write is not read.
            if st.st_uid != os.geteuid() or st.st_mode & 0o022 or not stat.S_ISREG(st.st_mode):
                return None
            if pickle.load(fh) != stamp:  # the stamp first: a stale parse is never unpickled
                return None
            entry = pickle.load(fh)
    except Exception:  # not kept yet, or unreadable (a torn write, another version's classes)
        return None
    if not (isinstance(entry, tuple) and len(entry) == 2):
        return None
    with contextlib.suppress(OSError):
        os.utime(file)  # recently used: the size bound removes the others first
    return entry


def _write_kept(place: tuple[Path, tuple[object, ...]] | None, entry: _Entry) -> None:
    if place is None:
        return
    file, stamp = place
    try:
        # Whole or absent (a reader never sees half a file); no fsync: a lost file is parsed again.
        atomic_write_bytes(file, pickle.dumps(stamp, protocol=pickle.HIGHEST_PROTOCOL)
                           + pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL), durable=False)
        _bound_kept(file.parent)
    except Exception:  # an item that does not pickle, a full disk: parsed again next run
        pass


def _bound_kept(folder: Path) -> None:
    """Remove the least recently used files while the folder holds more than KEPT_MAX_BYTES."""
    files = []
    for entry in os.scandir(folder):
        with contextlib.suppress(OSError):
            st = entry.stat(follow_symlinks=False)
            files.append((st.st_mtime_ns, st.st_size, entry.path))
    total = sum(size for _, size, _ in files)
    for _, size, file in sorted(files):
        if total <= KEPT_MAX_BYTES:
            return
        with contextlib.suppress(OSError):
            os.unlink(file)
            total -= size


@functools.cache
def code_identity() -> str:
    """What the parsers' output depends on beside the data: this package's modules (path, size,
    mtime: an edit or a reinstall changes it), its version, Python's and pydantic's."""
    import platform

    import pydantic

    import pytest_toolbench

    root = Path(pytest_toolbench.__file__).parent
    digest = hashlib.sha256(repr((pytest_toolbench.__version__, platform.python_version(),
                                  pydantic.VERSION)).encode())
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                with contextlib.suppress(OSError):
                    st = os.stat(os.path.join(folder, name))
                    digest.update(f"{os.path.relpath(os.path.join(folder, name), root)}\0"
                                  f"{st.st_size}\0{st.st_mtime_ns}\0".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()
