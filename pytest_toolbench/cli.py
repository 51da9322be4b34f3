"""The ``toolbench`` command: a thin argparse dispatcher.

Each subcommand lives in its own module, which exposes ``add_parser(subparsers)``: it adds its
parser and sets ``func(args) -> int`` as the parser's default. To add a subcommand, add its
module to :data:`SUBCOMMANDS`. ``python -m pytest_toolbench.cli`` works as well as the script.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: Modules that register a subcommand, in help order.
SUBCOMMANDS: tuple[str, ...] = (
    "pytest_toolbench.compare.cli",
    "pytest_toolbench.runs.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolbench", description="pytest-toolbench: work with recorded benchmark runs"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    return int(func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
