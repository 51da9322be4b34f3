"""``toolbench init [DIR]`` (registered by the ``toolbench`` dispatcher, cli.py): write the suites
of every registered benchmark (benchmarks/suite_files.py) into a project, so that
``pytest suites/toolhop`` runs there with the package installed and no checkout.

Exit status: 0 when every file is written or already as it would be written; 1 when a file
there differs and --overwrite was not given (then nothing is written); 2 on a usage error (an
unknown benchmark, a benchmark that cannot have a suite file, a folder that cannot be written).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

DIFFERS = 1
USAGE_ERROR = 2


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    init = subparsers.add_parser(
        "init", help="write the benchmarks' pytest suites (suites/<name>/test_<name>.py) into a "
                     "project",
        description="Write suites/<name>/test_<name>.py for every benchmark, built-in or installed "
                    "(or the ones named), into DIR: the same files as the checkout's suites/, so an "
                    "installed package runs `pytest suites/toolhop ...` with no checkout. A file "
                    "that is already there and differs is left alone (exit 1, nothing written) "
                    "unless --overwrite is given.")
    init.add_argument("folder", nargs="?", type=Path, default=Path("."), metavar="DIR",
                      help="the project folder; suites/ goes in it (default: the current folder)")
    init.add_argument("--benchmark", action="append", default=None, metavar="NAME",
                      help="only this benchmark (repeatable; default: every one `toolbench list` "
                           "lists)")
    init.add_argument("--overwrite", action="store_true",
                      help="replace suite files that differ from what would be written")
    init.set_defaults(func=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    from pytest_toolbench.benchmarks import registry, unknown_benchmark
    from pytest_toolbench.benchmarks.suite_files import plan, suite_path, write

    def fail(message: str, status: int = USAGE_ERROR) -> int:
        print(f"toolbench init: {message}", file=sys.stderr)
        return status

    benchmarks = registry()
    wanted = list(dict.fromkeys(args.benchmark or benchmarks))
    unknown = [name for name in wanted if name not in benchmarks]
    if unknown:
        return fail(unknown_benchmark(unknown[0]))
    if args.folder.exists() and not args.folder.is_dir():
        return fail(f"{args.folder} is not a folder")
    try:
        planned = plan(args.folder, {name: benchmarks[name] for name in wanted},
                       overwrite=args.overwrite)
    except ValueError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot read {exc.filename}: {exc.strerror or exc}")
    differing = [suite for suite in planned if suite.action == "differs"]
    if differing:
        for suite in differing:
            print(f"toolbench init: {suite.path} differs from the {suite.benchmark} suite it would "
                  "write; left alone", file=sys.stderr)
        return fail("nothing written; --overwrite replaces the files that differ", DIFFERS)
    try:
        write(planned)
    except OSError as exc:
        return fail(f"cannot write the suites under {args.folder}: {exc.strerror or exc}")
    for suite in planned:
        print(f"{suite.action:>11}  {suite.path}")
    written = [suite for suite in planned if suite.action != "unchanged"]
    # Run from the project folder: there the node ids are suites/<name>/..., as in a checkout.
    first = suite_path(planned[0].benchmark).parent
    where = "" if args.folder.resolve() == Path.cwd() else f"cd {shlex.quote(str(args.folder))} && "
    print(f"{len(written)} of {len(planned)} suite files written; run one with e.g. "
          f"`{where}pytest {first} --data sample --model oracle`")
    return 0
