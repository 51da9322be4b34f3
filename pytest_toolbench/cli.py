"""The ``toolbench`` command: one argparse dispatcher, each subcommand registered by its module."""

from __future__ import annotations

import argparse
import sys

from pytest_toolbench.runs import cli as runs_cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="toolbench", description="pytest-toolbench utilities")
    subparsers = parser.add_subparsers(dest="command", required=True)
    runs_cli.add_parser(subparsers)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
