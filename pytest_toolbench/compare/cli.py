"""``toolbench compare A B [C ...]``: compare recorded runs (report files or run ids) with the
first one."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_toolbench.runs.store import RUNS_DIR_HELP, find_runs_dir

#: Exit status for unreadable input (argparse itself uses 2 for a bad command line).
INPUT_ERROR = 2
#: Exit status for runs refused as not comparable (different data, no case in common,
#: different benchmarks), as pytest's usage error, which a refused --baseline gives.
NOT_COMPARABLE = 4


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "compare",
        help="compare runs (--toolbench-json reports) with paired statistics",
        description=(
            "Compare each run with the first: per benchmark, scenario, metric and subgroup, each "
            "run's value with its CI, the paired difference (run - first) over the cases both "
            "runs scored with a paired bootstrap interval, and McNemar's test for 0/1 outcomes. "
            "Cases pair on benchmark + case id; cases in one run only are counted."
        ),
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="two or more runs, each a report file "
                   "(--toolbench-json), a run folder, or a run id as `toolbench runs` prints it "
                   "(or a unique prefix of one); the first is the reference")
    p.add_argument("--runs-dir", type=Path, default=None,
                   help=f"where run ids are looked up: {RUNS_DIR_HELP}")
    p.add_argument("--json", dest="json_out", metavar="OUT", default=None,
                   help="also write the comparison as JSON")
    p.add_argument("--plot", metavar="OUT.png", default=None,
                   help="also write a model-comparison bar chart with CI error bars")
    p.add_argument("--plot-subgroups", action="store_true",
                   help="include subgroup rows in the chart (default: top-level metrics only)")
    p.add_argument("--bootstrap-samples", type=int, default=2000,
                   help="paired bootstrap resamples (default 2000)")
    p.add_argument("--allow-different-data", action="store_true",
                   help="compare runs on different data (another fingerprint, real vs sample, "
                        "another revision) or with no case in common, which are otherwise refused "
                        "(exit 4); every output then says so")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="interval confidence level (default 0.95)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_toolbench.compare.core import compare_with_registry
    from pytest_toolbench.compare.load import load_runs
    from pytest_toolbench.compare.plot import plot_comparison
    from pytest_toolbench.compare.render import comparison_text
    from pytest_toolbench.compare.run_refs import (DifferentBenchmarksError,
                                                   check_same_benchmarks, repeated_reports,
                                                   resolve_run)
    from pytest_toolbench.text_table import output_width

    def fail(msg: str) -> int:
        print(f"toolbench compare: {msg}", file=sys.stderr)
        return INPUT_ERROR

    if len(args.runs) < 2:
        return fail("need at least two run reports")
    if args.bootstrap_samples < 1:
        return fail(f"--bootstrap-samples {args.bootstrap_samples}: must be at least 1")
    if not 0.0 < args.confidence < 1.0:
        return fail(f"--confidence {args.confidence}: must be between 0 and 1")
    try:
        runs_dir = find_runs_dir(args.runs_dir)
        paths = [resolve_run(ref, runs_dir) for ref in args.runs]
        runs = load_runs(paths)
        check_same_benchmarks(runs)
    except DifferentBenchmarksError as exc:  # no case can pair: refused as no case in common
        print(f"toolbench compare: {exc}", file=sys.stderr)
        return NOT_COMPARABLE
    except ValueError as exc:  # RunLoadError included
        return fail(str(exc))
    from pytest_toolbench.compare.render import letter
    from pytest_toolbench.compare.same_data import comparison_mismatches, run_name
    from pytest_toolbench.results.provenance import allowed_note, refusal_line
    from pytest_toolbench.results.safe_text import safe_text

    names = [run_name(r, letter(i)) for i, r in enumerate(runs)]
    for note in repeated_reports(paths, names):  # a typo'd id or a pasted path: said, not refused
        print(f"toolbench compare: note: {safe_text(note)}", file=sys.stderr)
    differ = comparison_mismatches(runs, names)
    if differ and not args.allow_different_data:
        print(f"toolbench compare: {safe_text(refusal_line(differ[0]))}", file=sys.stderr)
        return NOT_COMPARABLE
    comp = compare_with_registry(runs, n_boot=args.bootstrap_samples, seed=args.seed,
                                 confidence=args.confidence)
    comp.different_data = [allowed_note(d) for d in differ]
    sys.stdout.write(comparison_text(comp, width=output_width()))
    if args.json_out:
        from pytest_toolbench.fileio import atomic_write_text

        atomic_write_text(Path(args.json_out),
                          json.dumps(comp.model_dump(mode="json"), indent=2) + "\n")
        print(f"comparison JSON: {args.json_out}")
    if args.plot:
        try:
            plot_comparison(comp, args.plot, subgroups=args.plot_subgroups)
        except ValueError as exc:
            return fail(str(exc))
        print(f"comparison chart: {args.plot}")
    return 0
