"""A process-wide count of model requests in flight and of the tokens the endpoint reported.

Why: the live progress line (report/progress.py) shows how busy the endpoint is and what the run
has cost so far, while cases are still running. Per-case usage only arrives with a finished case;
this meter is updated by the HTTP backend around every attempt it sends, so it is live. Replies
answered from the response cache never reach the backend and are not counted.

It is also where a process first waits on a model: work worth doing only while the process
would otherwise wait is started by :meth:`RequestMeter.when_waiting` (session/controller.py).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, NamedTuple


class MeterReading(NamedTuple):
    in_flight: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def since(self, start: "MeterReading") -> "MeterReading":
        """Counts since ``start`` (requests in flight are a level, not a count: kept as is)."""
        return MeterReading(
            self.in_flight,
            self.requests - start.requests,
            self.prompt_tokens - start.prompt_tokens,
            self.completion_tokens - start.completion_tokens,
        )


class _InFlight:
    """What :meth:`RequestMeter.request` returns: one request in flight while the block runs. A
    class rather than a ``@contextmanager`` generator: it is entered around every request, and
    holds no state of its own, so one per meter serves every block, nested or concurrent."""

    __slots__ = ("_meter",)

    def __init__(self, meter: "RequestMeter") -> None:
        self._meter = meter

    def __enter__(self) -> None:
        meter = self._meter
        with meter._lock:
            meter._in_flight += 1
            meter._requests += 1
        if meter._on_first_request:
            meter._start_waiting_work()

    def __exit__(self, *_exc: object) -> None:
        meter = self._meter
        with meter._lock:
            meter._in_flight -= 1


class RequestMeter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._requests = 0
        self._prompt = 0
        self._completion = 0
        self._block = _InFlight(self)
        #: Called once, by the first request (:meth:`when_waiting`).
        self._on_first_request: list[Callable[[], None]] = []

    def when_waiting(self, start: Callable[[], None]) -> None:
        """Call ``start`` when this process sends its first request (at once if it has sent one).

        For work that costs nothing only while the process waits on the model, such as imports
        on a second thread: a run answered by the response cache never waits, and a second
        thread's Python work then takes the GIL each time a case's code lets it go (a zlib
        decompress, a terminal write), the case waiting for the switch interval to get it back."""
        with self._lock:
            if not self._requests:
                self._on_first_request.append(start)
                return
        start()

    def forget(self, start: Callable[[], None]) -> None:
        """Drop ``start`` if it still waits for a first request (a run that ended without
        sending one, e.g. answered from the cache): the meter lives as long as the process, and
        a later session in it (pytester, an in-process runner) would otherwise fire it."""
        with self._lock:
            self._on_first_request = [s for s in self._on_first_request if s is not start]

    def _start_waiting_work(self) -> None:
        with self._lock:
            starts, self._on_first_request = self._on_first_request, []
        for start in starts:
            start()

    def request(self) -> _InFlight:
        """Count one HTTP attempt as in flight while the block runs (``with meter.request():``)."""
        return self._block

    def add_usage(self, usage: Any) -> None:
        """Add an OpenAI ``usage`` object (or None, or a reply without one: nothing is added)."""
        prompt = getattr(usage, "prompt_tokens", 0)
        completion = getattr(usage, "completion_tokens", 0)
        prompt = prompt if isinstance(prompt, int) else 0
        completion = completion if isinstance(completion, int) else 0
        with self._lock:
            self._prompt += prompt
            self._completion += completion

    def reading(self) -> MeterReading:
        with self._lock:
            return MeterReading(self._in_flight, self._requests, self._prompt, self._completion)


#: The meter of this process (one per xdist worker).
REQUEST_METER = RequestMeter()
