"""Atomic file writes: readers (other xdist workers, a later run) never see half a file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write to a temporary file in the same folder, fsync, then ``os.replace`` into place.

    ``durable=False`` skips the fsync: for caches, where a power cut may at worst leave an
    unreadable entry (read back as a miss), and an fsync per entry (milliseconds each, on the
    event loop) was the largest single cost of a run (issue 11). Readers still never see half a
    file: the rename is atomic either way."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
