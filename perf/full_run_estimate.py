"""How long a full run takes against an endpoint of fixed latency: measured on ToolHop (all three
scenarios, tools executed in the sandbox) against perf/fake_llm.py, then extrapolated to each
suite's real size (the benchmark READMEs quote the result).

The fake endpoint answers every request after ``--latency`` seconds and plays the gold chain
(hops + 1 requests per tool-using case), so the measured run has the real request pattern of a
model that calls each tool once. The harness's efficiency (ideal wall = requests x latency / in
flight, over the measured wall) is then applied to each suite's request count.

Run: python perf/full_run_estimate.py [--records 256] [--latency 1.0] [--in-flight 64]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import FakeEndpoints, harness_env, make_toolhop_data, pytest_cmd, timed_usage  # noqa: E402

#: Requests of a full run per suite, for a model that calls each tool once and then answers:
#: ToolHop 995 records, hops 3..7 (3,912 tools): direct 1 request, mandatory and free hops + 1;
#: FamilyTool 938 records: one extraction (shared by its four extraction-based cases) + four
#: tool-use requests; ToolBeHonest 350 records x 3 levels x 2 variants, one request each;
#: Meta-Bench (this project's reconstruction): 45 judged turns, one request each.
REQUESTS = {
    "toolhop": 995 + 2 * (3912 + 995),
    "familytool": 938 * 5,
    "toolbehonest": 350 * 6,
    "metabench": 45,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=256)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--in-flight", type=int, default=64)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolbench-estimate-") as tmp:
        data = make_toolhop_data(Path(tmp), ns.records)
        server = FakeEndpoints(data / "toolhop" / "ToolHop.json", ns.latency)
        try:
            cmd = pytest_cmd(data, server.urls, ns.in_flight, Path(tmp) / "cache",
                             scenario="direct,mandatory,free", extra=["-n", "0", "--no-cache"])
            wall, rc, tail, _, cpu = timed_usage(cmd)
            calls = server.stats()["requests"]
        finally:
            server.close()
    n = int(calls)
    ideal = n * ns.latency / ns.in_flight
    efficiency = ideal / wall
    out = {"records": ns.records, "latency_s": ns.latency, "in_flight": ns.in_flight, "rc": rc,
           "requests": n, "wall_s": round(wall, 1), "ideal_s": round(ideal, 1),
           "efficiency": round(efficiency, 3), "harness_cpu_s": round(cpu, 1),
           "full_run_estimate_s": {name: round(r * ns.latency / ns.in_flight / efficiency)
                                   for name, r in REQUESTS.items()}}
    print(json.dumps(out, indent=2))
    if rc != 0:
        print(tail, file=sys.stderr)
    Path(__file__).with_name("results").mkdir(exist_ok=True)
    (Path(__file__).parent / "results" / "full_run_estimate.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
