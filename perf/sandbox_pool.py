"""Warm sandbox pool vs a fresh confined interpreter per tool call (same job, same isolation).

The pool forks a fresh, confined child of a pre-imported zygote for every call (so no state
crosses calls); the goal is a per-call p50 of at most 5 ms.

Run: PYTHONPATH=. python perf/sandbox_pool.py [--calls 200] [--fresh-calls 30]
Prints both latencies and their ratio; saves them to perf/results/sandbox_pool.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import ToolSandbox
from pytest_toolbench.sandbox.pool import _Worker

JOB = "pytest_toolbench.benchmarks.toolhop.execution:call_tool"
SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "toolhop" / "ToolHop.sample80.json"
FALLBACK_TOOL = (
    "def count_letters(word: str) -> int:\n    return sum(c.isalpha() for c in word)\n\n"
    "# Example usage\nprint(count_letters('Alice'))\n"
)


def payload() -> dict:
    """A real ToolHop tool (first record of the shared sample) when available."""
    if SAMPLE.exists():
        rec = json.loads(SAMPLE.read_text(encoding="utf-8"))[0]
        tool = next(iter(rec["tools"].values()))
        props = tool["parameters"].get("properties", {})
        args = {k: (props.get(k, {}).get("enum") or ["Alice Smith"])[0] for k in tool["parameters"].get("required", [])}
        return {"functions": rec["functions"], "name": tool["name"], "arguments": json.dumps(args), "clean_namespace": False}
    return {"functions": [FALLBACK_TOOL], "name": "count_letters", "arguments": '{"word": "Alice"}', "clean_namespace": False}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--fresh-calls", type=int, default=30)
    parser.add_argument("--gap-ms", type=float, default=20.0, help="pause between spaced calls")
    ns = parser.parse_args()
    limits = SandboxLimits(workers=1)
    job_payload = payload()
    preload = ("pytest_toolbench.benchmarks.toolhop.execution",)

    with ToolSandbox(limits, preload=preload) as sb:
        first = sb.run(JOB, job_payload, 10.0)  # start the worker outside the timing
        assert first.status == "ok", first
        warm = []
        for _ in range(ns.calls):
            t0 = time.perf_counter()
            out = sb.run(JOB, job_payload, 10.0)
            warm.append(time.perf_counter() - t0)
            assert out.status == "ok" and out.value == first.value, out
        # As in a run: a model call between tool calls lets the zygote fork the next child ahead.
        spaced = []
        for _ in range(ns.calls):
            time.sleep(ns.gap_ms / 1000)
            t0 = time.perf_counter()
            out = sb.run(JOB, job_payload, 10.0)
            spaced.append(time.perf_counter() - t0)
            assert out.status == "ok" and out.value == first.value, out

    fresh = []
    for _ in range(ns.fresh_calls):
        t0 = time.perf_counter()
        worker = _Worker(limits, True, preload)  # new interpreter: start, confine, one call, kill
        out, _ = worker.call(JOB, job_payload, 10.0)
        worker.kill()
        fresh.append(time.perf_counter() - t0)
        assert out.status == "ok" and out.value == first.value, out

    warm_ms, fresh_ms = statistics.mean(warm) * 1e3, statistics.mean(fresh) * 1e3
    ratio = fresh_ms / warm_ms
    result = {
        "tool": job_payload["name"],
        "warm_calls": ns.calls,
        "fresh_calls": ns.fresh_calls,
        "warm_mean_ms": round(warm_ms, 3),
        "warm_p50_ms": round(statistics.median(warm) * 1e3, 3),
        "spaced_p50_ms": round(statistics.median(spaced) * 1e3, 3),
        "spaced_gap_ms": ns.gap_ms,
        "warm_p95_ms": round(sorted(warm)[int(0.95 * len(warm)) - 1] * 1e3, 3),
        "fresh_mean_ms": round(fresh_ms, 3),
        "ratio": round(ratio, 1),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": __import__("os").cpu_count(),
    }
    out_path = Path(__file__).parent / "results" / "sandbox_pool.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"warm pool: p50 {statistics.median(warm) * 1e3:.2f} ms/call, mean {warm_ms:.2f} (n={ns.calls}); fresh interpreter per call: {fresh_ms:.1f} ms/call (n={ns.fresh_calls})")
    print(f"warm pool, {ns.gap_ms:g} ms between calls (child forked ahead): p50 {statistics.median(spaced) * 1e3:.2f} ms/call")
    print(f"warm pool is {ratio:.1f}x faster than a fresh interpreter per call")


if __name__ == "__main__":
    main()
