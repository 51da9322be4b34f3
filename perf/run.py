"""One performance run of the harness against a fixed-latency local endpoint.

Run: python perf/run.py [--latency 0.5] [--cases 1000] [--load N] [--json PATH] [--skip NAME ...]

Starts perf/fake_llm.py (a stdlib-asyncio OpenAI-compatible server playing ToolHop gold, so
tool-using cases take their real number of turns), generates ToolHop data with distinct ids from
the bundled sample into a temporary data dir, runs whole ``pytest`` commands as subprocesses and
measures each figure as a ratio, then prints a table and exits 1 if any goal is missed. The
commands run with Python's bytecode cache on (as on a user's machine; see ``harness_env``).

Efficiency = ideal wall / measured wall of the whole pytest command, ideal = model calls x
latency / requests in flight. Runs at more requests in flight get proportionally more cases
(``--cases`` is the size at 64 in flight), so every efficiency run has the same ideal wall.

``--load N`` runs the same table while N busy processes (pure-Python loops started and ended by
this script) share the machine: what a busy CI runner gives.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "toolhop" / "ToolHop.json"
SHARED_DATA = REPO.parent / "shared" / "datasets"
PY = sys.executable


@dataclass
class Goal:
    name: str
    value: float | None
    target: float | None
    higher_is_better: bool = True
    unit: str = ""
    note: str = ""

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        if self.value is None:
            return False
        return self.value >= self.target if self.higher_is_better else self.value <= self.target


# ----------------------------------------------------------------------------- data and server
def make_toolhop_data(root: Path, records: int) -> Path:
    """``records`` ToolHop records cycled from the bundled sample, ids and questions made
    distinct (the fake endpoint finds the gold by the sample question inside the prompt)."""
    base = json.loads(SAMPLE.read_text(encoding="utf-8"))
    out = root / "toolhop"
    out.mkdir(parents=True, exist_ok=True)
    with (out / "ToolHop.json").open("w", encoding="utf-8") as fh:
        fh.write("[")
        for i in range(records):
            rec = dict(base[i % len(base)])
            rec["id"] = 1_000_000 + i
            # A distinct request per case (else the response cache answers the copies).
            rec["question"] = f"[{rec['id']}] {rec['question']}"
            fh.write(("," if i else "") + json.dumps(rec))
        fh.write("]")
    return root


class FakeEndpoints:
    """perf/fake_llm.py in its own process (its CPU never shares the harness's GIL)."""

    def __init__(self, data: Path, latency: float, endpoints: int = 1):
        self.proc = subprocess.Popen(
            [PY, str(REPO / "perf" / "fake_llm.py"), "--data", str(data), "--latency", str(latency),
             "--endpoints", str(endpoints)], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError("fake endpoint did not start")
        self.ports = [int(p) for p in line.split(",")]
        self.urls = [f"http://127.0.0.1:{p}/v1" for p in self.ports]

    def _get(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ports[0]}{path}", timeout=10) as r:
            return json.loads(r.read())

    def stats(self) -> dict[str, Any]:
        return self._get("/stats")

    def reset(self) -> None:
        self._get("/reset")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


# ----------------------------------------------------------------------------- background load
# A pure-Python loop that also ends by itself once this script is gone (its parent changes), so a
# SIGKILLed perf run cannot leave busy processes behind; the check runs every ~10 ms of work.
BUSY_LOOP = ("import os, sys\nparent = int(sys.argv[1])\n"
             "while os.getppid() == parent:\n    for _ in range(100_000):\n        pass\n")


def _raise_exit(signum: int, _frame: Any) -> None:
    """SIGTERM/SIGHUP end the run through ``finally`` (busy processes stopped, temp dir removed)."""
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def busy_load(n: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``n`` busy processes for the duration of the block, always stopped on the way out
    (exception, Ctrl-C, SIGTERM); Ctrl-C also reaches them directly, as they share this
    process's group."""
    procs: list[subprocess.Popen[bytes]] = []
    previous = {sig: signal.signal(sig, _raise_exit) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        for _ in range(n):
            procs.append(subprocess.Popen([PY, "-c", BUSY_LOOP, str(os.getpid())],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        for proc in procs:
            proc.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def load_average() -> str:
    """The 1/5/15-minute load averages, as ``uptime`` prints them."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


# ----------------------------------------------------------------------------- pytest runs
def harness_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every measured command: bytecode caching on, as on a user's machine.
    ``PYTHONDONTWRITEBYTECODE`` (set on these sandboxes) would make every command compile the
    harness, its plugins and the suites from source again: ~0.75 s of each start-up."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, **(extra or {})}


def warm_bytecode() -> None:
    """One untimed collection of every suite with an endpoint model (so the openai SDK is imported
    too, without a request): the measured commands find compiled modules and warm file caches, as
    a user's second command does."""
    subprocess.run([PY, "-m", "pytest", "suites", "--collect-only", "-q", "-p", "no:cacheprovider",
                    "--data", "sample", "--backend", "openai", "--model", "warm-up", "--api-key", "warm-up",
                    "--base-url", "http://127.0.0.1:9/v1"],
                   cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=harness_env())


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str, int]:
    """Wall seconds, return code, output tail and peak RSS (KiB) of one subprocess."""
    return timed_usage(cmd, env)[:4]  # type: ignore[return-value]


def timed_usage(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str, int, float]:
    """``timed`` and the CPU seconds the command used, its reaped children included (xdist
    workers, the SDK process, sandbox workers)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=harness_env(env))
    out = proc.stdout.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (wall, proc.returncode, out.decode("utf-8", "replace")[-3000:], int(usage.ru_maxrss),
            usage.ru_utime + usage.ru_stime)


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pytest_cmd(data_dir: Path, base_urls: list[str], concurrency: int, cache_dir: Path,
               scenario: str = "direct", extra: list[str] | None = None) -> list[str]:
    cmd = [PY, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--data-dir", str(data_dir), "--scenario", scenario, "--api-key", "perf",
           "--model", "perf-model", "--backend", "openai", "--concurrency", str(concurrency),
           "--cache-dir", str(cache_dir)]
    for url in base_urls:
        cmd += ["--base-url", url]
    return cmd + (extra or [])


def efficiency_run(server: FakeEndpoints, data_dir: Path, latency: float, concurrency: int,
                   workers: int, cache_dir: Path, extra: list[str] | None = None,
                   scenario: str = "direct") -> dict[str, Any]:
    server.reset()
    extra = [*(extra or []), "-n", str(workers)]
    started_at = time.time()
    endpoint_cpu = process_cpu_s(server.proc.pid)
    wall, rc, tail, rss, cpu = timed_usage(pytest_cmd(data_dir, server.urls, concurrency, cache_dir,
                                                      scenario, extra))
    endpoint_cpu = process_cpu_s(server.proc.pid) - endpoint_cpu
    stats = server.stats()
    in_flight = concurrency * max(1, workers)
    calls = stats["requests"]
    ideal = calls * latency / in_flight
    ok = rc == 0 and calls > 0  # the gold-playing endpoint makes every case pass
    # Where the wall time went, from the endpoint's clock: start-up until the first request, the
    # busy span from it to the last reply (its efficiency = how full the in-flight window was),
    # and what the command did after the last reply (summary, reports, exit).
    first, last = stats.get("first"), stats.get("last")
    phases = ({"to_first_request_s": round(first - started_at, 3),
               "busy_s": round(last - first, 3),
               "after_last_reply_s": round(started_at + wall - last, 3),
               "busy_efficiency": round(ideal / (last - first), 3) if last > first else None}
              if ok and first and last else {})
    # How busy the machine was: the harness's CPU (its SDK process and workers included) and the
    # fake endpoint's, over what the machine's cores offered during the command. Near 1.0 the
    # figure is bounded by this machine's CPU, not by the harness waiting.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    machine = {"harness_cpu_s": round(cpu, 2), "endpoint_cpu_s": round(endpoint_cpu, 2), "cores": cores,
               "machine_busy": round((cpu + endpoint_cpu) / (wall * cores), 3)}
    return {"wall_s": round(wall, 3), "rc": rc, "ok": ok, "calls": calls, "in_flight": in_flight, **machine,
            "peak_in_flight": stats["peak_in_flight"], "ideal_s": round(ideal, 3),
            # A failed run scores nothing: its wall time says nothing about the harness.
            "efficiency": round(ideal / wall, 3) if ok else None, "per_port": stats["per_port"],
            **phases, "tail": tail[-400:] if ok else tail}


def rerun_speedup(first: dict[str, Any], wall: float, rc: int, calls: int | None) -> float | None:
    """first wall / this wall, or None (a miss) when either run failed or the re-run called the
    endpoint: a re-run that died early would otherwise look fast."""
    if not first.get("ok") or rc != 0 or (calls or 0) != 0:
        return None
    return round(first["wall_s"] / wall, 2)


def pytest_floor(tmp: Path, n: int, first_wall: float) -> dict[str, Any]:
    """Wall time and CPU of ``n`` parametrised no-op tests in this checkout (same plugins, same
    options): a cached re-run can never be faster than pytest running as many items, and no
    harness can spend less CPU per case, nor drive more cases per second, than pytest per test."""
    folder = tmp / f"floor-{n}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_floor.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('i', range(%d))\ndef test_noop(i):\n    pass\n" % n)
    wall, rc, tail, _, cpu = timed_usage([PY, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
                                          "-p", "no:randomly", "-n", "0", "--rootdir", str(folder)])
    return {"wall_s": round(wall, 3), "rc": rc, "cases": n,
            "max_speedup": round(first_wall / wall, 2) if rc == 0 else None, "tail": tail[-300:] if rc else "",
            # Whole command, start-up included (as the harness figures they are compared with).
            "cpu_s": round(cpu, 3), "cpu_per_test_ms": round(cpu / n * 1e3, 3) if rc == 0 else None,
            "tests_per_s": round(n / wall, 1) if rc == 0 else None}


def marginal_cpu_note(small: tuple[dict[str, Any], dict[str, Any]],
                      large: tuple[dict[str, Any], dict[str, Any]]) -> str:
    """CPU per call and per no-op test between two sizes (run, floor pairs): the start-up that the
    whole-command figures share out over the calls is left out of both."""
    (run_a, floor_a), (run_b, floor_b) = small, large
    if not (run_a.get("ok") and run_b.get("ok") and floor_a.get("cpu_per_test_ms")
            and floor_b.get("cpu_per_test_ms")) or run_b["calls"] == run_a["calls"]:
        return ""
    per_call = (run_b["harness_cpu_s"] - run_a["harness_cpu_s"]) / (run_b["calls"] - run_a["calls"]) * 1e3
    per_test = (floor_b["cpu_s"] - floor_a["cpu_s"]) / (floor_b["cases"] - floor_a["cases"]) * 1e3
    return (f"; marginal {run_a['calls']} -> {run_b['calls']}: {per_call:.2f} ms per call vs "
            f"{per_test:.2f} ms per test ({per_call / per_test:.1f}x)" if per_test > 0 else "")


def sdk_alone(server: FakeEndpoints, calls: int, in_flight: int) -> dict[str, Any]:
    """perf/sdk_floor.py against ``server``: the openai SDK's CPU per call with no harness (the
    least any harness on the real SDK spends beside pytest's own per-test work)."""
    server.reset()
    wall, rc, tail, _, cpu = timed_usage([PY, str(REPO / "perf" / "sdk_floor.py"), "--base-url", server.urls[0],
                                          "--data", str(SAMPLE), "--calls", str(calls),
                                          "--in-flight", str(in_flight)])
    try:
        res = json.loads(tail.strip().splitlines()[-1]) if rc == 0 else {}
    except (ValueError, IndexError):
        res = {}
    # Whole process (interpreter, imports, client, calls), as the harness figures count it.
    return {**res, "rc": rc, "process_cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
            "process_cpu_per_call_ms": round(cpu / calls * 1e3, 3) if res else None,
            "tail": "" if res else tail[-400:]}


def sdk_reference_goal(label: str, sdk: dict[str, Any], floor: dict[str, Any]) -> Goal:
    """The SDK's CPU per call, and what goal 1 could reach with a harness that cost nothing:
    pytest's per-test floor plus the SDK's per-call CPU, over the floor."""
    per_call, per_test = sdk.get("process_cpu_per_call_ms"), floor.get("cpu_per_test_ms")
    least = round((per_test + per_call) / per_test, 2) if per_call and per_test else None
    return Goal(f"reference: openai SDK alone, CPU per call, {label}", per_call, None, unit="ms",
                note=f"{sdk.get('calls')} calls in one asyncio process, whole process (steady "
                     f"{sdk.get('cpu_per_call_ms')} ms per call + start-up, import, client "
                     f"{sdk.get('setup_cpu_s')}s); (pytest floor + SDK) / floor = {least}x: the least "
                     "CPU ratio a harness on the real SDK reaches even at zero cost of its own")


def cpu_per_call_goal(label: str, run: dict[str, Any], floor: dict[str, Any], extra: str = "") -> Goal:
    """Harness CPU per model call (every process of the command: pytest, xdist workers, the SDK
    process, sandbox workers; the fake endpoint is not its child) over pytest's CPU per no-op
    test in a run of as many tests."""
    per_call = run["harness_cpu_s"] / run["calls"] * 1e3 if run.get("ok") and run["calls"] else None
    per_test = floor.get("cpu_per_test_ms")
    ratio = round(per_call / per_test, 2) if per_call and per_test else None
    return Goal(f"harness CPU per model call / pytest floor per test, {label}", ratio, 2.0, False, "x",
                note=f"{per_call or float('nan'):.2f} ms per call ({run['harness_cpu_s']}s over {run['calls']} "
                     f"calls, every harness process, endpoint excluded) vs {per_test} ms CPU per no-op "
                     f"test ({floor['cases']} tests){extra}")


def efficiency_ceiling(run: dict[str, Any], latency: float) -> dict[str, Any]:
    """The most any harness using the openai SDK could reach in ``run`` on this machine.

    No request can leave before pytest has imported itself (the earliest a plugin can act) and a
    fresh process has then imported openai; and ``calls`` independent calls at ``in_flight`` take
    at least ``ceil(calls / in_flight)`` rounds of ``latency``. Each import is timed in a fresh
    interpreter, fastest of three (a lower bound: plugin loading, collection, the first call's
    HTTP set-up and the exit are left out)."""
    def fastest(code: str) -> float:
        return min(timed([PY, "-c", code])[0] for _ in range(3))

    import_pytest, import_openai = fastest("import pytest"), fastest("import openai")
    rounds = -(-run["calls"] // run["in_flight"])
    least = rounds * latency + import_pytest + import_openai
    return {"import_pytest_s": round(import_pytest, 3), "import_openai_s": round(import_openai, 3),
            "rounds": rounds, "least_wall_s": round(least, 3),
            "ceiling": round(run["ideal_s"] / least, 3) if run.get("ideal_s") else None}


# ----------------------------------------------------------------------------- measurements
def measure_efficiency(ns: argparse.Namespace, tmp: Path, figures: dict[str, Any]) -> list[Goal]:
    goals: list[Goal] = []
    sizes = {64: ns.cases, 256: ns.cases * 4, 128: ns.cases * 2}
    data = {n: make_toolhop_data(tmp / f"data-{n}", n) for n in set(sizes.values())}
    server = FakeEndpoints(SAMPLE, ns.latency)
    try:
        runs: dict[str, dict[str, Any]] = {}
        cache64 = tmp / "cache-64" / "cache"
        runs["c64_n0"] = efficiency_run(server, data[sizes[64]], ns.latency, 64, 0, cache64)
        runs["c128_n0"] = efficiency_run(server, data[sizes[128]], ns.latency, 128, 0,
                                         tmp / "cache-128" / "cache")
        runs["c256_n0"] = efficiency_run(server, data[sizes[256]], ns.latency, 256, 0,
                                         tmp / "cache-256" / "cache")
        runs["c64_n2"] = efficiency_run(server, data[sizes[128]], ns.latency, 64, 2,
                                        tmp / "cache-n2" / "cache")
        # The same 64-in-flight run with the SDK inside the pytest process (what the shared SDK
        # process gains, measured in this run).
        runs["c64_n0_inline"] = efficiency_run(server, data[sizes[64]], ns.latency, 64, 0,
                                               tmp / "cache-64-inline" / "cache",
                                               extra=["--sdk-process", "inline"])
        # The fully cached re-run and --cache-only reuse the 64-in-flight run's cache.
        server.reset()
        cached_wall, cached_rc, cached_tail, _ = timed(pytest_cmd(data[sizes[64]], server.urls, 64, cache64, extra=["-n", "0"]))
        cached_calls = server.stats()["requests"]
        server.reset()
        only_wall, only_rc, only_tail, _ = timed(pytest_cmd(data[sizes[64]], server.urls, 64, cache64,
                                                            extra=["-n", "0", "--cache-only"]))
        only_calls = server.stats()["requests"]
        figures["efficiency_runs"] = runs
        first = runs["c64_n0"]["wall_s"]
        figures["pytest_floor"] = pytest_floor(tmp, ns.cases, first)
        figures["pytest_floor_256"] = pytest_floor(tmp, sizes[256], runs["c256_n0"]["wall_s"])
        figures["ceiling_64"] = ceiling = efficiency_ceiling(runs["c64_n0"], ns.latency)
        figures["cached_rerun"] = {"wall_s": round(cached_wall, 3), "rc": cached_rc,
                                   "calls_sent": cached_calls,
                                   "speedup": rerun_speedup(runs["c64_n0"], cached_wall, cached_rc, cached_calls),
                                   "tail": cached_tail[-400:]}
        figures["cache_only"] = {"wall_s": round(only_wall, 3), "rc": only_rc, "calls_sent": only_calls,
                                 "speedup": rerun_speedup(runs["c64_n0"], only_wall, only_rc, only_calls),
                                 "tail": only_tail[-400:]}
        effs = [runs[k]["efficiency"] for k in ("c64_n0", "c128_n0", "c256_n0")]
        # "Keeps rising with more in flight instead of falling": the worst step 64->128->256
        # may not fall by more than noise.
        worst_step = (round(min(b - a for a, b in zip(effs, effs[1:])), 3)
                      if all(e is not None for e in effs) else None)
        goals += [
            Goal("efficiency, 64 in flight, -n 0", runs["c64_n0"]["efficiency"], 0.90,
                 note=f"{runs['c64_n0']['calls']} calls, {runs['c64_n0']['wall_s']}s vs ideal {runs['c64_n0']['ideal_s']}s"),
            Goal("efficiency, 256 in flight, -n 0", runs["c256_n0"]["efficiency"], 0.85,
                 note=f"{runs['c256_n0']['calls']} calls, {runs['c256_n0']['wall_s']}s vs ideal {runs['c256_n0']['ideal_s']}s"),
            Goal("efficiency, -n 2 x 64 in flight", runs["c64_n2"]["efficiency"], 0.80,
                 note=f"{runs['c64_n2']['calls']} calls, {runs['c64_n2']['wall_s']}s vs ideal {runs['c64_n2']['ideal_s']}s"),
            *[Goal(f"  {k}: start-up / busy-span efficiency / after last reply",
                   runs[k].get("busy_efficiency"), None,
                   note=f"first request at {runs[k].get('to_first_request_s')}s, busy "
                        f"{runs[k].get('busy_s')}s, exit {runs[k].get('after_last_reply_s')}s after the last reply; "
                        f"CPU: harness {runs[k]['harness_cpu_s']}s + endpoint {runs[k]['endpoint_cpu_s']}s "
                        f"= {runs[k]['machine_busy']:.0%} of {runs[k]['cores']} cores")
              for k in ("c64_n0", "c128_n0", "c256_n0", "c64_n2")],
            Goal("reference: ceiling at 64 in flight, -n 0, on this machine", ceiling["ceiling"], None,
                 note=f"ideal / ({ceiling['rounds']} rounds x {ns.latency}s + importing pytest "
                      f"{ceiling['import_pytest_s']}s + openai {ceiling['import_openai_s']}s in a fresh "
                      "process): the first request can leave no sooner, with zero harness cost"),
            Goal("reference: efficiency, 64 in flight, -n 0, --sdk-process inline",
                 runs["c64_n0_inline"]["efficiency"], None,
                 note=f"{runs['c64_n0_inline']['wall_s']}s; first request at "
                      f"{runs['c64_n0_inline'].get('to_first_request_s')}s (the default, shared: "
                      f"{runs['c64_n0'].get('to_first_request_s')}s)"),
            Goal("efficiency, 128 in flight, -n 0", runs["c128_n0"]["efficiency"], None,
                 note=f"{runs['c128_n0']['calls']} calls, {runs['c128_n0']['wall_s']}s vs ideal {runs['c128_n0']['ideal_s']}s"),
            Goal("efficiency keeps rising 64 -> 128 -> 256 in flight", worst_step, -0.05,
                 note=f"worst step of {effs}; may not fall by more than noise (0.05)"),
            Goal("fully cached re-run speedup", figures["cached_rerun"]["speedup"], 20.0, unit="x",
                 note=f"{cached_wall:.2f}s, rc {cached_rc}, {cached_calls} calls sent (must be 0)"),
            Goal("--cache-only speedup", figures["cache_only"]["speedup"], 20.0, unit="x",
                 note=f"{only_wall:.2f}s, rc {only_rc}, {only_calls} calls sent (must be 0)"),
            Goal("reference: pytest floor for as many no-op tests", figures["pytest_floor"]["wall_s"],
                 None, unit="s",
                 note=f"first run / floor = {figures['pytest_floor']['max_speedup']}x: the most any "
                      "re-run through pytest can gain"),
            cpu_per_call_goal("64 in flight", runs["c64_n0"], figures["pytest_floor"]),
            cpu_per_call_goal("256 in flight", runs["c256_n0"], figures["pytest_floor_256"],
                              marginal_cpu_note((runs["c64_n0"], figures["pytest_floor"]),
                                                (runs["c256_n0"], figures["pytest_floor_256"]))),
        ]
        if "sdk" not in ns.skip:
            figures["sdk_alone"] = {64: sdk_alone(server, sizes[64], 64), 256: sdk_alone(server, sizes[256], 256)}
            goals += [sdk_reference_goal("64 in flight", figures["sdk_alone"][64], figures["pytest_floor"]),
                      sdk_reference_goal("256 in flight", figures["sdk_alone"][256],
                                         figures["pytest_floor_256"])]
        if not ns.skip or "upstream" not in ns.skip:
            server.reset()
            up_wall, up_rc, up_tail, _ = timed([PY, str(REPO / "perf" / "upstream_style.py"),
                                                "--data-dir", str(data[sizes[64]]), "--base-url",
                                                server.urls[0], "--threads", "64",
                                                "--out", str(tmp / "upstream.jsonl")],
                                               env={"PYTHONPATH": str(REPO)})
            up_calls = server.stats()["requests"]
            up_eff = up_calls * ns.latency / 64 / up_wall
            figures["upstream_reference"] = {"wall_s": round(up_wall, 3), "rc": up_rc, "calls": up_calls,
                                             "efficiency": round(up_eff, 3),
                                             "harness_speedup": round(up_wall / first, 2),
                                             "tail": up_tail[-400:] if up_rc else ""}
            goals.append(Goal("reference: upstream thread pool (64 threads) efficiency",
                              round(up_eff, 3), None,
                              note=f"upstream wall / harness wall at 64 in flight = {up_wall / first:.2f}"
                                   f" ({'harness faster' if up_wall > first else 'harness SLOWER'})"))
    finally:
        server.close()
    return goals


def measure_endpoints(ns: argparse.Namespace, tmp: Path, figures: dict[str, Any]) -> list[Goal]:
    n = ns.endpoints
    data = make_toolhop_data(tmp / "data-ep", ns.cases * n)
    server = FakeEndpoints(SAMPLE, ns.latency, endpoints=n)
    try:
        run = efficiency_run(server, data, ns.latency, 64 * n, 0, tmp / "cache-ep" / "cache")
    finally:
        server.close()
    spread = sorted(run["per_port"].values())
    figures["endpoints"] = {**run, "endpoints": n}
    return [Goal(f"aggregate efficiency, {n} endpoints x 64 in flight", run["efficiency"], 0.90,
                 note=f"{run['calls']} calls, per endpoint {spread}; CPU: harness {run['harness_cpu_s']}s "
                      f"+ endpoints {run['endpoint_cpu_s']}s = {run['machine_busy']:.0%} of {run['cores']} cores")]


DRIVE_SETTINGS = (("-n 0 x 64", 64, 0), ("-n 0 x 256", 256, 0), ("-n 2 x 128", 128, 2))


def measure_drive(ns: argparse.Namespace, tmp: Path, figures: dict[str, Any]) -> list[Goal]:
    """Model calls per second against a fast endpoint (``--drive-latency``, 10 ms), whole command
    (start-up and exit included), at each of ``DRIVE_SETTINGS``; the best is compared with pytest
    running as many no-op tests, also whole command, in the same run."""
    data = make_toolhop_data(tmp / "data-drive", ns.drive_cases)
    server = FakeEndpoints(SAMPLE, ns.drive_latency)
    runs: dict[str, dict[str, Any]] = {}
    try:
        for label, concurrency, workers in DRIVE_SETTINGS:
            run = efficiency_run(server, data, ns.drive_latency, concurrency, workers,
                                 tmp / f"cache-drive-{concurrency}-{workers}" / "cache")
            run["calls_per_s"] = round(run["calls"] / run["wall_s"], 1) if run["ok"] else None
            run["busy_calls_per_s"] = (round(run["calls"] / run["busy_s"], 1)
                                       if run.get("busy_s") else None)
            runs[label] = run
    finally:
        server.close()
    floor = pytest_floor(tmp, ns.drive_cases, runs[DRIVE_SETTINGS[0][0]]["wall_s"])
    rated = {k: r["calls_per_s"] for k, r in runs.items() if r["calls_per_s"]}
    best = max(rated, key=lambda k: rated[k]) if rated else None
    ratio = (round(rated[best] / floor["tests_per_s"], 3)
             if best and floor.get("tests_per_s") else None)
    figures["drive"] = {"latency_s": ns.drive_latency, "cases": ns.drive_cases, "runs": runs,
                        "pytest_floor": floor, "best": best, "ratio": ratio}
    settings = "; ".join(f"{k}: {r['calls_per_s']}/s (busy span {r['busy_calls_per_s']}/s, "
                         f"endpoint CPU {r['endpoint_cpu_s']}s, machine {r['machine_busy']:.0%})"
                         for k, r in runs.items())
    return [
        Goal(f"drive rate, {ns.drive_latency * 1e3:g} ms endpoint / pytest no-op tests per second", ratio,
             0.5, note=f"best {best}: {rated.get(best) if best else None} calls/s vs pytest "
                       f"{floor.get('tests_per_s')} no-op tests/s ({ns.drive_cases} each, whole command)"),
        Goal("  drive rate per setting", rated.get(best) if best else None, None, unit="/s", note=settings),
    ]


# Where a run folder's bytes go: the first matching rule names the file's part.
STORAGE_PARTS = (("report.json", re.compile(r"report\.json$")),
                 ("results.jsonl", re.compile(r"results\.jsonl$")),
                 ("worker journals", re.compile(r"worker-[^/]*\.jsonl$")),
                 ("run.json", re.compile(r"run\.json$")),
                 ("caches in the run folder", re.compile(r"-(extractions|cache)/")))


def folder_usage(root: Path) -> dict[str, dict[str, int]]:
    """Bytes and files of ``root``, per part of ``STORAGE_PARTS`` (``other`` for the rest)."""
    parts: dict[str, dict[str, int]] = {}
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        name = next((n for n, rule in STORAGE_PARTS if rule.search(rel)), "other")
        part = parts.setdefault(name, {"bytes": 0, "files": 0})
        part["bytes"] += path.stat().st_size
        part["files"] += 1
    return parts


def measure_storage(ns: argparse.Namespace, tmp: Path, figures: dict[str, Any]) -> list[Goal]:
    """An oracle run (no endpoint) of ToolHop and FamilyTool over ``--data-dir`` with ``-n 2``
    (as a user gating a merge runs it), then the bytes per case of its run folder, by file, and
    of its response cache."""
    goals: list[Goal] = []
    out: dict[str, Any] = {}
    for bench in ("familytool", "toolhop"):
        runs_dir, cache_dir = tmp / f"runs-{bench}", tmp / f"cache-{bench}"
        wall, rc, tail, _ = timed([PY, "-m", "pytest", f"suites/{bench}", "-q", "-p", "no:cacheprovider",
                                   "-p", "no:randomly", "--data-dir", str(ns.data_dir), "--model", "oracle",
                                   "-n", "2", "--runs-dir", str(runs_dir), "--cache-dir", str(cache_dir)])
        folders = [p for p in runs_dir.iterdir() if p.is_dir()] if runs_dir.is_dir() else []
        journal = folders[0] / "results.jsonl" if len(folders) == 1 else None
        cases = (sum(1 for line in journal.open("rb") if line.strip())
                 if journal and journal.exists() else 0)
        parts = folder_usage(folders[0]) if len(folders) == 1 else {}
        cache = folder_usage(cache_dir) if cache_dir.is_dir() else {}
        total = sum(p["bytes"] for p in parts.values())
        cache_bytes = sum(p["bytes"] for p in cache.values())
        ok = rc == 0 and cases > 0
        out[bench] = {"wall_s": round(wall, 3), "rc": rc, "cases": cases, "run_folder_bytes": total,
                      "run_folder_files": sum(p["files"] for p in parts.values()), "parts": parts,
                      "response_cache_bytes": cache_bytes, "tail": "" if ok else tail[-400:]}
        per_case = round(total / cases) if ok else None
        breakdown = ", ".join(f"{name} {p['bytes'] / cases / 1024:.1f}" for name, p in
                              sorted(parts.items(), key=lambda kv: -kv[1]["bytes"])) if cases else ""
        target = 247e6 / 10 / 5628 if bench == "familytool" else None
        goals.append(Goal(f"storage, {bench} oracle run folder per case", per_case, target and round(target),
                          False, " B",
                          note=f"{cases} cases, {total / 1e6:.1f} MB in {out[bench]['run_folder_files']} files "
                               f"(KiB per case: {breakdown}); response cache {cache_bytes / 1e6:.1f} MB; "
                               f"-n 2, rc {rc}, {wall:.1f}s"
                               + ("; goal: 1/10 of the 247 MB (5,628 cases) issue 32 measured"
                                  if target else "")))
    figures["storage"] = {"data_dir": str(ns.data_dir), **out}
    return goals


def measure_collection(ns: argparse.Namespace, tmp: Path, figures: dict[str, Any]) -> list[Goal]:
    """``--collect-only`` of every scenario at each size. Linearity is judged on the marginal cost
    per case (the slope between sizes), so a fixed start-up cannot hide a per-case cost that grows
    with the suite; a run that did not collect exactly n cases counts as a miss."""
    out: dict[int, Any] = {}
    for n in ns.collect_sizes:
        # Every scenario (3 cases per record): a third of the records make n cases.
        records = -(-n // 3)
        data = make_toolhop_data(tmp / f"collect-{n}", records)
        cmd = [PY, "-m", "pytest", "suites/toolhop", "--collect-only", "-q", "-p", "no:cacheprovider",
               "-p", "no:randomly", "--data-dir", str(data)]
        wall, rc, tail, rss = timed(cmd)
        found = re.search(r"(\d+) tests? collected", tail)
        collected = int(found.group(1)) if found else None
        ok = rc == 0 and collected == records * 3
        out[n] = {"wall_s": round(wall, 3), "rc": rc, "collected": collected, "ok": ok,
                  "peak_rss_kib": rss, "tail": "" if ok else tail[-300:]}
        shutil.rmtree(data, ignore_errors=True)
    figures["collection"] = out
    sizes = sorted(out)
    all_ok = all(out[n]["ok"] for n in sizes)
    slopes = [(out[b]["wall_s"] - out[a]["wall_s"]) / (b - a) * 1e6 for a, b in zip(sizes, sizes[1:])]
    growth = round(slopes[-1] / slopes[0], 2) if all_ok and len(slopes) > 1 and slopes[0] > 0 else None
    small, large = sizes[-2] if len(sizes) > 2 else sizes[0], sizes[-1]
    per_case = (out[large]["peak_rss_kib"] - out[small]["peak_rss_kib"]) / (large - small)
    figures["collection_us_per_case"] = [round(x, 1) for x in slopes]
    figures["memory_per_case_kib"] = round(per_case, 2)
    ten_k = out.get(10_000, out[sizes[0]])
    return [
        Goal(f"collection of {10_000 if 10_000 in out else sizes[0]:,} cases",
             ten_k["wall_s"] if ten_k["ok"] else None, 3.0, False, "s",
             note=f"{ten_k['collected']} collected, rc {ten_k['rc']}"),
        Goal(f"collection linear to {large:,}: marginal cost growth", growth, 1.3, False,
             note="marginal us/case " + " -> ".join(f"{x:.0f}" for x in slopes) + " over sizes "
                  + ", ".join(f"{n:,}" for n in sizes) + " (1.0 = linear)"),
        Goal("memory per case (collection)", round(per_case, 2) if all_ok else None, 4.0, False,
             "KiB", note=f"peak RSS slope {small:,} -> {large:,}; issue baseline 16 KiB"),
    ]


def measure_sandbox(ns: argparse.Namespace, tmp: Path, figures: dict[str, Any]) -> list[Goal]:
    data = make_toolhop_data(tmp / "data-sbx", ns.sandbox_cases)
    server = FakeEndpoints(SAMPLE, ns.latency)
    report = tmp / "sandbox-report.json"
    try:
        run = efficiency_run(server, data, ns.latency, 64, 0, tmp / "cache-sbx" / "cache",
                             extra=["--toolbench-json", str(report), *ns.sandbox_args],
                             scenario="mandatory")
    finally:
        server.close()
    times: list[float] = []
    walls: list[float] = []
    round_trips: list[float] = []
    if report.exists():
        for result in json.loads(report.read_text())["cases"]:
            times += result.get("details", {}).get("sandbox_worker_ms", [])
            round_trips += result.get("details", {}).get("sandbox_calls_ms", [])
            walls += result.get("details", {}).get("sandbox_wall_ms", [])
    p50 = statistics.median(times) if times and run["ok"] else None  # a failed run is a miss
    figures["sandbox"] = {**run, "tool_calls": len(times), "p50_ms": p50,
                          "round_trip_p50_ms": statistics.median(round_trips) if round_trips else None,
                          "wall_p50_ms": statistics.median(walls) if walls else None,
                          "p95_ms": sorted(times)[int(0.95 * len(times)) - 1] if times else None}
    return [Goal("sandbox per-call p50 in a mandatory run", round(p50, 2) if p50 else None, 5.0,
                 False, "ms", note=f"timed by its worker (hand-off to the confined child -> reply); "
                                   f"{len(times)} tool calls, {run['calls']} model calls, rc {run['rc']}"),
            Goal("sandbox per-call p50, round trip from the harness", round(statistics.median(round_trips), 2)
                 if round_trips else None, None, False, "ms",
                 note="pipes both ways and the harness's GIL (busy with 64 cases) included"),
            Goal("sandbox per-call p50 as the case waits (queue included)",
                 round(statistics.median(walls), 2) if walls else None, None, False, "ms",
                 note="--sandbox-workers default, 64 cases in flight")]


def measure_retrieval(ns: argparse.Namespace, tmp: Path, figures: dict[str, Any]) -> list[Goal]:
    wall, rc, tail, _ = timed([PY, str(REPO / "perf" / "retrieval.py"), "--cache", str(tmp / "emb"),
                               "--json", str(tmp / "retrieval.json")], env={"PYTHONPATH": str(REPO)})
    if rc != 0 or not (tmp / "retrieval.json").exists():
        figures["retrieval"] = {"rc": rc, "tail": tail}
        return [Goal("retrieval benchmark ran", None, 1.0, note=tail.strip().splitlines()[-1][:120] if tail.strip() else "")]
    res = json.loads((tmp / "retrieval.json").read_text())
    figures["retrieval"] = res
    return [Goal(f"retrieval {name}, {mode}", v["queries_per_s"], None, unit="q/s",
                 note=f"{v['queries']} queries, index {v['index_s']}s")
            for name, modes in res.items() for mode, v in modes.items()]


# ----------------------------------------------------------------------------- main
def render(goals: list[Goal]) -> str:
    rows = [("figure", "value", "goal", "met", "note")]
    for g in goals:
        value = "n/a" if g.value is None else f"{g.value:g}{g.unit}"
        goal = "-" if g.target is None else f"{'>=' if g.higher_is_better else '<='} {g.target:g}{g.unit}"
        met = {True: "yes", False: "NO", None: "ref"}[g.met]
        rows.append((g.name, value, goal, met, g.note))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for i, r in enumerate(rows):
        lines.append("  ".join(r[j].ljust(widths[j]) for j in range(4)) + "  " + r[4])
        if i == 0:
            lines.append("-" * (sum(widths) + 8 + 20))
    return "\n".join(lines)


STEPS: dict[str, Callable[[argparse.Namespace, Path, dict[str, Any]], list[Goal]]] = {
    "efficiency": measure_efficiency,
    "endpoints": measure_endpoints,
    "drive": measure_drive,
    "storage": measure_storage,
    "collection": measure_collection,
    "sandbox": measure_sandbox,
    "retrieval": measure_retrieval,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=0.5, help="endpoint latency, seconds")
    parser.add_argument("--cases", type=int, default=1000, help="direct cases at 64 in flight")
    parser.add_argument("--endpoints", type=int, default=4)
    parser.add_argument("--collect-sizes", type=lambda s: [int(x) for x in s.split(",")],
                        default=[1_000, 10_000, 100_000])
    parser.add_argument("--sandbox-cases", type=int, default=200, help="mandatory cases")
    parser.add_argument("--sandbox-args", nargs="*", default=[],
                        help="extra pytest args for the sandbox run, e.g. --sandbox-insecure")
    parser.add_argument("--only", nargs="*", choices=list(STEPS), default=None)
    parser.add_argument("--skip", nargs="*", default=[], help=f"steps to skip ({', '.join(STEPS)}, upstream, sdk)")
    parser.add_argument("--drive-latency", type=float, default=0.01,
                        help="endpoint latency of the drive-rate runs, seconds")
    parser.add_argument("--drive-cases", type=int, default=2000, help="direct cases per drive-rate run")
    parser.add_argument("--data-dir", type=Path, default=SHARED_DATA,
                        help="benchmark files (DIR/<name>/...) for the storage step's oracle runs")
    parser.add_argument("--load", type=int, default=0, metavar="N",
                        help="run every step beside N busy (pure-Python, CPU-bound) processes")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    ns = parser.parse_args()
    figures: dict[str, Any] = {"latency_s": ns.latency, "cases_at_64": ns.cases,
                               "python": platform.python_version(), "cpus": os.cpu_count(),
                               "started": time.time(), "bytecode_cache": True, "load": ns.load,
                               "load_average_at_start": load_average()}
    warm_bytecode()
    goals: list[Goal] = []
    with tempfile.TemporaryDirectory(prefix="toolbench-perf-") as tmpname, busy_load(ns.load):
        tmp = Path(tmpname)
        for name, step in STEPS.items():
            if (ns.only and name not in ns.only) or name in ns.skip:
                continue
            t0 = time.perf_counter()
            print(f"[perf] {name} ...", flush=True)
            try:
                goals += step(ns, tmp, figures)
            except Exception as exc:  # one broken step must not cost the others' figures
                figures[f"{name}_error"] = repr(exc)
                goals.append(Goal(f"{name} step ran", None, 1.0, note=repr(exc)[:120]))
            print(f"[perf] {name} done in {time.perf_counter() - t0:.1f}s", flush=True)
    figures["goals"] = [{"name": g.name, "value": g.value, "target": g.target,
                         "higher_is_better": g.higher_is_better, "met": g.met, "note": g.note}
                        for g in goals]
    figures["load_average_at_end"] = load_average()
    print(f"perf/run.py --load {ns.load} ({ns.load} busy process(es) beside every command); "
          f"{os.cpu_count()} cores; load average at start {figures['load_average_at_start']}, "
          f"at end {figures['load_average_at_end']}; latency {ns.latency}s")
    print(render(goals))
    missed = [g.name for g in goals if g.met is False]
    if ns.json:
        ns.json.parent.mkdir(parents=True, exist_ok=True)
        ns.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
        print(f"figures: {ns.json}")
    print(f"{len(missed)} goal(s) missed" + (": " + "; ".join(missed) if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
