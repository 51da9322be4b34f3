"""A fifth benchmark from one folder (tests/toy_benchmark/: its module, a data file, a suite) plus
its registry line (the ``pytest_toolbench.benchmarks`` entry point in that folder's
pyproject.toml), run end to end in a pytest subprocess with the oracle model: collected, run,
scored, its metric in the JSON report and the terminal, its report table, its own selection
option, and a gate on its metric. No fixture file, no edit of the package: the folder is copied
out of this repository and run there, with the harness's fixtures from the package.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from installed_folder import install_project

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "tests" / "toy_benchmark"


@pytest.fixture(scope="module")
def toy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy folder outside this repository (no conftest.py, no fixtures/ above it)."""
    folder = tmp_path_factory.mktemp("outside") / "toy_benchmark"
    shutil.copytree(TOY, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


@pytest.fixture(scope="module")
def toy_env(tmp_path_factory: pytest.TempPathFactory, toy_dir: Path) -> dict[str, str]:
    """The environment of an interpreter where the toy package is installed: its entry point
    line (read from its pyproject.toml) in a dist-info folder on the path, as installing the
    folder would write it."""
    env = install_project(TOY, tmp_path_factory.mktemp("site"), toy_dir)
    return {**env, "TOY_DIR": str(toy_dir)}


def run_toy(env: dict[str, str], tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path / "report.json"
    toy_dir = Path(env["TOY_DIR"])
    # No conftest above this folder: the harness's fixtures come with the plugin itself.
    cmd = [sys.executable, "-m", "pytest", "suites/toy", "--model", "oracle",
           "--toolbench-json", str(report), "-p", "no:cacheprovider", "--runs-dir", str(tmp_path / "runs"),
           "-n", "0", *args]
    proc = subprocess.run(cmd, cwd=toy_dir, env=env, capture_output=True, text=True, timeout=300)
    data = json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}
    return proc, data


def test_the_toy_benchmark_runs_end_to_end(toy_env: dict[str, str], tmp_path: Path) -> None:
    proc, report = run_toy(toy_env, tmp_path, "-v")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    ids = [c["case_id"] for c in report["cases"]]
    assert ids == sorted(f"toy-q{i}-{s}" for s in ("plain", "terse") for i in (1, 2, 3))  # report: by id
    ran = [line.split("::")[1].split(" ")[0] for line in proc.stdout.splitlines() if "::test_toy[" in line]
    assert ran == [f"test_toy[toy-q{i}-{s}]" for s in ("plain", "terse") for i in (1, 2, 3)]  # load order
    assert {c["outcome"] for c in report["cases"]} == {"passed"}
    assert all(c["model_calls"] == 1 and c["values"] == {"correct": 1.0} for c in report["cases"])
    scenarios = report["metrics"]["scenarios"]
    assert {(s["benchmark"], s["scenario"]) for s in scenarios} == {("toy", "plain"), ("toy", "terse")}
    for s in scenarios:
        assert s["metrics"]["accuracy"]["value"] == 1.0, s
    (table,) = [t for t in report["metrics"]["tables"] if t["benchmark"] == "toy"]
    assert table["values"] == {"arithmetic/correct": 4.0, "geography/correct": 2.0}
    assert "6 passed" in out and "toy" in out and "accuracy" in out  # the terminal's metric table


def test_the_toy_selection_option_and_gates(toy_env: dict[str, str], tmp_path: Path) -> None:
    """--toy-topic (derived from its options model) narrows the selection through its ``select``;
    a gate on its metric passes, an unmet one fails the run with the gates' exit code."""
    proc, report = run_toy(toy_env, tmp_path, "--toy-topic", "arithmetic",
                           "--gate", "toy.plain.accuracy>=1.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [c["case_id"] for c in report["cases"]] == [
        "toy-q1-plain", "toy-q1-terse", "toy-q3-plain", "toy-q3-terse"]
    assert [g["passed"] for g in report["gates"] if g["kind"] == "metric"] == [True]

    proc, report = run_toy(toy_env, tmp_path, "--scenario", "terse", "--gate", "toy.terse.accuracy<0.5")
    assert proc.returncode == 10, proc.stdout + proc.stderr  # ToolbenchExit.GATES_FAILED
    assert [g["passed"] for g in report["gates"] if g["kind"] == "metric"] == [False]
    assert len(report["cases"]) == 3


def test_an_unknown_benchmark_gate_names_the_registered_toy(toy_env: dict[str, str], tmp_path: Path) -> None:
    proc, _ = run_toy(toy_env, tmp_path, "--gate", "toy.plain.nonsense>=1")
    assert proc.returncode != 0
    assert "nonsense" in proc.stdout + proc.stderr


@pytest.mark.parametrize("name, message", [
    ("toolhop", "was left out: the built-in benchmark of that name comes first"),
    ("other", "was left out: the object's name is 'toy', not 'other'"),
])
def test_a_clashing_or_misnamed_entry_point_is_left_out(monkeypatch: pytest.MonkeyPatch, name: str, message: str) -> None:
    """Case ids, flags and gates are keyed by the benchmark's name: an entry point that would
    shadow a registered benchmark, or whose object answers to another name, is left out with its
    reason (the built-ins still run); a suite asking for that name is told why."""
    from importlib.metadata import EntryPoint

    import pytest_toolbench.benchmarks as benchmarks
    from pytest_toolbench.entry_points import left_out

    monkeypatch.syspath_prepend(str(TOY))
    point = EntryPoint(name=name, value="toybench_toy:TOY", group=benchmarks.ENTRY_POINT_GROUP)
    monkeypatch.setattr("pytest_toolbench.entry_points.entry_points_of",
                        lambda group: [point] if group == benchmarks.ENTRY_POINT_GROUP else [])
    benchmarks._registered.cache_clear()
    try:
        found = benchmarks.registry()
        assert sorted(found) == ["familytool", "metabench", "toolbehonest", "toolhop"]
        assert found["toolhop"].name == "toolhop" and type(found["toolhop"]).__module__.startswith("pytest_toolbench")
        [refused] = left_out(benchmarks.ENTRY_POINT_GROUP)
        assert refused.text() == f"benchmark entry point {name!r} (toybench_toy:TOY) {message}"
        if name == "other":
            assert benchmarks.unknown_benchmark("other") == f"no benchmark 'other': its {refused.text()}"
    finally:
        monkeypatch.undo()
        benchmarks._registered.cache_clear()
    assert "toy" not in benchmarks.registry() and not left_out(benchmarks.ENTRY_POINT_GROUP)


def test_an_entry_point_that_is_no_benchmark_is_left_out_before_any_flag_is_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An object without a benchmark's attributes would fail in pytest_addoption, a traceback
    for every command (``pytest --help`` too): it is left out, naming what it lacks."""
    from importlib.metadata import EntryPoint

    import pytest_toolbench.benchmarks as benchmarks
    from pytest_toolbench.entry_points import left_out

    monkeypatch.syspath_prepend(str(TOY))
    point = EntryPoint(name="toy", value="toybench_toy:ToyOptions", group=benchmarks.ENTRY_POINT_GROUP)
    monkeypatch.setattr("pytest_toolbench.entry_points.entry_points_of",
                        lambda group: [point] if group == benchmarks.ENTRY_POINT_GROUP else [])
    benchmarks._registered.cache_clear()
    try:
        assert "toy" not in benchmarks.declarations()
        [refused] = left_out(benchmarks.ENTRY_POINT_GROUP)
        assert refused.reason == ("not a benchmark (benchmarks/base.py Benchmark): it has no name, "
                                  "title, options_model, scenarios, metrics, breakdown_labels, "
                                  "label_markers, load_cases, make_runner")
    finally:
        monkeypatch.undo()
        benchmarks._registered.cache_clear()


def test_toolbench_init_writes_the_installed_benchmarks_suite(toy_env: dict[str, str], tmp_path: Path) -> None:
    """An installed benchmark gets its suite file as the built-in ones do: written into an empty
    project, it runs there."""
    project = tmp_path / "project"
    code = "import sys; from pytest_toolbench.cli import main; sys.exit(main(sys.argv[1:]))"
    init = subprocess.run([sys.executable, "-c", code, "init", str(project), "--benchmark", "toy"],
                          env=toy_env, capture_output=True, text=True, timeout=300)
    assert init.returncode == 0, init.stderr
    assert [str(p.relative_to(project)) for p in project.rglob("*.py")] == ["suites/toy/test_toy.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "suites/toy", "--model", "oracle", "-q",
                           "-p", "no:cacheprovider", "--runs-dir", str(tmp_path / "runs")],
                          cwd=project, env=toy_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "6 passed" in proc.stdout, proc.stdout + proc.stderr


def test_toolbench_list_counts_the_cases_of_a_benchmark_without_data_sources(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``data_sources`` is optional: ``toolbench list`` then says how many cases the data holds,
    with no ``from`` left hanging before an empty list of files."""
    from pytest_toolbench.view.catalog import describe, render

    monkeypatch.syspath_prepend(str(TOY))
    from toybench_toy import TOY as toy

    entry = describe(toy, None)
    assert entry.data == [] and entry.data_error is None and entry.n_cases
    text = render([entry], "the bundled samples")
    assert f"  data: {entry.n_cases} cases\n" in text and "cases from" not in text


@pytest.mark.parametrize("folder", ["toy_benchmark", "toolbox_benchmark"])
def test_the_example_benchmark_folders_are_installable_packages(folder: str, tmp_path: Path) -> None:
    """benchmarks/README.md points a newcomer at these folders: copied and ``pip install``ed,
    each must build (setuptools' flat-layout discovery refused data/ and suites/ beside the
    module) and declare its entry point. The build's own metadata step, offline, no pip."""
    copy = tmp_path / folder
    shutil.copytree(REPO / "tests" / folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "meta").mkdir()
    code = ("import setuptools.build_meta as b, sys; "
            "print(b.prepare_metadata_for_build_wheel(sys.argv[1]))")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "meta")], cwd=copy,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dist_info = tmp_path / "meta" / proc.stdout.strip().splitlines()[-1]
    points = (dist_info / "entry_points.txt").read_text(encoding="utf-8")
    assert "[pytest_toolbench.benchmarks]" in points
