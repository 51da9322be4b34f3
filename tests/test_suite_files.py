"""``toolbench init`` writes each benchmark's suite into a project (benchmarks/suite_files.py); the
checkout's suites/ are exactly those files. The installed package running them with no checkout
is tests/test_wheel.py's."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import BaseModel

from pytest_toolbench.benchmarks import registry
from pytest_toolbench.benchmarks.suite_files import suite_path, suite_source
from pytest_toolbench.cli import main

REPO = Path(__file__).resolve().parents[1]
BUILT_IN = ("toolhop", "familytool", "toolbehonest", "metabench")


@pytest.mark.parametrize("name", BUILT_IN)
def test_the_checkouts_suite_is_what_init_writes(name: str) -> None:
    """One source for both: a change to the template shows here until `toolbench init
    --overwrite` is run in the checkout."""
    assert (REPO / suite_path(name)).read_text(encoding="utf-8") == suite_source(registry()[name])


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_suite_file_is_one_marked_test_of_its_benchmark(name: str) -> None:
    tree = ast.parse(suite_source(registry()[name]))
    (function,) = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert function.name == f"test_{name}"
    assert [a.arg for a in function.args.args] == ["case", "case_result"]
    assert f'pytestmark = pytest.mark.toolbench("{name}")' in suite_source(registry()[name])
    assert all(len(line) <= 100 for line in suite_source(registry()[name]).splitlines())


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_init_writes_every_suite_then_leaves_them_alone(tmp_path: Path, capsys) -> None:
    assert main(["init", str(tmp_path)]) == 0
    assert _files(tmp_path) == {str(suite_path(n)): suite_source(registry()[n]) for n in BUILT_IN}
    out = capsys.readouterr().out
    # the hint runs from the project folder, where node ids are suites/<name>/... as in a checkout
    assert f"4 of 4 suite files written; run one with e.g. `cd {tmp_path} && pytest suites/toolhop " in out
    assert main(["init", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count("unchanged") == 4


def test_a_file_that_differs_stops_init_before_it_writes_anything(tmp_path: Path, capsys) -> None:
    """A project's own edit is never replaced silently, and no other suite is written beside the
    refusal (the folder stays as it was)."""
    edited = tmp_path / suite_path("familytool")
    edited.parent.mkdir(parents=True)
    edited.write_text("# my own\n", encoding="utf-8")
    assert main(["init", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{edited} differs from the familytool suite" in err and "--overwrite" in err
    assert _files(tmp_path) == {str(suite_path("familytool")): "# my own\n"}
    assert main(["init", str(tmp_path), "--overwrite", "--benchmark", "familytool"]) == 0
    assert "overwritten" in capsys.readouterr().out
    assert _files(tmp_path) == {str(suite_path("familytool")): suite_source(registry()["familytool"])}


@pytest.mark.parametrize("args, message", [
    (["--benchmark", "nope"], "no benchmark 'nope' (registered: toolhop, familytool"),
    ([], "is not a folder"),
])
def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path, capsys, args: list[str],
                                             message: str) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["init", str(target if not args else tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_folder_that_cannot_be_made_is_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "file").write_text("x")
    assert main(["init", str(tmp_path / "file" / "below")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("toolbench init: cannot write the suites under") and err.count("\n") == 1


class _NoOptions(BaseModel):
    pass


def _benchmark(name: str, title: str = "Mine", scenario: str = "a") -> SimpleNamespace:
    return SimpleNamespace(name=name, title=title, scenarios=(scenario,), label_markers={"topic": "name"},
                           options_model=_NoOptions)


def test_a_benchmark_without_options_names_no_flags() -> None:
    text = suite_source(_benchmark("mine"))
    assert "--mine-" not in text and "-m \"scenario(name='a')\", -m \"topic(name=...)\"" in text
    assert "def test_mine(case, case_result):" in text


@pytest.mark.parametrize("name", ["my-bench", "a.b", "x y"])
def test_a_name_that_makes_no_test_function_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="is not a Python name"):
        suite_source(_benchmark(name))


def test_a_suite_path_that_cannot_be_read_is_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / suite_path("toolhop")).mkdir(parents=True)  # a folder where the file goes
    assert main(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"toolbench init: cannot read {tmp_path / suite_path('toolhop')}: Is a directory\n"


def test_an_installed_benchmarks_quotes_and_backslashes_stay_inside_the_docstring() -> None:
    title, scenario = 'He said """hi""" \\', 'a"b\\'
    tree = ast.parse(suite_source(_benchmark("mine", title, scenario)))
    docstring = ast.get_docstring(tree)
    assert docstring is not None and docstring.startswith(f"{title}: one test per case")
    assert f"scenario(name='{scenario}')" in docstring


@pytest.mark.parametrize("settings", [
    'python_files = ["check_*.py"]', 'python_files = ["test_*.py", "check_*.py"]',
    'python_functions = ["check_*"]', 'python_files = ["*_test.py"]\npython_functions = ["check"]',
    'python_functions = ["check_*", "test_*"]'])
def test_a_project_naming_its_tests_otherwise_still_runs_the_suites(
        tmp_path: Path, settings: str) -> None:
    """A project whose ``python_files`` leaves out ``test_*.py``, or whose ``python_functions``
    leaves out ``test_*``, collected nothing from ``pytest suites/toolhop`` ("no case ran (the
    selection, -k/-m or --lf left none)"); one whose patterns take it in gets it once, not
    twice."""
    import subprocess
    import sys

    assert main(["init", str(tmp_path), "--benchmark", "toolhop"]) == 0
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.pytest.ini_options]\n{settings}\n", encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/toolhop", "--data", "sample", "--model", "oracle",
         "--limit", "1", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "--no-progress"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "3 passed" in run.stdout
