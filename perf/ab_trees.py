"""A/B of two checkouts of the harness, run in turn on the same data and fake endpoint.

Run: python perf/ab_trees.py --old ../old-checkout [--new .] [--mode rerun|first|n2]
                             [--cases 1000] [--repeats 3] [--latency 0.05] [--in-flight 64]
                             [--load N]
``rerun``: a cached re-run, each tree reading a cache it filled once (the trees may store it in
different formats);
``first``: a first run with a cache of its own per run; ``n2``: the same with ``-n 2``. The two
trees run in turn, so a machine that slows down (this one moves up to 2x within an hour) slows
both; prints each run and the least wall and CPU (every process of the command) of each tree.
``--load N`` runs every command beside N busy processes, as ``perf/run.py --load N`` does.
Each tree runs from its own folder with itself first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from run import SAMPLE, FakeEndpoints, busy_load, make_toolhop_data, pytest_cmd, timed_usage  # perf/run.py


def timed_tree(tree: Path, cmd: list[str]) -> tuple[float, float, int]:
    """Wall, CPU of the command and its children, exit status (perf/run.py's ``timed_usage``,
    in ``tree`` with ``tree`` first on ``PYTHONPATH``)."""
    wall, rc, _tail, _rss, cpu = timed_usage(cmd, {"PYTHONPATH": str(tree)}, cwd=tree)
    return wall, cpu, rc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--new", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--mode", choices=["rerun", "first", "n2"], default="rerun")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--in-flight", type=int, default=64, help="--concurrency of every run")
    parser.add_argument("--load", type=int, default=0, metavar="N", help="busy processes beside it")
    ns = parser.parse_args()
    trees = {"old": ns.old.resolve(), "new": ns.new.resolve()}
    runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="toolbench-ab-") as tmpname, busy_load(ns.load):
        tmp = Path(tmpname)
        data = make_toolhop_data(tmp / "data", ns.cases)
        server = FakeEndpoints(SAMPLE, ns.latency)
        workers = ["-n", "2" if ns.mode == "n2" else "0"]
        try:
            for name, tree in trees.items() if ns.mode == "rerun" else ():
                wall, _, rc = timed_tree(tree, pytest_cmd(data, server.urls, ns.in_flight, tmp / f"cache-{name}", extra=workers))
                print(f"filling {name}'s cache: {wall:.2f}s, rc {rc}", flush=True)
            for i in range(ns.repeats):
                for name, tree in trees.items():
                    cache = tmp / f"cache-{name}" if ns.mode == "rerun" else tmp / f"cache-{name}-{i}"
                    server.reset()
                    runs[name].append(timed_tree(tree, pytest_cmd(data, server.urls, ns.in_flight, cache, extra=workers)))
                    wall, cpu, rc = runs[name][-1]
                    print(f"{name}: wall {wall:.2f}s, CPU {cpu:.2f}s, rc {rc}", flush=True)
        finally:
            server.close()
    for name, results in runs.items():
        ok = [r for r in results if r[2] == 0]
        if not ok:
            print(f"{name}: every run failed")
            continue
        print(f"{name} ({trees[name]}): least wall {min(r[0] for r in ok):.2f}s, least CPU "
              f"{min(r[1] for r in ok):.2f}s over {len(ok)} successful run(s) of {len(results)}")
    return 0 if all(r[2] == 0 for results in runs.values() for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
