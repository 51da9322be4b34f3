"""``make run`` beside four CPU-bound processes: does the demo finish fast, with margin?

Measures, in one run of this script:

1. the pytest part of ``make run`` (the exact command the Makefile runs, with a fresh response
   cache so the model really answers) while four ``while True: pass`` processes compete for the
   CPU: its wall time against the 120 s goal, vLLM's start, and for every case the time its model
   calls took as a fraction of the request timeout (goal: at most 0.25);
2. the same command again with the same cache: it must make 0 model calls and start no vLLM.

The busy processes end by themselves after ``--busy-limit`` seconds (and are killed by pid at the
end), so an interrupted measurement never leaves them behind. Prints the figures and a JSON line;
exits 1 when a goal is missed.

    .venv/bin/python perf/demo_busy.py [--busy 4] [--json perf/results/demo_busy.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GOAL_PYTEST_S = 120.0
GOAL_TIMEOUT_SHARE = 0.25


def makefile_pytest_command() -> list[str]:
    """The pytest command ``make run`` runs (``make -n``: printed, not run)."""
    out = subprocess.run(["make", "-s", "-n", "run"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    line = next(ln for ln in out.splitlines() if "bin/pytest" in ln)
    words = shlex.split(line)
    return words[words.index(next(w for w in words if w.endswith("bin/pytest"))):]


def start_busy(n: int, limit_s: float) -> list[subprocess.Popen[bytes]]:
    code = f"import time\nend = time.monotonic() + {limit_s}\nwhile time.monotonic() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def stop_busy(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def run_demo(cmd: list[str], folder: Path, cache: Path) -> dict[str, Any]:
    report = folder / "report.json"
    # later options win: our own report and response cache, the Makefile's everything else
    full = [*cmd, "--toolbench-json", str(report), "--cache-dir", str(cache), "-p", "no:cacheprovider"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    started = time.monotonic()
    proc = subprocess.run(full, cwd=REPO, capture_output=True, text=True, env=env)
    wall = time.monotonic() - started
    data = json.loads(report.read_text()) if report.exists() else {}
    run = data.get("run", {})
    timeout = float(run.get("settings", {}).get("request_timeout_s") or 0) or None
    cases = [{"case": c["case_id"], "outcome": c["outcome"], "model_s": round(c.get("latency_s", 0), 1),
              "tokens": c.get("usage", {}).get("completion_tokens"),
              "share_of_timeout": round(c.get("latency_s", 0) / timeout, 3) if timeout else None}
             for c in data.get("cases", [])]
    server = run.get("server") or {}
    cache = run.get("cache", {})
    return {
        "exit": proc.returncode, "pytest_wall_s": round(wall, 1), "request_timeout_s": timeout,
        "max_tokens": run.get("settings", {}).get("max_tokens"),
        "vllm_started": server.get("started"), "vllm_start_s": server.get("startup_s"),
        # the report's model_calls counts every call a case made, cached replies included
        "model_calls": (cache["model_calls"] - cache.get("replies_from_cache", 0)
                        if "model_calls" in cache else None),
        "replies_from_cache": cache.get("replies_from_cache"),
        "cases": cases, "tail": (proc.stdout + proc.stderr)[-2500:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=4, help="CPU-bound processes beside the run")
    parser.add_argument("--busy-limit", type=float, default=900.0,
                        help="seconds after which the busy processes end by themselves")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = parser.parse_args()

    cmd = makefile_pytest_command()
    with tempfile.TemporaryDirectory(prefix="demo-busy-") as tmp:
        folder = Path(tmp)
        (folder / "first").mkdir()
        (folder / "again").mkdir()
        load_before = os.getloadavg()[0]
        busy = start_busy(args.busy, args.busy_limit)
        try:
            first = run_demo(cmd, folder / "first", folder / "cache")
            again = run_demo(cmd, folder / "again", folder / "cache")
        finally:
            stop_busy(busy)
    worst = max((c["share_of_timeout"] or 0 for c in first["cases"]), default=None)
    goals = {
        "exit 0 (gates passed)": first["exit"] == 0,
        f"pytest part <= {GOAL_PYTEST_S:.0f} s": first["pytest_wall_s"] <= GOAL_PYTEST_S,
        f"every case's model time <= {GOAL_TIMEOUT_SHARE} x request timeout":
            worst is not None and worst <= GOAL_TIMEOUT_SHARE,
        "re-run: 0 model calls": again["model_calls"] == 0,
        "re-run: vLLM not started": again["vllm_started"] is False,
        "re-run: exit 0": again["exit"] == 0,
    }
    print(f"command: {' '.join(cmd)}")
    print(f"beside {args.busy} busy processes on {os.cpu_count()} CPUs (load before {load_before:.1f})")
    print(f"first run:  pytest {first['pytest_wall_s']} s (goal <= {GOAL_PYTEST_S:.0f}, ratio "
          f"{first['pytest_wall_s'] / GOAL_PYTEST_S:.2f}), vLLM start {first['vllm_start_s']} s, "
          f"exit {first['exit']}, model calls {first['model_calls']}, max_tokens "
          f"{first['max_tokens']}, request timeout {first['request_timeout_s']} s")
    for case in first["cases"]:
        print(f"  {case['case']}: {case['outcome']}, model time {case['model_s']} s "
              f"({case['tokens']} tokens) = {case['share_of_timeout']} of the request timeout "
              f"(goal <= {GOAL_TIMEOUT_SHARE})")
    print(f"re-run:     pytest {again['pytest_wall_s']} s, model calls {again['model_calls']}, "
          f"replies from cache {again['replies_from_cache']}, vLLM started {again['vllm_started']}, "
          f"exit {again['exit']}")
    for goal, ok in goals.items():
        print(f"  {'PASS' if ok else 'MISS'}  {goal}")
    figures = {"busy": args.busy, "cpus": os.cpu_count(), "load_before": round(load_before, 1),
               "first": {k: v for k, v in first.items() if k != "tail"},
               "again": {k: v for k, v in again.items() if k != "tail"},
               "worst_share_of_timeout": worst, "goals": goals}
    if not all(goals.values()):
        print("--- first run's output (tail) ---\n" + first["tail"])
        print("--- re-run's output (tail) ---\n" + again["tail"])
    print(json.dumps(figures))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
