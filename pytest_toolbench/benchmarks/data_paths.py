"""Why a benchmark's data folder or file cannot be read, in one line naming it.

``Path.is_file()`` and ``glob`` read a symlink loop, a directory where a file goes and (for
glob) a folder this user may not list as "no file": a loader that trusts them tells a user
with ``chmod 000 DIR/toolhop`` that the folder holds no ``*.json`` files. Every loader asks
these helpers instead, so each of those cases is a :class:`DatasetError` saying what it is.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from pytest_toolbench.benchmarks.dataset_errors import DatasetError


def _reason(exc: OSError) -> str:
    """The OS's words, with a symlink loop called one (ELOOP's text does not say "loop")."""
    text = exc.strerror or str(exc)
    return f"a symlink loop: {text}" if exc.errno == errno.ELOOP else text


def check_data_dir(directory: Path, what: str) -> None:
    """``directory`` is a folder (``what``: "ToolHop data directory"); else DatasetError."""
    try:
        mode = directory.stat().st_mode
    except FileNotFoundError:
        raise DatasetError(directory, f"{what} does not exist") from None
    except OSError as exc:  # EACCES on a parent, ELOOP, ENOTDIR
        raise DatasetError(directory, f"cannot read the {what} ({_reason(exc)})") from None
    if not stat.S_ISDIR(mode):
        raise DatasetError(directory, f"the {what} is not a directory")


def listed_entries(directory: Path, what: str) -> list[Path]:
    """Every entry of the folder, sorted by name; one it may not list is a DatasetError (glob
    would read it as empty)."""
    check_data_dir(directory, what)
    try:
        with os.scandir(directory) as entries:
            return sorted(Path(entry.path) for entry in entries)
    except OSError as exc:
        raise DatasetError(directory, f"cannot list the {what} ({_reason(exc)})") from None


def check_data_file(path: Path, what: str) -> None:
    """``path`` is a regular file this process can open (``what``: "ToolHop data file");
    else DatasetError: not found, a dangling symlink, a symlink loop, a directory, permission
    denied."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        gone = "is a dangling symlink" if path.is_symlink() else "not found"
        raise DatasetError(path, f"{what} {gone}") from None
    except OSError as exc:
        raise DatasetError(path, f"cannot read the {what} ({_reason(exc)})") from None
    if stat.S_ISDIR(mode):
        raise DatasetError(path, f"the {what} is a directory")
    if not stat.S_ISREG(mode):  # a FIFO or a device: opening it could block or never end
        raise DatasetError(path, f"the {what} is not a regular file")
    try:
        os.close(os.open(path, os.O_RDONLY))
    except OSError as exc:
        raise DatasetError(path, f"cannot read the {what} ({_reason(exc)})") from None


__all__ = ["check_data_dir", "check_data_file", "listed_entries"]
