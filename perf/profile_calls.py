"""Where the harness's CPU per model call goes: py-spy over whole perf/run.py commands.

Run: python perf/profile_calls.py --py-spy PATH [--in-flight 64 256] [--cases 1000] [--workers N]
                                  [--rerun] [--json PATH]

For each in-flight count, the same ToolHop direct command as perf/run.py's efficiency runs (the
fake endpoint at ``--latency``, ``--cases`` x in-flight / 64 cases, ``-n 0``) runs under
``py-spy record --subprocesses`` (CPU samples only, idle threads left out), so the pytest
process and the SDK process it starts are both sampled; the fake endpoint is perf/run.py's child,
not the command's, and is not. ``--workers N`` runs it with ``-n N`` (cases and in-flight per
worker as above, so N times as many cases): the controller, each xdist worker and the SDK process
are then printed apart. ``--rerun`` runs each command once unsampled to fill its response cache
and samples the fully cached re-run that follows (goal 5's run); its figures are per case, and a
re-run that sent a request fails. Printed per process, as sampled milliseconds per model call and
as a share of the process's samples. With ``--gil`` (the default) only the thread holding the GIL
is sampled: the Python work that serialises each process, the part that bounds its calls per
second. Without it py-spy samples every thread and counts one waiting for the GIL, or inside
some GIL-free C calls, as busy, so the total is above the command's CPU.

* the top functions by own time (the sampled leaf frame), and own time summed by module (a
  harness file, a library's top-level package, a standard-library package or module);
* the same samples grouped by the innermost harness frame of the stack (``pytest_toolbench/...``
  module and function): what each harness module costs, the libraries it calls included;
  samples with no harness frame are grouped by the top-level package of their leaf.

py-spy is not a dependency: ``pip download py-spy --no-deps`` and unzip the wheel, or install it
anywhere, and pass its binary with ``--py-spy`` (it needs ptrace on its own children only).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import SAMPLE, FakeEndpoints, harness_env, make_toolhop_data, pytest_cmd, warm_bytecode  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")
RECORD_END = re.compile(r" (\d+)$")
STDLIB = re.compile(r"/python3\.\d+/([^/]+)")  # the package or module under the stdlib folder


def read_raw(path: Path) -> list[tuple[list[str], int]]:
    """py-spy's ``--format raw`` (collapsed stacks, ``frame;frame;... count``). A process frame
    quotes its command line, which may hold newlines: lines are joined until one ends a record."""
    stacks: list[tuple[list[str], int]] = []
    pending = ""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        pending = f"{pending}\n{line}" if pending else line
        end = RECORD_END.search(pending)
        if end:
            stacks.append((pending[:end.start()].split(";"), int(end.group(1))))
            pending = ""
    return stacks


def process_of(frames: list[str]) -> str:
    """The innermost ``process PID:"cmdline"`` frame, named by its role in a run."""
    procs = [f for f in frames if f.startswith("process ")]
    cmd = procs[-1] if procs else ""
    if "sdk" in cmd.lower():
        return "SDK process"
    if "pytest" in cmd and len(procs) <= 1:
        return "pytest process"
    if "-c import sys" in cmd:  # execnet's bootstrap (``import sys;exec(eval(...))``, cut at ';')
        return f"xdist worker (pid {cmd.split(':', 1)[0].removeprefix('process ')})"
    return "other: " + cmd.split(":", 1)[-1][:60]


def where(frame: str) -> tuple[str, str]:
    """(module, function) of a frame: a harness module relative to the repo, a library by its
    top-level package, the standard library by its file."""
    m = FRAME.match(frame)
    if not m:
        return frame[:60], ""
    file, func = m.group("file"), m.group("func")
    if "pytest_toolbench/" in file:
        return "pytest_toolbench/" + file.split("pytest_toolbench/", 1)[1], func
    if "site-packages/" in file:
        return file.split("site-packages/", 1)[1].split("/", 1)[0], func
    if file.startswith("<"):
        return file, func
    stdlib = STDLIB.search(file)
    return "stdlib:" + (stdlib.group(1) if stdlib else Path(file).name), func


def harness_owner(frames: list[str]) -> str | None:
    """Module and function of the innermost harness frame, or None."""
    for frame in reversed(frames):
        module, func = where(frame)
        if module.startswith("pytest_toolbench/"):
            return f"{module}:{func}"
    return None


def summarise(stacks: list[tuple[list[str], int]], calls: int, rate: int, top: int) -> dict[str, Any]:
    """Per process: sampled ms per call in total, by leaf function, by module and by innermost
    harness frame."""
    per = 1e3 / rate / max(calls, 1)  # one sample = 1/rate s of CPU
    own: dict[str, Counter[str]] = defaultdict(Counter)
    owner: dict[str, Counter[str]] = defaultdict(Counter)
    modules: dict[str, Counter[str]] = defaultdict(Counter)
    totals: Counter[str] = Counter()
    for frames, count in stacks:
        proc = process_of(frames)
        body = [f for f in frames if not f.startswith("process ")]
        if not body:
            continue
        module, func = where(body[-1])
        totals[proc] += count
        own[proc][f"{module}:{func}"] += count
        modules[proc][module] += count
        owner[proc][harness_owner(body) or f"(no harness frame) {module}"] += count
    return {proc: {"sampled_ms_per_call": round(totals[proc] * per, 3), "samples": totals[proc],
                   "top_own": [(k, round(v * per, 3)) for k, v in own[proc].most_common(top)],
                   "own_by_module": [(k, round(v * per, 3)) for k, v in modules[proc].most_common(top)],
                   "by_harness_frame": [(k, round(v * per, 3)) for k, v in owner[proc].most_common(top)]}
            for proc in sorted(totals, key=lambda p: -totals[p])}


def profile_run(py_spy: str, tmp: Path, in_flight: int, cases: int, latency: float, rate: int,
                top: int, gil: bool, workers: int = 0, rerun: bool = False) -> dict[str, Any]:
    data = make_toolhop_data(tmp / f"data-{in_flight}", cases)
    raw = tmp / f"profile-{in_flight}.txt"
    server = FakeEndpoints(SAMPLE, latency)
    try:
        command = pytest_cmd(data, server.urls, in_flight, tmp / f"cache-{in_flight}",
                             extra=["-n", str(workers)])
        if rerun:  # the first run fills the cache, unsampled
            first = subprocess.run(command, cwd=REPO, env=harness_env(), capture_output=True, text=True)
            if first.returncode != 0:
                return {"rc": first.returncode, "tail": (first.stdout + first.stderr)[-1500:]}
            server.reset()
        cmd = [py_spy, "record", "--subprocesses", "--nonblocking", "--full-filenames", "--rate", str(rate), "--format", "raw",
               *(["--gil"] if gil else []), "-o", str(raw), "--", *command]
        proc = subprocess.run(cmd, cwd=REPO, env=harness_env(), capture_output=True, text=True)
        calls = server.stats()["requests"]
    finally:
        server.close()
    if proc.returncode != 0 or not raw.exists():
        return {"rc": proc.returncode, "tail": (proc.stdout + proc.stderr)[-1500:]}
    if rerun and calls:  # not a cached re-run: its profile would mislead
        return {"rc": 1, "tail": f"the cached re-run sent {calls} request(s)"}
    per = cases if rerun else calls
    return {"rc": 0, "calls": calls, "cases": cases, "rate_hz": rate, "gil_only": gil,
            "workers": workers, "rerun": rerun,
            "processes": summarise(read_raw(raw), per, rate, top)}


def render(in_flight: int, res: dict[str, Any]) -> str:
    if res.get("rc"):
        return f"== {in_flight} in flight: failed (rc {res['rc']})\n{res.get('tail', '')}"
    unit = "case" if res.get("rerun") else "call"
    what = (f"a cached re-run of {res['cases']} cases" if res.get("rerun")
            else f"{res['calls']} model calls")
    lines = [f"== {in_flight} in flight, -n {res.get('workers', 0)}: {what}, sampled at {res['rate_hz']} Hz"
             + (", GIL holder only" if res["gil_only"] else ", every thread")]
    for proc, p in res["processes"].items():
        total = p["sampled_ms_per_call"] or 1.0
        lines.append(f"-- {proc}: {p['sampled_ms_per_call']} sampled ms per {unit} ({p['samples']} samples)")
        for title, key in (("top functions by own time", "top_own"), ("own time by module", "own_by_module"),
                           ("by innermost harness frame, callees included", "by_harness_frame")):
            lines.append(f"   {title} (ms per {unit}, share):")
            lines += [f"     {v:7.3f} {v / total:6.1%}  {k}" for k, v in p[key]]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--py-spy", required=True, help="path of the py-spy binary")
    parser.add_argument("--in-flight", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--cases", type=int, default=1000, help="direct cases at 64 in flight")
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--workers", type=int, default=0, help="xdist workers (-n)")
    parser.add_argument("--rerun", action="store_true",
                        help="sample the fully cached re-run, not the first run")
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-gil", dest="gil", action="store_false",
                        help="sample every thread, not only the one holding the GIL")
    parser.add_argument("--json", type=Path, default=None)
    ns = parser.parse_args()
    warm_bytecode()
    results: dict[int, Any] = {}
    with tempfile.TemporaryDirectory(prefix="toolbench-profile-") as tmpname:
        for n in ns.in_flight:
            results[n] = profile_run(ns.py_spy, Path(tmpname), n, ns.cases * n // 64 * max(1, ns.workers),
                                     ns.latency, ns.rate, ns.top, ns.gil, ns.workers, ns.rerun)
            print(render(n, results[n]), flush=True)
    if ns.json:
        ns.json.parent.mkdir(parents=True, exist_ok=True)
        ns.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0 if all(not r.get("rc") for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
