"""Every toolbench option shows its default in --help and can be set from pyproject/pytest.ini;
the command line wins over the ini file, which wins over the default (option_sources.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_toolbench.option_sources import help_with_default, ini_name

pytest_plugins = ["pytester"]  # runs go in subprocesses: an in-process run re-imports httpx/httpcore halfway
REPO = Path(__file__).resolve().parents[1]

SHOW_SETTINGS = '''
from pytest_toolbench.session import state

def test_show(pytestconfig):
    s = state(pytestconfig).settings
    ft = s.benchmark_options["familytool"]
    th = s.benchmark_options["toolhop"]
    print(f"\\nSETTINGS model={s.model} concurrency={s.concurrency} scenarios={s.scenarios} "
          f"use_cache={s.use_cache} timeout={s.request_timeout_s} ft_k={ft.k} "
          f"ft_split={ft.split} th_scorer={th.scorer} th_turns={th.max_turns}")
'''


def help_entries() -> dict[str, str]:
    """``pytest --help``: flag -> its whole help entry, for the pytest-toolbench groups."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:randomly"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    ).stdout
    entries: dict[str, str] = {}
    in_group, current = False, None
    for line in out.splitlines():
        if not line.startswith(" "):
            in_group = line.startswith("pytest-toolbench")
            current = None
            continue
        if not in_group:
            continue
        match = re.match(r"  (--[a-z0-9-]+)", line)
        if match:
            current = match.group(1)
            entries[current] = line
        elif current:
            entries[current] += " " + line.strip()
    return entries


def test_help_shows_a_default_for_every_toolbench_option():
    entries = help_entries()
    # Core and every benchmark's options are there (the test cannot pass on an empty section).
    for flag in ("--model", "--concurrency", "--no-progress", "--gate", "--toolhop-max-turns",
                 "--familytool-k", "--familytool-kg-file", "--toolbehonest-lang",
                 "--metabench-top-k"):
        assert flag in entries
    assert len(entries) >= 40
    missing = [flag for flag, text in entries.items() if "default" not in text.lower()]
    assert missing == []
    assert "(default: 8)" in entries["--concurrency"]
    assert "(default: off)" in entries["--no-cache"]
    assert "(default: none)" in entries["--familytool-kg-file"]
    assert "(default: 3)" in entries["--familytool-k"]


def test_help_default_text_rules():
    assert help_with_default("cases in flight", 8, None) == "cases in flight (default: 8)"
    assert help_with_default("no cache", False, "store_true") == "no cache (default: off)"
    assert help_with_default("gates", [], "append") == "gates (default: none)"
    assert help_with_default("share (default 0)", 0.0, None) == "share (default 0)"
    assert help_with_default("rate", "5%", None) == "rate (default: 5%%)"  # argparse-safe


def test_ini_names():
    assert ini_name("--concurrency") == "toolbench_concurrency"
    assert ini_name("--familytool-k") == "toolbench_familytool_k"
    assert ini_name("--toolbench-json") == "toolbench_json"


def _settings_line(result: pytest.RunResult) -> str:
    lines = [ln for ln in result.outlines if ln.startswith("SETTINGS ")]
    assert len(lines) == 1, result.outlines
    return lines[0]


def test_pyproject_keys_change_the_run_and_the_command_line_wins(pytester: pytest.Pytester):
    pytester.makepyfile(test_show=SHOW_SETTINGS)
    pytester.makepyprojecttoml(
        """
        [tool.pytest.ini_options]
        toolbench_model = "oracle"
        toolbench_concurrency = 3
        toolbench_scenario = ["direct", "free"]
        toolbench_no_cache = true
        toolbench_familytool_k = 5
        toolbench_familytool_split = "e"
        toolbench_toolhop_scorer = "strict"
        """
    )
    line = _settings_line(pytester.runpytest_subprocess("-s", "-p", "no:randomly", "-p", "no:cacheprovider"))
    assert "model=oracle concurrency=3 scenarios=('direct', 'free') use_cache=False" in line
    assert "timeout=120.0" in line  # not in the file: the default
    assert "ft_k=5 ft_split=['e'] th_scorer=strict th_turns=9" in line
    line = _settings_line(pytester.runpytest_subprocess(
        "-s", "-p", "no:randomly", "-p", "no:cacheprovider", "--concurrency", "2",
        "--scenario", "mandatory", "--familytool-k", "1", "--toolhop-scorer", "upstream",
    ))
    assert "concurrency=2 scenarios=('mandatory',) use_cache=False" in line
    assert "ft_k=1 ft_split=['e'] th_scorer=upstream" in line


def test_pytest_ini_keys_and_override(pytester: pytest.Pytester):
    pytester.makepyfile(test_show=SHOW_SETTINGS)
    pytester.makeini(
        """
        [pytest]
        toolbench_model = oracle
        toolbench_request_timeout = 7.5
        toolbench_scenario = direct,mandatory
        """
    )
    line = _settings_line(pytester.runpytest_subprocess("-s", "-p", "no:randomly", "-p", "no:cacheprovider"))
    assert "scenarios=('direct', 'mandatory') use_cache=True timeout=7.5" in line
    line = _settings_line(pytester.runpytest_subprocess(
        "-s", "-p", "no:randomly", "-p", "no:cacheprovider", "-o", "toolbench_request_timeout=9",
    ))
    assert "timeout=9.0" in line


SHOW_PATHS = '''
from pytest_toolbench.session import state

def test_show(pytestconfig):
    s = state(pytestconfig).settings
    print(f"\\nPATHS cache={s.cache_dir} runs={s.runs_dir} json={s.json_path}")
'''


def _paths_line(result: pytest.RunResult) -> str:
    lines = [ln for ln in result.outlines if ln.startswith("PATHS ")]
    assert len(lines) == 1, result.outlines
    return lines[0]


def test_from_a_subfolder_the_run_keeps_its_folders_where_the_project_does(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """``cd suites/x; pytest .`` in a project with a settings file: the default cache and runs
    folders are the project's (its rootdir, as pytest's own .pytest_cache), not new ones in the
    subfolder (every cached reply asked for again, the run missing from ``toolbench runs``); a
    relative path in the settings file is taken from the file's folder, as pytest takes its
    own; one on the command line, or in $TOOLBENCH_RUNS_DIR, from where pytest runs."""
    root = pytester.path.resolve()
    sub = root / "suites" / "x"
    sub.mkdir(parents=True)
    (sub / "test_show.py").write_text(SHOW_PATHS)
    # (oracle: the embedded model's package, absent from the floors' environment, is not needed)
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntoolbench_model = "oracle"\n'
                               'toolbench_json = "out/report.json"\n')
    monkeypatch.delenv("TOOLBENCH_RUNS_DIR", raising=False)
    monkeypatch.chdir(sub)
    args = ("-s", "-p", "no:randomly", "-p", "no:cacheprovider", "test_show.py")
    line = _paths_line(pytester.runpytest_subprocess(*args))
    assert line == (f"PATHS cache={root / '.toolbench/cache'} runs={root / '.toolbench/runs'} "
                    f"json={root / 'out/report.json'}")
    line = _paths_line(pytester.runpytest_subprocess(
        *args, "--cache-dir", "c", "--runs-dir", "r", "--toolbench-json", "j.json"))
    assert line == f"PATHS cache={sub / 'c'} runs={sub / 'r'} json={sub / 'j.json'}"
    monkeypatch.setenv("TOOLBENCH_RUNS_DIR", "envruns")
    assert f"runs={sub / 'envruns'} " in _paths_line(pytester.runpytest_subprocess(*args))
    # run from the project's top, as before
    monkeypatch.delenv("TOOLBENCH_RUNS_DIR")
    monkeypatch.chdir(root)
    line = _paths_line(pytester.runpytest_subprocess(*args[:-1], "suites/x/test_show.py"))
    assert f"cache={root / '.toolbench/cache'} runs={root / '.toolbench/runs'} " in line


SHOW_SAMPLES = '''
from pytest_toolbench.session import state

def test_show(pytestconfig):
    s = state(pytestconfig).settings
    print(f"\\nSAMPLES runs={s.runs_dir} data={s.data_dir}")
'''


def test_a_project_with_no_settings_file_keeps_its_folders_where_pytest_runs(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """A project ``toolbench init`` made has no settings file: pytest's rootdir is then the
    common folder of every argument naming an existing path, option values included (a
    ``--toolbench-json`` an earlier run wrote elsewhere). The runs and the cache went there
    (``/.toolbench``, refused as a user), ``--data sample`` read that folder's ``data/`` (a
    machine's ``/data``); and a project's own ``data/`` (no benchmark's folder in it) was taken
    for the samples, so ``--data sample`` ran none ("data/toolhop ... does not exist")."""
    proj = pytester.path.resolve() / "proj"
    (proj / "suites" / "x").mkdir(parents=True)
    (proj / "suites" / "x" / "test_show.py").write_text(SHOW_SAMPLES)
    (proj / "data" / "my-own-files").mkdir(parents=True)
    elsewhere = pytester.path.resolve() / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "report.json").write_text("{}")
    (pytester.path / "data" / "toolhop").mkdir(parents=True)  # the widened rootdir's data/
    monkeypatch.delenv("TOOLBENCH_RUNS_DIR", raising=False)
    monkeypatch.chdir(proj)
    args = ("-s", "-p", "no:randomly", "-p", "no:cacheprovider", "--model", "oracle",
            "--data", "sample", "suites/x/test_show.py")
    result = pytester.runpytest_subprocess(*args, "--toolbench-json",
                                           str(elsewhere / "report.json"))
    assert f"rootdir: {pytester.path.resolve()}" in result.stdout.str()  # pytest widened it
    assert [ln for ln in result.outlines if ln.startswith("SAMPLES ")] == [
        f"SAMPLES runs={proj / '.toolbench/runs'} data=None"]
    result = pytester.runpytest_subprocess(*args, "-c", os.devnull, "--toolbench-json",
                                           str(elsewhere / "report.json"))  # "no settings"
    assert [ln for ln in result.outlines if ln.startswith("SAMPLES ")] == [
        f"SAMPLES runs={proj / '.toolbench/runs'} data=None"]
    result = pytester.runpytest_subprocess(*args)  # rootdir proj/suites/x: its own data/
    assert [ln for ln in result.outlines if ln.startswith("SAMPLES ")] == [
        f"SAMPLES runs={proj / '.toolbench/runs'} data=None"]
    # a checkout: its data/ holds the benchmarks' folders, its samples as edited there
    (proj / "data" / "toolhop").mkdir()
    (proj / "pytest.ini").write_text("[pytest]\n")
    (proj / "suites" / "x" / "data").mkdir()
    monkeypatch.chdir(proj / "suites" / "x")
    result = pytester.runpytest_subprocess(*args[:-1], "test_show.py")
    assert [ln for ln in result.outlines if ln.startswith("SAMPLES ")] == [
        f"SAMPLES runs={proj / '.toolbench/runs'} data={proj / 'data'}"]


@pytest.mark.parametrize("key, value, reason", [
    ("toolbench_concurrency", '"many"', "expected an integer"),
    ("toolbench_backend", '"gpu"', "no such model provider (expected one of auto, openai, oracle, replay, "
                                   "vllm); a package adds one with register_provider() or an entry "
                                   "point in the group 'pytest_toolbench.models'"),
    ("toolbench_no_cache", '"maybe"', "expected true or false"),
    ("toolbench_familytool_kg_layout", '"both"', "expected one of auto, single_user, system_user"),
])
def test_bad_ini_value_is_a_one_line_usage_error(pytester: pytest.Pytester, key, value, reason):
    pytester.makepyfile(test_show=SHOW_SETTINGS)
    pyproject = pytester.makepyprojecttoml(f"[tool.pytest.ini_options]\n{key} = {value}\n")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [ln for ln in result.errlines if "pytest-toolbench" in ln]
    assert errors == [f"ERROR: pytest-toolbench: {pyproject}: {key} = {value.strip(chr(34))!r}: {reason}"]


@pytest.mark.parametrize("settings", [
    "toolbench_model = Qwen/Qwen2.5-0.5B-Instruct\ntoolbench_backend = vllm\n",  # no vLLM start
    "toolbench_model = gpt-4o-mini\n",  # no API key needed
])
def test_ini_model_does_not_make_a_unit_test_run_a_toolbench_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, settings: str
):
    """A model kept in the ini file is for suite runs: a run of plain tests neither starts vLLM
    nor asks for an API key. The command line's --model makes it a toolbench run: an API model
    still needs its key at once; a vLLM server that cannot start fails only the cases that need
    it, so plain tests still pass."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    pytester.makeini("[pytest]\n" + settings)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "--model", "gpt-4o-mini")
    if "backend = vllm" in settings:  # the server (it cannot start here) is no case's concern
        result.assert_outcomes(passed=1)
    else:
        assert result.ret == pytest.ExitCode.USAGE_ERROR
