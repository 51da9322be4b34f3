"""``toolbench runs`` and ``toolbench prune`` (registered by the ``toolbench`` dispatcher, cli.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_toolbench.counting import counted
from pytest_toolbench.defaults import DEFAULT_VIEW_DIR, VIEW_MARKER
from pytest_toolbench.runs import prune as pruning
from pytest_toolbench.runs.listing import render_runs
from pytest_toolbench.runs.store import (
    CACHE_DIR_HELP,
    DEFAULT_RUNS_DIR,
    RUNS_DIR_HELP,
    find_cache_dir,
    list_runs,
    locate_runs_dir,
)
from pytest_toolbench.text_table import output_width


def count(text: str) -> int:
    """A --limit value: 1 or more (``runs[:-3]`` once listed all but the oldest three, and 0
    printed "no runs found" beside a full history). argparse names the type by this function."""
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n}: must be at least 1")
    return n


def _runs_dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs-dir", type=Path, default=None,
                   help=RUNS_DIR_HELP)


def _cache_dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache-dir", type=Path, default=None,
                   help=CACHE_DIR_HELP)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    runs = subparsers.add_parser("runs", help="list past runs, newest first",
                                 description="List past runs (run id, date, model, suites, cases, "
                                             "headline metric per scenario, status), newest first.")
    _runs_dir_arg(runs)
    runs.add_argument("--json", action="store_true", help="print the index entries as JSON")
    runs.add_argument("-n", "--limit", type=count, default=None, help="show only the newest N runs")
    runs.set_defaults(func=cmd_runs)

    prune = subparsers.add_parser(
        "prune", help="remove old run folders, response-cache entries and kept parsed data",
        description="Remove run folders and response-cache entries older than --older-than, then "
                    "the oldest ones until the total is under --max-size. Running runs are kept.")
    _runs_dir_arg(prune)
    _cache_dir_arg(prune)
    prune.add_argument("--older-than", default=None, metavar="AGE",
                       help="remove items last written longer ago than AGE: a number with s, min, h, d or "
                            "w (e.g. 30d, 12h, 90min, 2w; a bare number is days; 'm' only from 60 "
                            "up, e.g. 90m: 1m could mean a month and is refused)")
    prune.add_argument("--max-size", default=None, metavar="SIZE",
                       help="then remove the oldest items until runs + cache fit in SIZE "
                            "(e.g. 2GB, 500MB, 1GiB)")
    prune.add_argument("--only", choices=["runs", "cache"], default=None,
                       help="prune only run folders or only cache entries (default: both)")
    prune.add_argument("--dry-run", action="store_true", help="print what would go, remove nothing")
    prune.set_defaults(func=cmd_prune)


def _note_missing(command: str, folders: list[tuple[Path, bool]]) -> None:
    """A folder the user named (an option, or ``$TOOLBENCH_RUNS_DIR``) that does not exist, or is
    a file, is named on stderr: a mistyped path would otherwise read as an empty history. Not an
    error: a CI step may list or prune before the first run has made the folder."""
    for folder, named in folders:
        if named and not folder.is_dir():
            what = "not a folder" if folder.exists() else "no such folder"
            print(f"toolbench {command}: note: {what}: {folder}", file=sys.stderr)


def cmd_runs(args: argparse.Namespace) -> int:
    runs_dir, named = locate_runs_dir(args.runs_dir)  # (the settings file read once)
    _note_missing("runs", [(runs_dir, named)])
    if not runs_dir.is_dir() and not args.json and not named:
        print(f"no runs found: no {DEFAULT_RUNS_DIR} in this folder or above it "
              "(--runs-dir names a runs folder)")
        return 0
    runs = list_runs(runs_dir)
    if args.limit is not None:
        runs = runs[: args.limit]
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in runs], indent=2))
    else:
        sys.stdout.write(render_runs(runs, output_width()))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    if args.older_than is None and args.max_size is None:
        print("toolbench prune: give --older-than AGE and/or --max-size SIZE", file=sys.stderr)
        return 2
    try:
        older = pruning.parse_duration(args.older_than) if args.older_than is not None else None
        size = pruning.parse_size(args.max_size) if args.max_size is not None else None
    except ValueError as exc:
        print(f"toolbench prune: {exc}", file=sys.stderr)
        return 2
    only = {"runs": "run", "cache": "cache"}.get(args.only or "")
    cache_dir, (runs_dir, named) = find_cache_dir(args.cache_dir), locate_runs_dir(args.runs_dir)
    _note_missing("prune", [(runs_dir, named and only != "cache"),
                            (cache_dir, args.cache_dir is not None and only != "run")])
    items = pruning.collect(cache_dir, runs_dir, only=only)  # type: ignore[arg-type]
    removed = pruning.plan(items, older_than_s=older, max_size=size)
    if not args.dry_run:
        pruning.apply(removed, cache_dir)
    foreign = pruning.foreign_folders(runs_dir) if only != "cache" else []
    if foreign:  # a runs folder named by mistake (the project, a home): its folders are not runs
        names = ", ".join(d.name for d in foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        print(f"toolbench prune: note: left alone {counted(len(foreign), 'folder')} of {runs_dir} "
              f"that are not runs ({names})", file=sys.stderr)
    sys.stdout.write(pruning.describe(removed, items, dry_run=args.dry_run))
    _note_stale_view(runs_dir, sum(item.kind == "run" for item in removed), args.dry_run)
    return 0


def _note_stale_view(runs_dir: Path, runs_removed: int, dry_run: bool) -> None:
    """The project's ``toolbench view`` site keeps its own copy of each run it shows: pruned
    runs stayed in it, their pages and case data on disk, with no word of it."""
    site = runs_dir.parent / Path(DEFAULT_VIEW_DIR).name  # where `toolbench view` builds
    if runs_removed and (site / VIEW_MARKER).is_file():
        will = "would still show" if dry_run else "still shows"
        print(f"toolbench prune: note: the site at {site} {will} the "
              f"{counted(runs_removed, 'removed run')} (pages and case data) until `toolbench "
              "view` builds it again", file=sys.stderr)
