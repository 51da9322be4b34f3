"""``toolbench finish RUN``: write the report of a run killed before its end (session/killed_run.py).

Registered by the ``toolbench`` dispatcher (cli.py). Lives beside the session's end because it
scores with the same code (session/finish.py), which the ``runs`` commands below it may not use.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_toolbench.runs.store import RUNS_DIR_ENV, DEFAULT_RUNS_DIR, find_runs_dir

#: Exit status of a run that cannot be finished (the message says why), as other commands' 2.
REFUSED = 2


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    finish = subparsers.add_parser(
        "finish", help="write the report of a run killed before its end (SIGKILL, OOM, a lost "
                       "CI runner)",
        description="Score a run that was killed before its end from the results it journalled, "
                    "as its own end would have: merge the xdist workers' journals into the run's, "
                    "compute the metrics and write its report.json and run.json, marked partial "
                    "(interrupted: killed), so `toolbench compare`, `view` and --baseline read "
                    "it, naming the selected cases left without a result. Refused for a "
                    "run that has its report, one still running, and one started on another "
                    "host (--force).")
    finish.add_argument("run", metavar="RUN", help="the run id as `toolbench runs` prints it (or "
                                                   "a unique prefix of one), or its folder")
    finish.add_argument("--runs-dir", type=Path, default=None,
                        help=f"the plugin's --runs-dir (default ${RUNS_DIR_ENV}, else the nearest "
                             f"{DEFAULT_RUNS_DIR} at or above the current folder)")
    finish.add_argument("--force", action="store_true",
                        help="finish a run started on another host (sharing this runs folder) "
                             "that is known to be gone")
    finish.set_defaults(func=cmd_finish)


def cmd_finish(args: argparse.Namespace) -> int:
    from pytest_toolbench.compare.run_refs import resolve_run_dir
    from pytest_toolbench.runs.listing import render_runs
    from pytest_toolbench.results.safe_text import safe_text
    from pytest_toolbench.session.killed_run import finish_killed_run
    from pytest_toolbench.text_table import output_width

    try:
        folder = Path(args.run)
        if "/" not in args.run and not (folder / "run.json").is_file():  # a run id, not its folder
            folder = resolve_run_dir(args.run, find_runs_dir(args.runs_dir))
        done = finish_killed_run(folder, force=args.force)
    except ValueError as exc:  # KilledRunError, RunLoadError
        print(f"toolbench finish: {safe_text(str(exc))}", file=sys.stderr)
        return REFUSED
    for note in done.notes:
        print(f"note: {safe_text(note)}")
    if done.record is not None:
        print(f"run {done.index.run_id}: {len(done.record.cases)} results scored from its journal; "
              f"report written: {done.index.report}")
    sys.stdout.write(render_runs([done.index], output_width()))
    return 0
