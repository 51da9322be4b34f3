"""Progress of the slow steps before the first answer (model conversion, vLLM start).

Minutes of silence look like a hang, so each step says what it does and for how long it has been
doing it: on a terminal one line redrawn in place every second (``... 0:42``), ending in a line
with the step's duration; elsewhere (CI logs, files) plain log lines at the start, every
``LOG_EVERY_S`` seconds and at the end, so a log shows the time without carriage-return noise.

It writes to a duplicate of the terminal's file descriptor taken when it is created (before the
tests run), so pytest's output capturing never swallows it, even when the step starts inside a
test (the server starts on the first cache miss). Step durations are kept for the run summary.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, IO, Iterator

#: Log-line interval when the output is not a terminal (and while the live progress line runs).
LOG_EVERY_S = 15.0
PREFIX = "pytest-toolbench: "


def clock(seconds: float) -> str:
    """``0:42`` / ``12:05``: minutes and seconds, as the live progress line writes time."""
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def _fit(text: str, columns: int) -> str:
    """``text`` in ``columns - 1`` characters: its middle elided, so the label's start and the
    elapsed time at its end stay visible."""
    room = max(20, columns - 1)
    if len(text) <= room:
        return text
    head = room // 2 - 2
    return text[:head] + "..." + text[len(text) - (room - head - 3):]


class StartupProgress:
    """Reports steps; thread-safe (a step may run on the server-owner thread)."""

    def __init__(self, stream: IO[str] | None = None, *, tty: bool | None = None) -> None:
        stream = stream if stream is not None else sys.stdout
        self._stream = stream
        self._fd: int | None = None
        try:
            self._fd = os.dup(stream.fileno())
        except (AttributeError, OSError, ValueError):  # no real fd (a StringIO in tests)
            pass
        self.tty = bool(tty) if tty is not None else self._isatty(stream)
        #: Set while pytest's live progress line owns the terminal line: log lines only.
        self.line_busy = False
        self.durations: dict[str, float] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _isatty(stream: IO[str]) -> bool:
        try:
            return stream.isatty()
        except (AttributeError, ValueError):
            return False

    def _write(self, text: str) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.write(self._fd, text.encode("utf-8", "replace"))
                except OSError:  # a closed terminal must not fail the run
                    pass
            else:
                self._stream.write(text)
                self._stream.flush()

    def line(self, text: str) -> None:
        """One finished line (erasing a redrawn one first on a terminal)."""
        self._write(("\r\x1b[K" if self.tty else "") + PREFIX + text + "\n")

    @contextmanager
    def phase(self, label: str, key: str | None = None,
              cancelled: Callable[[], bool] | None = None) -> Iterator[None]:
        """Report ``label`` with its elapsed time while the block runs; its duration is kept
        under ``key`` (default: the label) for the summary. A block that fails because the run
        is ending (``cancelled()`` true) says "stopped", not "FAILED": the run's own last line
        names what stopped it, and a start cut short is not a start that failed."""
        started = time.monotonic()
        done = threading.Event()
        in_place = self.tty and not self.line_busy
        if not in_place:
            self.line(f"{label} ...")

        def tick() -> None:
            last_log = started
            while not done.wait(1.0):
                now = time.monotonic()
                if in_place:  # cut to the width: a wrapped line cannot be redrawn with \r
                    text = f"{PREFIX}{label} ... {clock(now - started)}"
                    self._write("\r\x1b[K" + _fit(text, self._columns()))
                elif now - last_log >= LOG_EVERY_S:
                    last_log = now
                    self.line(f"{label}: still running, {clock(now - started)} elapsed")

        ticker = threading.Thread(target=tick, name="toolbench-startup-progress", daemon=True)
        ticker.start()
        ok = False
        try:
            yield
            ok = True
        finally:
            done.set()
            ticker.join(timeout=2)
            elapsed = time.monotonic() - started
            self.durations[key or label] = self.durations.get(key or label, 0.0) + elapsed
            verdict = "done" if ok else "stopped (the run is ending)" if cancelled and cancelled() else "FAILED"
            self.line(f"{label}: {verdict} in {elapsed:.1f} s")

    def _columns(self) -> int:
        try:  # 0: a terminal whose size was never set
            fd = self._fd if self._fd is not None else self._stream.fileno()
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, OSError, ValueError):
            return 80

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass
