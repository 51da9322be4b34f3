"""How fast a 10,000-case run opens in ``toolbench view``, in headless Chromium from ``file://``.

Builds a 10,000-case record from a real run (the oracle on the bundled ToolHop sample, run here
with pytest, or ``--from REPORT.json``): its cases repeated under new ids, transcripts and all; the
metrics stay the source run's, the case list is what grows. Builds the site, then opens the run's
page in Debian's chromium (playwright, never a downloaded browser) and prints the time to first
render: from navigation start to the first page of the case list on screen (the
``tb-cases-drawn`` mark static/app.js sets), the median of ``--repeat`` cold loads, plus the
leaderboard's load and opening one case (its chunk file).

    .venv/bin/python perf/view_load.py            # prints the timings, exit 1 over --budget
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def source_record(tmp: Path, given: Path | None) -> dict:
    if given is not None:
        return json.loads(given.read_text())
    report = tmp / "source.json"
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly",
           "-p", "no:cacheprovider", "--data", "sample", "--model", "oracle", "--no-plots",
           "--cache-dir", str(tmp / "cache"), "--runs-dir", str(tmp / "runs"),
           "--toolbench-json", str(report)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    if not report.exists():
        sys.exit(f"the source run failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return json.loads(report.read_text())


def big_record(source: dict, n: int) -> dict:
    cases = source["cases"]
    big = dict(source)
    big["cases"] = [{**c, "case_id": f"{c['case_id']}-x{k}"}
                    for k in range(n // len(cases) + 1) for c in cases][:n]
    big["run"] = {**source["run"], "run_id": f"perf-{n}"}
    return big


def measure(site: Path, key: str, repeat: int) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    chromium = "/usr/bin/chromium"
    if not Path(chromium).exists():
        sys.exit("chromium is not installed (apt-get install -y chromium)")
    run_ms, wall_ms, board_ms, case_ms = [], [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        for _ in range(repeat):
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            page = context.new_page()
            start = time.perf_counter()
            page.goto((site / f"run-{key}.html").as_uri())
            page.wait_for_selector("#cases-table tbody tr")
            wall_ms.append(1000 * (time.perf_counter() - start))
            run_ms.append(page.evaluate(
                "performance.getEntriesByName('tb-cases-drawn')[0].startTime"))
            start = time.perf_counter()
            page.locator("#cases-table tbody a").nth(7).click()
            page.wait_for_selector("#transcript")
            case_ms.append(1000 * (time.perf_counter() - start))
            start = time.perf_counter()
            page.goto((site / "index.html").as_uri())
            page.wait_for_load_state("load")
            board_ms.append(1000 * (time.perf_counter() - start))
            context.close()
        browser.close()
    return {"run_page_first_render_ms": statistics.median(run_ms),
            "run_page_wall_ms": statistics.median(wall_ms),
            "open_case_ms": statistics.median(case_ms),
            "leaderboard_ms": statistics.median(board_ms)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--from", dest="source", type=Path, default=None,
                    help="a --toolbench-json report to grow (default: an oracle run here)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget-ms", type=float, default=2000.0)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from pytest_toolbench.view.site import build_site

    with tempfile.TemporaryDirectory(prefix="view-load-") as tmp_name:
        tmp = Path(tmp_name)
        record = big_record(source_record(tmp, args.source), args.cases)
        report = tmp / "big.json"
        report.write_text(json.dumps(record))
        start = time.perf_counter()
        result = build_site([report], tmp / "site")
        build_s = time.perf_counter() - start
        data = tmp / "site" / "data" / record["run"]["run_id"]
        index_mb = (data / "index.js").stat().st_size / 1e6
        figures = measure(tmp / "site", record["run"]["run_id"], args.repeat)
    figures.update({"cases": args.cases, "build_s": round(build_s, 2),
                    "case_index_mb": round(index_mb, 2), "runs": result.runs})
    print(f"{args.cases} cases: site built in {build_s:.1f} s (case index {index_mb:.1f} MB, "
          f"{args.cases // 50 + (args.cases % 50 > 0)} chunk files)")
    print(f"run page, first render of the case list: {figures['run_page_first_render_ms']:.0f} ms "
          f"(navigation start to the list on screen; wall {figures['run_page_wall_ms']:.0f} ms), "
          f"median of {args.repeat} cold loads in Chromium from file://")
    print(f"open a case (its chunk file): {figures['open_case_ms']:.0f} ms; "
          f"leaderboard: {figures['leaderboard_ms']:.0f} ms")
    ok = figures["run_page_first_render_ms"] <= args.budget_ms
    print(f"{'within' if ok else 'OVER'} the {args.budget_ms:.0f} ms budget")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("TOOLBENCH_DATA", "sample")
    sys.exit(main())
