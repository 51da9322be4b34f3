"""What a benchmark sees of the tool sandbox: ``env.sandbox`` (benchmarks/base.py ``BenchmarkEnv``)
is a :class:`SandboxRunner`, whatever runs behind it (the confined pool of pool.py, a test's fake).

A job is trusted code named ``<module>:<function>``: a module of this package
(``pytest_toolbench.sandbox.jobs:run_source`` runs untrusted source text), or one a registered
benchmark declares in its ``sandbox_modules`` (its own tools, imported by the sandbox's zygote
before any call). The function takes the JSON payload and returns a JSON value, run in a fresh,
confined child per call; ``<function>_reply(value, cap)`` beside it, if present, checks and caps
that value in the harness. Nothing from the data names a job: a name outside those modules is
refused (``ValueError``) before anything starts.

Kept apart from pool.py so that a benchmark's annotations import no process machinery.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pytest_toolbench.deferred_model import DeferredModel


class SandboxOutcome(DeferredModel):
    #: crashed: the call's own process died, or the job itself raised (the tool's doing);
    #: unavailable: the sandbox failed on the harness's side (its zygote gone, stopped or hung,
    #: or a new one that would not start): an infrastructure error, never the tool's.
    status: Literal["ok", "timeout", "crashed", "unavailable"]
    value: Any = None  # the JSON-able return value of the job when status == "ok"
    detail: str = ""  # human-readable reason when not ok
    duration_s: float = 0.0  # round trip as the pool's thread saw it (includes waiting for the GIL)
    worker_s: float | None = None  # the same call as the zygote timed it (None: no reply)


@runtime_checkable
class SandboxRunner(Protocol):
    """The calls a benchmark makes on ``env.sandbox``."""

    async def arun(self, job: str, payload: dict[str, Any], timeout_s: float) -> SandboxOutcome:
        """Run ``job(payload)`` in a confined child, at most ``timeout_s`` seconds of wall clock,
        without blocking the event loop; waits for a free slot when all are busy."""
        ...

    def run(self, job: str, payload: dict[str, Any], timeout_s: float) -> SandboxOutcome:
        """The same, blocking the calling thread (tools and tests outside an event loop)."""
        ...
