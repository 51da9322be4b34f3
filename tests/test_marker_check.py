"""``-m`` terms that match no case say which values exist (issue 22)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks import registry
from pytest_toolbench.marker_check import check_markexpr, parse_terms
from pytest_toolbench.session.selection import _mark, case_marks

REPO = Path(__file__).resolve().parents[1]
REGISTERED = {"toolbench", "scenario", "hops", "domain", "toolhop", "skip", "slow"}


@pytest.fixture(scope="module")
def marks() -> list[list]:
    toolhop = registry()["toolhop"]
    cases = toolhop.load_cases(None, toolhop.scenarios)
    return [[d.mark for d in case_marks(toolhop, c)] + [_mark("toolbench", "benchmark", "toolhop").mark]
            for c in cases]


def test_terms_are_typed_as_pytest_types_them() -> None:
    terms = parse_terms("toolhop and (hops(n=3) or not scenario(name='free', x=None))")
    assert [(t.name, dict(t.kwargs)) for t in terms] == [
        ("toolhop", {}), ("hops", {"n": 3}), ("scenario", {"name": "free", "x": None})]


@pytest.mark.parametrize("expr", [
    "hops(n=3)", "toolbench and hops(n=7)", "not scenario(name='free')", "domain(name='Film')",
    "toolhop", "not toolhop", "slow or hops(n=4)", "(hops(n=3) or hops(n=4)) and scenario(name='direct')",
])
def test_correct_selections_give_no_message(marks: list[list], expr: str) -> None:
    dead, _ = check_markexpr(expr, marks, REGISTERED)
    assert dead == []


def test_a_string_for_an_int_label_names_the_values_and_the_fix(marks: list[list]) -> None:
    dead, selects = check_markexpr("hops(n='3')", marks, REGISTERED)
    assert not selects
    assert dead == ["hops(n='3') matches no case: the hops n values of the selected cases are "
                    "3, 4, 5, 6, 7 (numbers: write hops(n=3))"]


def test_a_misspelt_value_or_marker_suggests_the_closest(marks: list[list]) -> None:
    dead, _ = check_markexpr("scenario(name='mandatry')", marks, REGISTERED)
    assert "'direct', 'free', 'mandatory'" in dead[0]
    assert "did you mean scenario(name='mandatory')?" in dead[0]
    dead, _ = check_markexpr("toolhp", marks, REGISTERED)
    assert dead and "did you mean toolhop?" in dead[0]


def test_a_dead_term_beside_a_live_one_still_selects(marks: list[list]) -> None:
    dead, selects = check_markexpr("hops(n=3) or hops(n='4')", marks, REGISTERED)
    assert selects and len(dead) == 1 and dead[0].startswith("hops(n='4')")


def test_the_run_stops_with_a_usage_error_before_any_case(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "--model", "oracle", "-n", "0",
           "-m", "hops(n='3')", "-p", "no:cacheprovider", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out[-3000:]  # pytest's usage error
    assert "hops(n='3')" in out and "3, 4, 5, 6, 7" in out and "write hops(n=3)" in out
    assert "passed" not in out
