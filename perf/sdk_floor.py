"""The openai SDK's own CPU per chat call, with no harness around it: a reference for perf/run.py.

Run: python perf/sdk_floor.py --base-url URL --data FILE.json [--calls 4000] [--in-flight 256]

One asyncio process sends ``--calls`` ToolHop direct requests, ``--in-flight`` at a time, the way
the harness's SDK process sends them (``AsyncOpenAI`` over ``DefaultAioHttpClient``,
``max_retries=0``, ``client.post("/chat/completions", body=..., cast_to=object)``, see
pytest_toolbench/models/openai_backend.py ``OpenAIBackend._attempt``), and prints one JSON line:
the CPU the process spent importing openai and building the client, and the CPU per call while
the calls ran. Whatever the harness adds per call sits on top of the second figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any


def bodies(path: str, calls: int) -> list[dict[str, Any]]:
    """``calls`` request bodies from the records' questions (distinct, as perf/run.py's data)."""
    records = json.loads(open(path, encoding="utf-8").read())
    return [{"model": "perf-model", "temperature": 0.0,
             "messages": [{"role": "user", "content": f"[{i}] {records[i % len(records)]['question']}"}]}
            for i in range(calls)]


async def drive(base_url: str, payloads: list[dict[str, Any]], in_flight: int) -> dict[str, Any]:
    started = time.process_time()
    import openai  # noqa: PLC0415  (timed: the import is part of what a process pays once)

    client = openai.AsyncOpenAI(api_key="perf", base_url=base_url, max_retries=0, timeout=60,
                                http_client=openai.DefaultAioHttpClient(timeout=60))
    setup_cpu = time.process_time() - started
    semaphore = asyncio.Semaphore(in_flight)
    failures = 0

    async def one(body: dict[str, Any]) -> None:
        nonlocal failures
        async with semaphore:
            try:
                await client.post("/chat/completions", body=body, cast_to=object)
            except openai.OpenAIError:
                failures += 1

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(b) for b in payloads))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    await client.close()
    return {"calls": len(payloads), "in_flight": in_flight, "failures": failures,
            "setup_cpu_s": round(setup_cpu, 3), "calls_cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
            "cpu_per_call_ms": round(cpu / len(payloads) * 1e3, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--data", required=True, help="a ToolHop JSON file (questions)")
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--in-flight", type=int, default=256)
    ns = parser.parse_args()
    res = asyncio.run(drive(ns.base_url, bodies(ns.data, ns.calls), ns.in_flight))
    print(json.dumps(res))
    return 0 if res["failures"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
