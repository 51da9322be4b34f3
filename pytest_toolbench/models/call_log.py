"""What happened on the wire while one case ran: retried attempts and turns lost to API errors.

A backend is shared by every case of a process, so it cannot keep per-case records itself. The
runtime opens a :class:`CaseCallLog` in the case's own asyncio task (a context variable, so
concurrent cases never mix), the backend appends to whichever log is current, and the runtime
copies it into the case's ``details`` when the case ends.
"""

from __future__ import annotations

from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


#: Finish reasons of a reply the endpoint cut short (scored as any reply: only reported).
CUT_SHORT = frozenset({"length", "content_filter"})


@dataclass
class CaseCallLog:
    #: One entry per failed attempt that was retried: {"turn", "kind", "wait_s"}.
    retries: list[dict[str, Any]] = field(default_factory=list)
    #: --upstream-lost-turns: one entry per model call that failed and consumed its turn.
    lost_turns: list[dict[str, Any]] = field(default_factory=list)
    #: Each sandboxed tool call's round trip from the pool's thread, ms (perf/run.py reads it).
    sandbox_ms: list[float] = field(default_factory=list)
    #: The same calls' wall time as the case saw it (waiting for a free sandbox worker included).
    sandbox_wait_ms: list[float] = field(default_factory=list)
    #: The same calls as their sandbox worker timed them: the sandbox's own cost per call.
    sandbox_worker_ms: list[float] = field(default_factory=list)
    #: Several endpoints (--base-url repeated): URL -> {"requests", "errors"} for this case.
    endpoints: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Each reply's ``finish_reason`` as the endpoint gave it ("stop", "tool_calls", "length",
    #: "content_filter"; None when it gave none), in call order: recorded by the runtime for
    #: every runner (runtime/case_runtime.py), cached and replayed replies included.
    finish_reasons: list[dict[str, Any]] = field(default_factory=list)

    def reply(self, turn: int, finish_reason: str | None) -> None:
        self.finish_reasons.append({"turn": turn, "finish_reason": finish_reason})

    def endpoint_attempt(self, url: str, error: str | None) -> None:
        self._count(url, 1, int(error is not None))

    def _count(self, url: str, requests: int, errors: int) -> None:
        counts = self.endpoints.setdefault(url, {"requests": 0, "errors": 0})
        counts["requests"] += requests
        counts["errors"] += errors

    def wire_events(self) -> dict[str, Any]:
        """What the model calls added to this log, as JSON: the shared SDK process logs each call
        on its side and sends this back with the reply (models/sdk_process)."""
        fields = {"retries": self.retries, "lost_turns": self.lost_turns, "endpoints": self.endpoints}
        return {name: value for name, value in fields.items() if value}

    def add_wire_events(self, events: dict[str, Any] | None) -> None:
        """Add one call's :meth:`wire_events` (from the SDK process) to this case's log."""
        if not events:
            return
        self.retries.extend(events.get("retries", []))
        self.lost_turns.extend(events.get("lost_turns", []))
        for url, counts in (events.get("endpoints") or {}).items():
            self._count(url, int(counts.get("requests", 0)), int(counts.get("errors", 0)))

    def details(self) -> dict[str, Any]:
        """The ``details`` keys for the case result (empty when nothing happened)."""
        out: dict[str, Any] = {}
        if self.retries:
            out["endpoint_retries"] = {
                "count": len(self.retries),
                "statuses": dict(Counter(r["kind"] for r in self.retries)),
                "wait_s": round(sum(r["wait_s"] for r in self.retries), 3),
                "attempts": self.retries,
            }
        if self.lost_turns:
            out["lost_turns"] = self.lost_turns
        if self.endpoints:
            out["endpoints"] = self.endpoints
        reasons = [r["finish_reason"] for r in self.finish_reasons if r["finish_reason"]]
        if reasons:
            out["finish_reasons"] = dict(Counter(reasons))
            # Replies the endpoint cut short (max tokens reached, its content filter): which turns.
            cut = [r for r in self.finish_reasons if r["finish_reason"] in CUT_SHORT]
            if cut:
                out["cut_replies"] = cut
        if self.sandbox_ms:
            out["sandbox_calls_ms"] = [round(v, 3) for v in self.sandbox_ms]
            out["sandbox_wall_ms"] = [round(v, 3) for v in self.sandbox_wait_ms]
        if self.sandbox_worker_ms:
            out["sandbox_worker_ms"] = [round(v, 3) for v in self.sandbox_worker_ms]
        return out


CURRENT_CALL_LOG: ContextVar[CaseCallLog | None] = ContextVar("toolbench_call_log", default=None)


def current_call_log() -> CaseCallLog | None:
    return CURRENT_CALL_LOG.get()
