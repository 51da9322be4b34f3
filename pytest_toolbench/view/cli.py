"""``toolbench view`` and ``toolbench list`` (registered by the ``toolbench`` dispatcher, cli.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_toolbench.counting import counted
from pytest_toolbench.defaults import DEFAULT_VIEW_DIR
from pytest_toolbench.runs.store import RUNS_DIR_DEFAULT_TEXT, locate_runs_dir

#: Where the site goes without --out, from where the command runs; beside the nearest
#: ``.toolbench/runs`` instead when that is the runs folder found (the project's
#: ``.toolbench/view`` from any subfolder, as the runs are found from there).
DEFAULT_OUT = Path(DEFAULT_VIEW_DIR)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    view = subparsers.add_parser(
        "view", help="build a static site of past runs (leaderboard, runs, cases, side by side)",
        description="Build a static HTML site from run records: a leaderboard (one table per data "
                    "set), each run's metrics, breakdowns, gates and cases, and two runs side by "
                    "side. It opens from disk (file://, no server), e.g. as a downloaded CI "
                    "artifact.")
    view.add_argument("paths", nargs="*", type=Path, metavar="RUNS_DIR",
                      help="runs folders, run folders or --toolbench-json files (default: "
                           f"{RUNS_DIR_DEFAULT_TEXT})")
    # The other commands name the runs folder by --runs-dir: the same words work here.
    view.add_argument("--runs-dir", dest="runs_dirs", type=Path, action="append", default=[],
                      metavar="RUNS_DIR", help="a runs folder, as the plugin's --runs-dir and the "
                                               "other toolbench commands take it (repeatable; the "
                                               "same as a RUNS_DIR argument)")
    view.add_argument("--out", type=Path, default=None,
                      help=f"the site's folder (default: {DEFAULT_OUT} beside the nearest "
                           ".toolbench/runs when the runs are read from there, else in the "
                           "current folder)")
    view.add_argument("--serve", action="store_true",
                      help="then serve it on http://127.0.0.1:PORT until Ctrl-C")
    view.add_argument("--port", type=port, default=8000,
                      help="port for --serve (default 8000; 0: any free port)")
    view.add_argument("--max-pairs", type=int, default=None,
                      help="most side-by-side pages (each a paired bootstrap; default 60)")
    view.set_defaults(func=cmd_view)

    from pytest_toolbench.view.catalog import add_list_parser

    add_list_parser(subparsers)


def port(text: str) -> int:
    """A --port value (argparse names the type by this function: "invalid port value")."""
    number = int(text)
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{number} is not a port (0 to 65535)")
    return number


def cmd_view(args: argparse.Namespace) -> int:
    from pytest_toolbench.output_paths import check_folder
    from pytest_toolbench.view.site import MAX_PAIRS, build_site
    from pytest_toolbench.view.site_folder import SiteFolderError, out_folder_problem

    def fail(msg: str) -> int:
        print(f"toolbench view: {msg}", file=sys.stderr)
        return 2

    paths = [*args.paths, *args.runs_dirs]
    if not paths:
        found, named = locate_runs_dir(None)
        paths = [found]
        if args.out is None and not named:  # from a subfolder: the project's view, not a new one
            args.out = found.parent / DEFAULT_OUT.name
    if args.out is None:
        args.out = DEFAULT_OUT
    missing = [p for p in paths if not p.exists()]
    if missing:
        return fail(f"no such file or folder: {missing[0]}")
    if args.max_pairs is not None and args.max_pairs < 0:
        return fail(f"--max-pairs {args.max_pairs}: must be 0 or more")
    # The site's folder before the runs are read (seconds for a large history): one the view
    # did not build is refused, since a build clears its data/ and static/ first.
    why = out_folder_problem(args.out)
    if why is not None:
        return fail(f"--out {args.out}: {why}")
    try:
        check_folder(args.out, "--out")
    except ValueError as exc:
        return fail(str(exc))
    httpd = None
    if args.serve:  # bound first: a port in use is said now, not after the build
        from pytest_toolbench.view.serve import bind

        try:
            httpd = bind(args.out, args.port)
        except OSError as exc:
            return fail(f"--port {args.port}: cannot serve on 127.0.0.1:{args.port} "
                        f"({exc.strerror or exc}); give another --port, or open the site from disk")
    try:
        result = build_site(paths, args.out, max_pairs=args.max_pairs
                            if args.max_pairs is not None else MAX_PAIRS)
    except (OSError, SiteFolderError) as exc:  # a write failed, or the folder changed since
        if httpd is not None:
            httpd.server_close()
        if isinstance(exc, OSError):
            return fail(f"--out {args.out}: the site was not written ({exc.strerror or exc}: "
                        f"{exc.filename or args.out})")
        return fail(f"--out {exc}")
    for line in result.skipped:
        print(f"toolbench view: skipped {line}", file=sys.stderr)
    print(f"toolbench view: {counted(result.runs, 'run')}, "
          f"{counted(result.pairs, 'side-by-side page')} in "
          f"{result.seconds:.1f} s")
    print(f"open {Path(result.index).resolve().as_uri()}")
    if httpd is not None:
        from pytest_toolbench.view.serve import serve

        serve(httpd, Path(result.out))
    return 0
