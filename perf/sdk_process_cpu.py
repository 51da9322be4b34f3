"""The shared SDK process's CPU per model call beside the openai SDK alone, back to back.

Run: python perf/sdk_process_cpu.py [--calls 2000] [--in-flight 64 256] [--rounds 3] [--latency 0.5]
                                     [--against DIR]

Why: perf/run.py's CPU-per-call rows add up every process of a whole pytest command, so the SDK
process's share is hidden among pytest's own per-test work and the machine's noise. This script
measures the two sides of the pipe alone, each next to its reference taken in the same round:

* ``sdk_ms``: the SDK process (models/sdk_process/server.py) per call, from /proc while this
  process drives ``--calls`` ToolHop direct requests through
  :class:`~pytest_toolbench.models.sdk_process.client.RemoteBackend`, ``--in-flight`` at a time,
  against perf/fake_llm.py (the very backend, spec and request a ``--backend openai`` run uses);
* ``client_ms``: this driving process per call (the pytest side of the pipe: framing, the
  reply's validation, plus this script's own loop);
* ``floor_ms``: perf/sdk_floor.py on the same endpoint, same calls and in-flight count (the SDK's
  ``client.post`` alone); ``sdk_ms / floor_ms`` is what the SDK process adds over the SDK.

Start-up (imports, the client, the first connection) is left out of every figure: a warm-up
batch goes first. Rounds alternate harness and floor; the medians are printed as one JSON line.
``--against DIR`` measures a second source tree of the harness in the same rounds (e.g. the
previous commit, ``git archive HEAD~1 | tar -x -C DIR``), at the same time as this one, so both
see the same machine, however busy; ``ratio`` is this tree's ``sdk_ms`` over DIR's (``--tree``
measures a copy instead of this checkout, so it can be edited meanwhile).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import PY, REPO, SAMPLE, FakeEndpoints, process_cpu_s  # noqa: E402


def requests(calls: int, offset: int) -> list[Any]:
    """Distinct ToolHop direct requests from the sample's questions (as perf/sdk_floor.py's), with
    ToolHop's closed decoding preset (benchmarks/toolhop/decoding.py) and Direct's explicit
    ``tools=None``: the request a direct case sends."""
    from pytest_toolbench.models.base import ChatRequest, Sampling

    sampling = Sampling(temperature=0.0, max_tokens=256)
    records = json.loads(SAMPLE.read_text(encoding="utf-8"))
    return [ChatRequest(messages=[{"role": "user", "content": f"[{i}] {records[i % len(records)]['question']}"}],
                        tools=None, sampling=sampling)
            for i in range(offset, offset + calls)]


async def drive(model: Any, batch: list[Any], in_flight: int) -> None:
    from pytest_toolbench.models.base import CallContext

    semaphore = asyncio.Semaphore(in_flight)

    async def one(i: int, request: Any) -> None:
        async with semaphore:
            await model.complete(request, CallContext(case_id=f"perf-{i}", turn=0, benchmark="toolhop"))

    await asyncio.gather(*(one(i, r) for i, r in enumerate(batch)))


def harness_round(url: str, calls: int, in_flight: int) -> dict[str, Any]:
    """One fresh SDK process; a warm-up batch, then ``calls`` measured calls (in this process:
    the harness is whichever ``pytest_toolbench`` it imports)."""
    from pytest_toolbench.models.openai_backend import OpenAIBackend
    from pytest_toolbench.models.sdk_process.client import RemoteBackend, SdkProcess
    from pytest_toolbench.models.sdk_process.protocol import SdkAddress, SdkLink
    from pytest_toolbench.models.spec import BackendSpec

    process = SdkProcess()
    try:
        spec = BackendSpec(model="perf-model", base_url=url, api_key="perf", concurrency=in_flight,
                           timeout_s=60.0)
        link = SdkLink(address=SdkAddress.model_validate(process.address()))
        model = RemoteBackend(OpenAIBackend(spec), link)

        async def go() -> dict[str, Any]:
            await drive(model, requests(in_flight, 10**6), in_flight)  # warm-up: import, connect
            sdk0, me0, wall0 = process_cpu_s(process.proc.pid), time.process_time(), time.perf_counter()
            await drive(model, requests(calls, 0), in_flight)
            wall = time.perf_counter() - wall0
            sdk, me = process_cpu_s(process.proc.pid) - sdk0, time.process_time() - me0
            await model.aclose()
            return {"sdk_ms": round(sdk / calls * 1e3, 3), "client_ms": round(me / calls * 1e3, 3),
                    "wall_s": round(wall, 3)}

        return asyncio.run(go())
    finally:
        process.stop()


def start_round(tree: Path, url: str, calls: int, in_flight: int) -> subprocess.Popen[str]:
    """:func:`harness_round` in a fresh process that imports the harness from ``tree`` (its SDK
    process inherits the path)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([PY, __file__, "--one-round", url, "--calls", str(calls), "--in-flight", str(in_flight)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tree)


def finish_round(proc: subprocess.Popen[str], tree: Path) -> dict[str, Any]:
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"harness round in {tree} failed: {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def floor_round(url: str, calls: int, in_flight: int) -> dict[str, Any]:
    out = subprocess.run([PY, str(REPO / "perf" / "sdk_floor.py"), "--base-url", url, "--data", str(SAMPLE),
                          "--calls", str(calls), "--in-flight", str(in_flight)],
                         capture_output=True, text=True, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return {"floor_ms": res["cpu_per_call_ms"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--tree", type=Path, default=REPO,
                        help="the source tree measured (default: this checkout)")
    parser.add_argument("--against", type=Path, default=None,
                        help="another source tree of the harness, measured in the same rounds")
    parser.add_argument("--one-round", metavar="URL", help=argparse.SUPPRESS)  # harness_round_in
    ns = parser.parse_args()
    if ns.one_round:
        print(json.dumps(harness_round(ns.one_round, ns.calls, ns.in_flight[0])))
        return 0
    trees = [ns.tree.resolve(), *([ns.against.resolve()] if ns.against is not None else [])]
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))  # finally: endpoint closed
    server = FakeEndpoints(SAMPLE, ns.latency)
    results: dict[str, Any] = {}
    try:
        for in_flight in ns.in_flight:
            rounds = []
            for _ in range(ns.rounds):
                url = server.urls[0]
                # Both trees at once: each sees the same machine, whatever else runs on it.
                procs = [(tree, start_round(tree, url, ns.calls, in_flight)) for tree in trees]
                this, *other = [finish_round(proc, tree) for tree, proc in procs]
                row = {**this, **floor_round(url, ns.calls, in_flight)}
                if other:
                    row.update({f"against_{k}": v for k, v in other[0].items()})
                    row["ratio"] = round(row["sdk_ms"] / other[0]["sdk_ms"], 3)
                rounds.append(row)
                print(json.dumps({"in_flight": in_flight, **row}), file=sys.stderr, flush=True)
            med = {k: round(statistics.median(r[k] for r in rounds), 3) for k in rounds[0]}
            med["sdk_over_floor"] = round(statistics.median(r["sdk_ms"] / r["floor_ms"] for r in rounds), 2)
            results[str(in_flight)] = med
    finally:
        server.close()
    print(json.dumps({"calls": ns.calls, "rounds": ns.rounds, "latency_s": ns.latency,
                      "tree": str(ns.tree),
                      "against": str(ns.against) if ns.against else None, **results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
