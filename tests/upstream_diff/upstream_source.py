"""Upstream functions taken by name from a checkout the user names, and run beside the harness's.

The upstream code is never copied into this project: the scripts of this folder read it from the
path they are given (a clone of the upstream repository), take out the functions they compare
(``ast``, so a module whose imports need a GPU stack is never imported) and run them in a namespace
of their own.
"""

from __future__ import annotations

import argparse
import ast
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def diff_arguments(doc: str, upstream: tuple[str, str], count: tuple[str, int]) -> argparse.ArgumentParser:
    """The options every script here takes: where upstream's code is (``(name, help)``), how many
    generated items (``(--option, default)``), the seed and how many differences to print."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument(upstream[0], type=Path, help=upstream[1])
    parser.add_argument(count[0], type=int, default=count[1], help="how many to generate")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--show", type=int, default=10, help="differences printed in full")
    return parser


def check_runs(runs: int, show: int, one_run: Callable[[Path], list[str]], against: str) -> int:
    """``one_run`` (given a scratch folder, it returns the differences it found) ``runs`` times;
    prints each differing run's first ``show`` differences and a total; the differing runs."""
    differing = 0
    for k in range(runs):
        with tempfile.TemporaryDirectory(prefix="toolbench-diff-") as folder:
            found = one_run(Path(folder))
        if found:
            differing += 1
            print(f"run {k}: " + "; ".join(found[:show]))
    if runs:
        print(f"{runs} whole runs: {differing} differ from upstream's {against}")
    return differing


def upstream_functions(path: Path, names: set[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """``namespace`` with the top-level functions, classes and assigned names ``names`` of
    ``path`` defined in it, in the file's order.

    A module that does not parse as a whole (upstream FamilyTool's post-processing script uses
    Python 3.12 f-string quoting below its metric functions) is read up to the top-level
    definition holding the first line the parser refuses; the names must all lie above it."""
    source = path.read_text(encoding="utf-8")
    tree = _parse_prefix(source)
    taken = [(node, _defined_name(node)) for node in tree.body]
    taken = [(node, name) for node, name in taken if name in names]
    missing = names - {name for _, name in taken}
    if missing:
        raise SystemExit(f"{path}: no top-level {sorted(missing)} (is it the upstream file?)")
    code = "\n\n".join(ast.get_source_segment(source, node) or "" for node, _ in taken)  # file order
    exec(compile(code, str(path), "exec"), namespace)  # noqa: S102 - the user's own upstream checkout
    return namespace


def _defined_name(node: ast.stmt) -> str | None:
    """The name a top-level statement defines or fills in: a function, a class, ``NAME = ...`` or
    ``NAME[key] = ...`` (upstream ToolBeHonest builds ``subtask_groups`` in two statements)."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        target = target.value if isinstance(target, ast.Subscript) else target
        return target.id if isinstance(target, ast.Name) else None
    return None


def _parse_prefix(source: str) -> ast.Module:
    """``source`` parsed; where it does not parse, its top-level definitions above the one that
    holds the first line the parser refuses."""
    lines = source.splitlines(keepends=True)
    while True:
        try:
            return ast.parse("".join(lines))
        except SyntaxError as exc:
            bad = min(exc.lineno or len(lines), len(lines))
            tops = [i for i in range(bad) if lines[i].startswith(("def ", "class ", "@"))]
            if not tops:
                raise
            lines = lines[: tops[-1]]
