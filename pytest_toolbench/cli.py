"""The ``toolbench`` command: a thin argparse dispatcher.

Each subcommand lives in its own module, which exposes ``add_parser(subparsers)``: it adds its
parser and sets ``func(args) -> int`` as the parser's default. To add a subcommand, add its
module to :data:`SUBCOMMANDS`. ``python -m pytest_toolbench.cli`` works as well as the script.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

#: Modules that register a subcommand, in help order.
SUBCOMMANDS: tuple[str, ...] = (
    "pytest_toolbench.compare.cli",
    "pytest_toolbench.runs.cli",
    "pytest_toolbench.session.finish_cli",
    "pytest_toolbench.datasets.cli",
    "pytest_toolbench.view.cli",
    "pytest_toolbench.benchmarks.init_cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolbench", description="pytest-toolbench: work with recorded benchmark runs and the benchmarks' data"
    )
    # what a bug report quotes (it was "unrecognized arguments: --version"); worked out only
    # when asked (package metadata: every command would pay for it)
    parser.add_argument("--version", action="store_true",
                        help="print the versions of pytest-toolbench, Python and pytest")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(name).add_parser(sub)
    return parser


def version_line() -> str:
    """``toolbench (pytest-toolbench 0.1.0, Python 3.11.7, pytest 9.2.0)``: the versions a
    result depends on most."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    from pytest_toolbench import __version__

    try:
        pytest_version = version("pytest")
    except PackageNotFoundError:  # (a harness without pytest cannot run; say so, not crash)
        pytest_version = "not installed"
    return (f"toolbench (pytest-toolbench {__version__}, Python {platform.python_version()}, "
            f"pytest {pytest_version})")


#: Exit status when the reader of our output went away (``toolbench runs | head``): the
#: Python docs' choice for EPIPE (library/signal.html, "Note on SIGPIPE").
BROKEN_PIPE = 1


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, but an argument no parser knows is refused by the subcommand's
    parser (``usage: toolbench list ...``): argparse refuses it at the top level, whose usage
    (``toolbench [-h] [--version] COMMAND ...``) names none of the subcommand's options."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        innermost(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def innermost(parser: argparse.ArgumentParser,
              args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)subcommand ``args`` chose: ``toolbench data list``'s for
    ``data list``; ``parser`` itself when none was chosen."""
    while True:
        chooser = next((a for a in parser._actions  # argparse keeps its subparsers only there
                        if isinstance(a, argparse._SubParsersAction)), None)
        chosen = getattr(args, chooser.dest, None) if chooser else None
        if chooser is None or chosen not in chooser.choices:
            return parser
        parser = chooser.choices[chosen]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    if args.version:
        print(version_line())
        return 0
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        status = int(func(args) or 0)
        sys.stdout.flush()  # a pipe closed early fails here, inside the handler, not at exit
    except BrokenPipeError:
        return _reader_gone()
    _warn_left_out()
    return status


def _warn_left_out() -> None:
    """A package's benchmark, pins or provider that did not load: the command went on without
    it (entry_points.load_group); say so on stderr, as pytest's warnings summary does."""
    from pytest_toolbench.entry_points import left_out

    for refused in left_out():
        print(f"toolbench: warning: {refused.text()}", file=sys.stderr)


def _reader_gone() -> int:
    """The Python docs' recipe: point stdout at devnull so the interpreter's own flush at exit
    cannot raise again (a second traceback), then exit quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
