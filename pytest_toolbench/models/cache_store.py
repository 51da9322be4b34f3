"""The response cache's files: key -> ChatResponse, shared by many processes without locks.

Entries are appended to *packs*: one file per writing store (a process, an xdist worker) under
``packs/<namespace>/`` (a namespace per model and serving identity), one line per entry: the key,
a space, the entry's JSON (which names its key and format again, so it checks itself). Why not one
file per entry, as up to now: creating a file costs 0.1-0.6 ms of kernel time per reply on ext4
(more where folders were recently deleted, perf/README "tenth pass"), up to a quarter of a first
run's wall time against a fast endpoint; an append is one ``write``.

What keeps it safe:

- only its writer appends to a pack (its name carries host, pid and a random token; a forked child
  opens its own), so no lock is needed, on NFS either;
- a line is complete only with its newline: a torn last line (a crash, a full disk mid-write) is
  never indexed, and a writer that fails a write starts a new pack rather than append after it;
- readers index the namespace's packs at the first lookup, and on a miss read what the packs grew
  by since (at most every ``REFRESH_S``), so what another worker stored meanwhile is found;
- the index holds where each entry is (pack, offset, length), not the entry: a process's memory
  grows by ~0.3 KB per entry of its model's namespace, whatever the replies' size;
- an entry that cannot be read is a miss, flagged ``unreadable``, and its reply is stored again; a
  key stored more than once (that, or two workers asking the same at once) reads as any of its
  readable entries (file times are too coarse to tell which came last).

Entries of the older layout (``<key[:2]>/<key[2:4]>/<key>.json``) are still read, never written.
``toolbench prune`` removes whole packs by age (runs/prune.py).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from pytest_toolbench.models.base import ChatResponse

#: Bump when the stored format or the key recipe changes, so old entries stop matching.
CACHE_FORMAT = 1
PACKS = "packs"
#: The result cache's packs (runtime/result_cache.py): a whole case's result per entry.
RESULT_PACKS = "results"
#: Every folder of packs a cache folder has (``toolbench prune`` removes their packs by age).
PACK_AREAS = (PACKS, RESULT_PACKS)
PACK_SUFFIX = ".pack"
#: A miss re-reads the packs' growth at most this often: a first run misses on every call.
REFRESH_S = 0.5
_KEY_LENGTH = 64  # sha256 hex
#: Packs kept open for reading at once (a cache of many runs has many packs: no fd exhaustion).
_OPEN_READERS = 32
#: Where an entry's JSON is: its pack's path, offset, length.
Where = tuple[str, int, int]
T = TypeVar("T")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str, limit: int = 40) -> str:
    """``text`` as a file-name part: other characters become ``_``."""
    return _UNSAFE.sub("_", text)[:limit].strip("._") or "x"


def _this_host() -> str:
    return safe_name(socket.gethostname())


def pack_owner(name: str) -> tuple[str, int] | None:
    """(host, pid) of the process that writes the pack named ``name``, None if not a pack name."""
    parts = name[: -len(PACK_SUFFIX)].rsplit("-", 2) if name.endswith(PACK_SUFFIX) else []
    return (parts[0], int(parts[1])) if len(parts) == 3 and parts[1].isdigit() else None


def pack_writer_alive(name: str, modified: float | None = None) -> bool:
    """Whether the pack named ``name`` is still being written: its writer, named in the file
    name, is a live process of this host (another host's cannot be asked; its age decides).
    ``modified``: the pack's last write; a live process that started after it is another one
    that was given the writer's pid (after a reboot, say), which kept the pack from any prune."""
    from pytest_toolbench.models.liveness import process_alive, started_after  # psutil: prune only

    owner = pack_owner(name)
    if owner is None or owner[0] != _this_host() or not process_alive(owner[1]):
        return False
    return modified is None or not started_after(owner[1], modified)


class PackStore(Generic[T]):
    """key -> entry on disk in append-only packs, safe for many processes (module docstring).
    A kind of entry says how its bytes read back (:meth:`decode`); ``area``: the cache folder's
    folder of its packs (``packs`` for replies, ``results`` for whole cases' results)."""

    def __init__(self, cache_dir: Path, namespace: str = "default", area: str = PACKS):
        self.cache_dir = Path(cache_dir)
        self._root = str(self.cache_dir)
        self.folder = os.path.join(self._root, area, namespace)
        self._index: dict[str, Where] = {}
        self._other: dict[str, list[Where]] = {}  # a key's further entries, rarely any
        self._readers: dict[str, int] = {}  # pack path -> a descriptor open for reading
        self._indexed: dict[str, int] = {}  # pack name -> bytes of it indexed (whole lines)
        self._refreshed = -math.inf  # monotonic time of the last look at the packs
        self._legacy: bool | None = None  # whether the older layout's folders exist here
        self._lock = threading.Lock()
        self._fd = -1
        self._pid = 0
        self._pack: str | None = None

    # -- reading ------------------------------------------------------------------------------

    def load(self, key: str) -> tuple[T | None, bool]:
        """(response, unreadable): a missing entry is a plain miss, a broken one is flagged."""
        where = self._index.get(key)
        if where is None and time.monotonic() - self._refreshed >= REFRESH_S:
            self._refresh()
            where = self._index.get(key)
        if where is None:
            return self._load_legacy(key)
        response, unreadable = self.decode(key, self._read(where))
        for other in self._other.get(key, ()) if unreadable else ():
            response, unreadable = self.decode(key, self._read(other))
            if not unreadable:
                break
        return response, unreadable

    def holds(self, key: str) -> bool:
        """Whether the packs index an entry of ``key`` (not read: it may still be unreadable)."""
        if key not in self._index and time.monotonic() - self._refreshed >= REFRESH_S:
            self._refresh()
        return key in self._index

    def _read(self, where: Where) -> bytes:
        """An entry's bytes (b"" if its pack is gone or shorter: then it reads as unreadable)."""
        path, offset, length = where
        fd = self._readers.get(path)
        try:
            if fd is None:
                if len(self._readers) >= _OPEN_READERS:
                    os.close(self._readers.pop(next(iter(self._readers))))
                fd = self._readers[path] = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            return os.pread(fd, length, offset)
        except OSError:
            return b""

    def _refresh(self) -> None:
        """Index what the packs hold beyond what was indexed: new packs, and lines appended."""
        self._refreshed = time.monotonic()
        try:
            packs = [e for e in os.scandir(self.folder)
                     if e.name.endswith(PACK_SUFFIX) and e.path != self._pack]
            sizes = [(e.name, e.path, e.stat().st_size) for e in packs]
        except OSError:  # no packs yet, or a folder that cannot be read: every lookup misses
            return
        for name, path, size in sizes:
            done = self._indexed.get(name, 0)
            if size > done:
                self._index_pack(name, path, done)

    def _index_pack(self, name: str, path: str, start: int) -> None:
        try:
            with open(path, "rb") as handle:
                handle.seek(start)
                data = handle.read()
        except OSError:  # removed by a prune meanwhile
            return
        end = data.rfind(b"\n") + 1  # a line still being written is indexed next time
        self._indexed[name] = start + end
        pos = 0
        while pos < end:
            newline = data.index(b"\n", pos)
            if newline - pos > _KEY_LENGTH + 1 and data[pos + _KEY_LENGTH] == 0x20:  # "<key> <entry>"
                key = data[pos:pos + _KEY_LENGTH].decode("ascii", "replace")
                self._add(key, (path, start + pos + _KEY_LENGTH + 1, newline - pos - _KEY_LENGTH - 1))
            pos = newline + 1

    def _add(self, key: str, where: Where) -> None:
        known = self._index.get(key)
        if known is not None:
            self._other.setdefault(key, []).append(known)
        self._index[key] = where

    def _load_legacy(self, key: str) -> tuple[T | None, bool]:
        """An entry of an older layout: none but the response cache's had one."""
        return None, False

    def decode(self, key: str, raw: bytes) -> tuple[T | None, bool]:
        """An entry's bytes -> (entry, unreadable)."""
        raise NotImplementedError

    # -- writing ------------------------------------------------------------------------------

    def save_entry(self, key: str, entry: bytes) -> None:
        """Append ``entry`` (one line's worth: no newline in it) to this store's pack (opened at
        the first save). Not fsynced: a lost entry is only a miss. OSError (a full disk...)
        propagates to the caller."""
        line = b"".join((key.encode("ascii"), b" ", entry, b"\n"))
        with self._lock:
            if self._fd < 0 or self._pid != os.getpid():  # a forked child writes a pack of its own
                self._open_pack()
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(self._fd, view):]
                end = os.lseek(self._fd, 0, os.SEEK_CUR)  # only this store appends to its pack
            except OSError:
                # What was written of the line is torn: the next entry starts a new pack. A pack
                # that holds nothing goes: on a full disk every entry opened one, and a run left
                # a zero-byte pack per reply it could not keep.
                self._drop_pack_if_empty()
                self._close_writer()
                raise
            self._add(key, (self._pack, end - len(entry) - 1, len(entry)))

    def _open_pack(self) -> None:
        os.makedirs(self.folder, exist_ok=True)
        name = f"{_this_host()}-{os.getpid()}-{secrets.token_hex(4)}{PACK_SUFFIX}"
        path = os.path.join(self.folder, name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        self._fd, self._pid, self._pack = os.open(path, flags, 0o644), os.getpid(), path

    @property
    def pack_path(self) -> Path:
        """The pack this store appends to (its folder until the first save)."""
        return Path(self._pack or self.folder)

    def close(self) -> None:
        self._close_writer()
        for fd in self._readers.values():
            os.close(fd)
        self._readers.clear()

    def _drop_pack_if_empty(self) -> None:
        with contextlib.suppress(OSError):
            if self._pack is not None and os.fstat(self._fd).st_size == 0:
                os.unlink(self._pack)

    def _close_writer(self) -> None:
        if self._fd >= 0 and self._pid == os.getpid():
            os.close(self._fd)
        self._fd, self._pack = -1, None


class ResponseStore(PackStore[ChatResponse]):
    """key -> ChatResponse on disk, safe for many processes (module docstring)."""

    def _load_legacy(self, key: str) -> tuple[ChatResponse | None, bool]:
        """An entry of the older one-file-per-entry layout, if this cache has any."""
        if self._legacy is None:
            try:
                self._legacy = any(len(e.name) == 2 and e.is_dir() for e in os.scandir(self._root))
            except OSError:
                self._legacy = False
        if not self._legacy:
            return None, False
        try:
            with open(self.legacy_path(key), "rb") as handle:
                raw = handle.read()
        except FileNotFoundError:
            return None, False
        except OSError:
            return None, True
        return self.decode(key, raw)

    def legacy_path(self, key: str) -> str:
        return f"{self._root}/{key[:2]}/{key[2:4]}/{key}.json"

    def decode(self, key: str, raw: bytes) -> tuple[ChatResponse | None, bool]:
        """An entry's bytes -> (response, unreadable): one of another format or key is unreadable."""
        try:
            entry = json.loads(raw)
            if entry.get("format") != CACHE_FORMAT or entry.get("key") != key:
                return None, True
            return ChatResponse.model_validate(entry["response"]), False
        except (ValueError, KeyError, TypeError, AttributeError, ValidationError):
            return None, True

    def save(self, key: str, response: ChatResponse, meta: dict[str, Any] | None = None) -> None:
        """Append the entry to this store's pack (:meth:`PackStore.save_entry`)."""
        self.save_entry(key, self.encode(key, response, meta))

    @staticmethod
    def encode(key: str, response: ChatResponse, meta: dict[str, Any] | None = None) -> bytes:
        """An entry's bytes: the response with its key, format and ``meta``, so it checks itself.
        One line: JSON escapes every newline inside its strings."""
        entry = {
            "format": CACHE_FORMAT,
            "key": key,
            "meta": meta or {},
            "response": response.model_dump(mode="json"),
        }
        return json.dumps(entry, ensure_ascii=False, sort_keys=True).encode("utf-8")
