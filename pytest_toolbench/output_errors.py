"""Outputs that could not be written during a run: the results journal, a response-cache entry, a
report.

A full disk (ENOSPC, EFBIG past a file-size limit, EDQUOT), EIO or a file system remounted
read-only must never end in a green run: the results it should have kept are lost. Whoever fails a
write turns the ``OSError`` into an :class:`OutputFailure` (which file, what error); the controller
stops the run with its one-line message and exit status ``OUTPUT_ERROR``, and marks every report it
can still write partial.

A response-cache write fails inside the model layer of an xdist worker, far from pytest: it is
:func:`record`-ed here, and the worker's next test report (or, at its end, its ``workeroutput``)
carries it to the controller (session/transport.py), so the run stops however the failure arose.
"""

from __future__ import annotations

import errno
import json
import threading
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class OutputFailure:
    #: What the file is, for the message: "results journal", "response cache entry", "JSON report".
    what: str
    path: str
    #: ``[Errno 28] No space left on device (ENOSPC)``.
    error: str

    @classmethod
    def of(cls, what: str, path: object, exc: BaseException) -> OutputFailure:
        return cls(what=what, path=str(path), error=describe_os_error(exc))

    def message(self) -> str:
        return f"pytest-toolbench: cannot write the {self.what} {self.path}: {self.error}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> OutputFailure:
        data = json.loads(text)
        return cls(what=str(data["what"]), path=str(data["path"]), error=str(data["error"]))


def describe_os_error(exc: BaseException) -> str:
    """``[Errno 28] No space left on device (ENOSPC)``: the message with the errno's name, which
    is what a user searches for."""
    code = getattr(exc, "errno", None)
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    if isinstance(code, int):
        name = errno.errorcode.get(code)
        return f"[Errno {code}] {text}" + (f" ({name})" if name else "")
    return text


_lock = threading.Lock()
_pending: list[OutputFailure] = []


def record(failure: OutputFailure) -> None:
    """Keep a failure for the controller (see the module docstring); thread-safe."""
    with _lock:
        if failure not in _pending:
            _pending.append(failure)


def take() -> list[OutputFailure]:
    """The failures recorded since the last call, oldest first; each is handed out once."""
    with _lock:
        out = list(_pending)
        _pending.clear()
    return out


__all__ = ["OutputFailure", "describe_os_error", "record", "take"]
