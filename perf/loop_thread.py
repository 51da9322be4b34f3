"""What a second thread in the pytest process costs pytest: the one-fixture floor (1,000 tests,
each with its case and one fixture, no harness work) alone, then beside a thread that wakes every
millisecond and does almost nothing, then beside one that also works half of each millisecond.

Run: python perf/loop_thread.py [--tests 1000] [--repeats 3] [--json FILE]
Prints the main thread's CPU and the test loop's wall for each, least of ``--repeats`` runs, and
their ratios to the alone run, all measured in this run. This is why the case scheduler's event
loop runs on pytest's own thread (runtime/scheduler.py): a loop thread beside pytest wakes for
every reply, every timer and every run-ahead step, and each wake-up takes the GIL from pytest.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from run import FLOOR_TESTS, PY  # perf/run.py: the one-fixture floor's test file

#: A conftest starting the background thread the run asks for (``TOOLBENCH_PERF_BG``: seconds of
#: work per wake-up; unset: no thread), and a plugin reporting the main thread's CPU and the test
#: loop's wall time.
CONFTEST = '''
import json, os, threading, time
import pytest

WORK = os.environ.get("TOOLBENCH_PERF_BG")
if WORK is not None:
    def wake_up_every_millisecond(work=float(WORK)):
        while True:
            started = time.perf_counter()
            while time.perf_counter() - started < work:
                pass
            time.sleep(0.001)
    threading.Thread(target=wake_up_every_millisecond, daemon=True).start()

@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        return (yield)
    finally:
        figures = {"loop_wall_s": time.perf_counter() - wall, "main_cpu_s": time.thread_time() - cpu}
        with open(os.environ["TOOLBENCH_PERF_OUT"], "w") as fh:
            json.dump(figures, fh)
'''

SHAPES = {"alone": None, "waking thread (1 ms sleeps)": "0", "thread working 0.5 of each ms": "0.0005"}


def run_floor(folder: Path, work: str | None) -> dict[str, float]:
    out = folder / "figures.json"
    env = {"PATH": "/usr/bin:/bin", "TOOLBENCH_PERF_OUT": str(out)}
    if work is not None:
        env["TOOLBENCH_PERF_BG"] = work
    proc = subprocess.run([PY, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider", "-p",
                           "no:randomly", "-n", "0", "--rootdir", str(folder)],
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"floor run failed ({proc.returncode}): {proc.stdout[-400:]}")
    return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolbench-loop-thread-") as tmp:
        folder = Path(tmp)
        (folder / "test_floor.py").write_text(FLOOR_TESTS["fixture"].replace("{n}", str(ns.tests)))
        (folder / "conftest.py").write_text(CONFTEST)
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in SHAPES}
        for _ in range(ns.repeats):  # interleaved, so a machine that slows down hits every shape
            for name, work in SHAPES.items():
                runs[name].append(run_floor(folder, work))
    best = {name: {k: min(r[k] for r in rs) for k in ("loop_wall_s", "main_cpu_s")} for name, rs in runs.items()}
    alone = best["alone"]
    print(f"{ns.tests} one-fixture tests, least of {ns.repeats} interleaved runs")
    print(f"{'beside pytest':34} {'main CPU':>9} {'x alone':>8} {'loop wall':>10} {'x alone':>8}")
    for name, fig in best.items():
        print(f"{name:34} {fig['main_cpu_s']:8.2f}s {fig['main_cpu_s'] / alone['main_cpu_s']:7.2f}x "
              f"{fig['loop_wall_s']:9.2f}s {fig['loop_wall_s'] / alone['loop_wall_s']:7.2f}x")
    if ns.json:
        ns.json.write_text(json.dumps({"tests": ns.tests, "repeats": ns.repeats, "best": best,
                                       "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
