"""Run-ahead scheduling: suite wall time against a slow endpoint, --concurrency 1 vs N, -n 0.

Run: python perf/run_ahead.py [--delay 0.5] [--concurrency 32]
A real local OpenAI-compatible HTTP server (tests/fake_openai_server.py) answers every request
after ``--delay`` seconds; the same ToolHop cases run twice in one pytest process each. Prints
both wall times, the speed-up ratio and the peak number of requests in flight, and saves them to
perf/results/run_ahead.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fake_openai_server import FakeOpenAIServer, completion, delayed  # noqa: E402

SHARED = REPO.parent / "shared" / "datasets"


def run_suite(base_url: str, concurrency: int, data: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:cacheprovider",
            "-n", "0", "--no-cache", "--cache-dir", f"{tmp}/cache", "--base-url", base_url,
            "--api-key", "perf", "--model", "perf-model", "--concurrency", str(concurrency), *data,
        ]
        start = time.perf_counter()
        subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    data = (["--data-dir", str(SHARED), "--scenario", "direct"] if (SHARED / "toolhop").is_dir()
            else ["--data", "sample"])
    answer = delayed(args.delay, lambda body, i: (200, {}, completion("<answer>x</answer>")))

    with FakeOpenAIServer(answer) as server:
        serial = run_suite(server.base_url, 1, data)
        n_requests = len(server.requests)
    with FakeOpenAIServer(answer) as server:
        ahead = run_suite(server.base_url, args.concurrency, data)
        peak = server.max_in_flight

    figures = {
        "requests": n_requests,
        "endpoint_delay_s": args.delay,
        "wall_s_concurrency_1": round(serial, 2),
        f"wall_s_concurrency_{args.concurrency}": round(ahead, 2),
        "speedup": round(serial / ahead, 2),
        "peak_in_flight": peak,
        "python": platform.python_version(),
    }
    print(f"{n_requests} requests, endpoint delay {args.delay}s: --concurrency 1 took {serial:.1f}s, "
          f"--concurrency {args.concurrency} took {ahead:.1f}s -> {serial / ahead:.1f}x faster "
          f"(peak {peak} requests in flight)")
    out = REPO / "perf" / "results" / "run_ahead.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
