"""One installed package's broken entry point does not stop the runs that do not need it.

A package's benchmark, data pin or model provider that does not load (entry_points.load_group)
is left out: the toy benchmark, installed beside it and working, still runs, and the warnings
summary names each broken entry point once (with ``-n 2`` too: the controller says it). A command
that asks for a left-out name is told why in one line, and ``-W error::...EntryPointWarning``
stops a run before any case. Before, any of the three stopped every run (a traceback from
``pytest_addoption`` for a benchmark; one line naming the unrelated pin for every real-data run).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from installed_folder import install_project, write_dist_info

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "tests" / "toy_benchmark"

BROKEN = {
    "pytest_toolbench.benchmarks": {"acme": "acme_missing.bench:ACME"},
    "pytest_toolbench.data": {"acme": "acme_missing.pins:PINS"},
    "pytest_toolbench.models": {"acmeprov": "acme_missing.provider:PROVIDER"},
}
NO_MODULE = "was left out: ModuleNotFoundError: No module named 'acme_missing'"
LINES = [
    f"benchmark entry point 'acme' (acme_missing.bench:ACME, from acme-tools) {NO_MODULE}",
    f"data pin entry point 'acme' (acme_missing.pins:PINS, from acme-tools) {NO_MODULE}",
    f"model provider entry point 'acmeprov' (acme_missing.provider:PROVIDER, from acme-tools) {NO_MODULE}",
]
SUITE = '''import pytest
from pytest_toolbench.session.fixtures import assert_case_passed
pytestmark = pytest.mark.toolbench("acme")
def test_acme(case, case_result):
    assert_case_passed(case_result)
'''


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The toy installed and working; ``acme-tools`` installed with all three entry points
    pointing at a module that is not there; a suite folder for ``acme`` beside the toy's."""
    toy_dir = tmp_path_factory.mktemp("outside") / "toy_benchmark"
    shutil.copytree(TOY, toy_dir, ignore=shutil.ignore_patterns("__pycache__"))
    (toy_dir / "suites" / "acme").mkdir()
    (toy_dir / "suites" / "acme" / "test_acme.py").write_text(SUITE, encoding="utf-8")
    site = tmp_path_factory.mktemp("site")
    write_dist_info(site, "acme-tools", "1.0", BROKEN)
    return {**install_project(TOY, site, toy_dir), "TOY_DIR": str(toy_dir)}


def _pytest(env: dict[str, str], tmp_path: Path, *args: str, model: str = "oracle") -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "--model", model, "-q", "-p", "no:cacheprovider",
           "--runs-dir", str(tmp_path / "runs"), *args]
    return subprocess.run(cmd, cwd=env["TOY_DIR"], env=env, capture_output=True, text=True, timeout=300)


def _warned(out: str) -> list[str]:
    return [line.split("EntryPointWarning: ", 1)[1] for line in out.splitlines()
            if "<installed packages>:0: EntryPointWarning: " in line]


@pytest.mark.parametrize("workers", ["0", "2"])
def test_the_working_benchmark_runs_and_each_broken_entry_point_is_named_once(
        env: dict[str, str], tmp_path: Path, workers: str) -> None:
    proc = _pytest(env, tmp_path, "suites/toy", "-n", workers)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "6 passed, 3 warnings" in proc.stdout, out[-3000:]
    assert _warned(proc.stdout) == LINES, out[-3000:]
    assert "Traceback" not in out


def test_a_listing_command_names_them_too(env: dict[str, str], tmp_path: Path) -> None:
    proc = _pytest(env, tmp_path, "suites/toy", "--collect-only")
    assert proc.returncode == 0 and _warned(proc.stdout) == LINES, proc.stdout[-3000:] + proc.stderr


def test_an_error_filter_stops_the_run_before_any_case(env: dict[str, str], tmp_path: Path) -> None:
    proc = _pytest(env, tmp_path, "suites/toy", "-W",
                   "error::pytest_toolbench.entry_points.EntryPointWarning")
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr
    assert proc.stderr.strip() == (
        f"ERROR: pytest-toolbench: {LINES[0]} (a warning, made an error by -W or filterwarnings; "
        "-W 'default::pytest_toolbench.entry_points.EntryPointWarning' lets the run go on)")
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_suite_of_the_broken_benchmark_says_why_it_cannot_run(env: dict[str, str], tmp_path: Path) -> None:
    proc = _pytest(env, tmp_path, "suites/acme")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]  # pytest's collection error
    assert f"pytest-toolbench: no benchmark 'acme': its {LINES[0]}" in proc.stdout, out[-3000:]
    assert "Traceback" not in out and "KeyError" not in out


def test_a_gate_on_the_broken_benchmark_says_why(env: dict[str, str], tmp_path: Path) -> None:
    proc = _pytest(env, tmp_path, "suites/toy", "--gate", "acme.plain.accuracy>=0.5")
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr
    assert proc.stderr.strip() == (f"ERROR: pytest-toolbench: gate acme.plain.accuracy>=0.5: "
                                   f"no benchmark 'acme': its {LINES[0]}")


def test_the_broken_provider_asked_for_by_name_says_why(env: dict[str, str], tmp_path: Path) -> None:
    proc = _pytest(env, tmp_path, "suites/toy", "--backend", "acmeprov", model="acme-large")
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr
    assert proc.stderr.strip() == f"ERROR: pytest-toolbench: --backend acmeprov: no such model provider: its {LINES[2]}"


def test_the_toolbench_command_goes_on_and_warns(env: dict[str, str]) -> None:
    code = "import sys; from pytest_toolbench.cli import main; sys.exit(main(sys.argv[1:]))"
    listed = subprocess.run([sys.executable, "-c", code, "list"], cwd=env["TOY_DIR"], env=env,
                            capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0 and "toy" in listed.stdout, listed.stderr
    assert [line for line in listed.stderr.splitlines() if "left out" in line] == \
        [f"toolbench: warning: {line}" for line in LINES[:2]]
    for command in (["list", "acme"], ["init", env["TOY_DIR"], "--benchmark", "acme"]):
        asked = subprocess.run([sys.executable, "-c", code, *command], cwd=env["TOY_DIR"], env=env,
                               capture_output=True, text=True, timeout=300)
        assert asked.returncode == 2
        assert asked.stderr.startswith(f"toolbench {command[0]}: no benchmark 'acme': its {LINES[0]}\n")
    fetch = subprocess.run([sys.executable, "-c", code, "data", "fetch", "acme"], cwd=env["TOY_DIR"],
                           env=env, capture_output=True, text=True, timeout=300)
    assert fetch.returncode == 4
    assert fetch.stderr == f"toolbench data: unknown benchmark 'acme' (its {LINES[1]})\n"
