"""Where a cached re-run's wall goes, phase by phase, beside pytest's no-op floor.

Run: python perf/rerun_phases.py [--cases 1000] [--rounds 3] [--profile-end PATH]
Fills a response cache once (perf/run.py's data and fake endpoint, 64 in flight), then runs the
fully cached re-run and the floor of as many no-op tests in turn, each with phase_probe.py, and
prints each phase's range over the rounds: process start to configure, collection, the first
test, the rest of the tests, and the end (the runtest loop's end to exit). ``--profile-end``:
cProfile of the re-run's end, last round.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from run import SAMPLE, FakeEndpoints, floor_command, make_toolhop_data, pytest_cmd, timed_usage

HERE = Path(__file__).resolve().parent

#: (label, from mark, to mark); ``start`` is the process's start (0).
PHASES = [("process start to configure", "start", "configure"), ("collection", "configure", "collected"),
          ("the first test", "test1_start", "test2_start"), ("tests 2 to N", "test2_start", "last_test_end"),
          ("the end: loop's end to exit", "runtestloop_end", "exit"), ("process start to exit", "start", "exit")]


def phases(marks: dict[str, float]) -> dict[str, float]:
    marks = {"start": 0.0, **marks}
    return {label: marks[b] - marks[a] for label, a, b in PHASES if a in marks and b in marks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile-end", type=Path)
    ns = parser.parse_args()
    # This tree's package first: an editable install of another tree (a git worktree beside
    # the checkout the venv was made from) would otherwise be the one measured.
    env = {"PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)])}
    seen: dict[str, list[dict[str, float]]] = {"re-run": [], "floor": []}
    with tempfile.TemporaryDirectory(prefix="toolbench-phases-") as tmpname:
        tmp = Path(tmpname)
        data = make_toolhop_data(tmp / "data", ns.cases)
        server = FakeEndpoints(SAMPLE, 0.05)
        try:
            cache = tmp / "cache"
            wall, rc, tail, _, _ = timed_usage(pytest_cmd(data, server.urls, 64, cache, extra=["-n", "0"]), env)
            print(f"filling the cache: {wall:.2f}s, rc {rc}", flush=True)
            for i in range(ns.rounds):
                commands = {"re-run": pytest_cmd(data, server.urls, 64, cache, extra=["-n", "0", "-p", "phase_probe"]),
                            "floor": [*floor_command(tmp, ns.cases, "noop", True), "-p", "phase_probe"]}
                for name, cmd in commands.items():
                    out = tmp / f"{name}-{i}.json"
                    extra = {"PHASE_OUT": str(out)}
                    if ns.profile_end and name == "re-run" and i == ns.rounds - 1:
                        extra["PHASE_PROFILE_END"] = str(ns.profile_end.resolve())
                    wall, rc, tail, _, cpu = timed_usage(cmd, {**env, **extra})
                    if rc != 0 or not out.exists():
                        print(f"{name}: rc {rc}\n{tail[-800:]}")
                        return 1
                    seen[name].append(phases(json.loads(out.read_text())))
                    print(f"{name}: wall {wall:.2f}s, CPU {cpu:.2f}s", flush=True)
        finally:
            server.close()
    print(f"\n{'phase':<32}{'cached re-run':>18}{'no-op floor':>18}")
    for label, _, _ in PHASES:
        cells = []
        for name in seen:
            values = [p[label] for p in seen[name] if label in p]
            cells.append(f"{min(values):.3f}-{max(values):.3f}s" if values else "-")
        print(f"{label:<32}{cells[0]:>18}{cells[1]:>18}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
