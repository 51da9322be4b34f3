"""pytest's listing commands (--collect-only, --fixtures, --fixtures-per-test, --setup-plan,
--markers) run no case, so they start nothing and report nothing: no vLLM server prepared, no SDK
process, no run folder, no toolbench summary, pytest's own exit status (session/listing.py).

No real vLLM is needed: the managed server is asked for with ``--cache-only`` and a local model
folder (prepared, never started, whatever the command), and the SDK process with an endpoint
that is never called; a probe plugin reports what the run's state held at its end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_toolbench.session.listing import LISTING_OPTIONS, runs_tests
from state_probe import probe_env, write_probe

REPO = Path(__file__).resolve().parents[1]


#: Each listing command with a line only its listing prints (so it did list, and no
#: INTERNALERROR cut it short: ``--fixtures`` once stopped on a fixture defined twice).
LISTINGS = {
    "--fixtures-per-test": "fixtures used by test_toolhop[toolhop-9001-direct]",
    "--fixtures": "toolbench_model [session scope]",
    "--setup-plan": "test_toolhop.py::test_toolhop[toolhop-9001-direct] (fixtures used:",
    "--collect-only": "18 tests collected",
    "--markers": "@pytest.mark.toolbench(benchmark)",
}

#: What would start a server or an SDK process in a run that ran its cases.
MODEL_ARGS = {
    "managed vLLM": ["--backend", "vllm", "--model", "{model}", "--cache-only"],
    "SDK process": ["--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--api-key", "k",
                    "--model", "m"],
}

TOOLBENCH_SUMMARY = re.compile(r"^=+ pytest-toolbench( gates)? =+$", re.MULTILINE)


def run_listing(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    """``pytest suites/toolhop --data sample ARGS`` with the probe; (the process, the probe's
    findings)."""
    # At unconfigure, before the plugin's own unconfigure stops the server and SDK process.
    write_probe(tmp_path, "listing_probe", "pytest_unconfigure", "tryfirst")
    out = tmp_path / "probe.json"
    env, short_tmp = probe_env(tmp_path, out, {k: v for k, v in os.environ.items()
                                               if not k.startswith("OPENAI_")})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "suites/toolhop", "--data", "sample", "-q",
             "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "listing_probe",
             "--runs-dir", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"), *args],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
        assert not list(short_tmp.glob("toolbench-sdk-*")), "an SDK process outlived the command"
    finally:
        shutil.rmtree(short_tmp, ignore_errors=True)
    return proc, json.loads(out.read_text())


def assert_started_and_reported_nothing(tmp_path: Path, proc: subprocess.CompletedProcess[str],
                                        probe: dict) -> None:
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert probe == {"server": False, "sdk": False, "sdk_folders": 0}, output[-3000:]
    runs = tmp_path / "runs"
    assert not runs.exists() or not any(runs.iterdir()), sorted(p.name for p in runs.iterdir())
    assert "INTERNALERROR" not in output, output[-3000:]
    assert "PARTIAL RESULTS" not in output and "exit status" not in output, output[-3000:]
    assert not TOOLBENCH_SUMMARY.search(proc.stdout), proc.stdout[-3000:]


@pytest.mark.parametrize("model", list(MODEL_ARGS))
@pytest.mark.parametrize("flag", list(LISTINGS))
def test_a_listing_command_starts_nothing_and_reports_nothing(tmp_path: Path, flag: str,
                                                              model: str) -> None:
    (tmp_path / "model").mkdir()
    model_args = [a.format(model=tmp_path / "model") for a in MODEL_ARGS[model]]
    proc, probe = run_listing(tmp_path, "-n", "0", flag, *model_args)
    assert_started_and_reported_nothing(tmp_path, proc, probe)
    assert LISTINGS[flag] in proc.stdout, proc.stdout[-3000:]


def test_collect_only_under_xdist_writes_no_run_folder(tmp_path: Path) -> None:
    """The xdist controller's session end merged its workers' journals into the run folder,
    which made an empty one for ``-n 2 --collect-only``."""
    proc, probe = run_listing(tmp_path, "-n", "2", "--collect-only", "--model", "oracle")
    assert_started_and_reported_nothing(tmp_path, proc, probe)


def test_a_run_is_not_a_listing(tmp_path: Path) -> None:
    """The same command without a listing flag runs its cases and reports them (so the checks
    above can fail): a run folder and the toolbench summary."""
    proc, probe = run_listing(tmp_path, "-n", "0", "--model", "oracle", "--limit", "1",
                              "--scenario", "direct")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert TOOLBENCH_SUMMARY.search(proc.stdout) and any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("workers", ["0", "2"])
def test_setup_only_is_a_run_and_reports_every_case(tmp_path: Path, workers: str) -> None:
    """``--setup-only`` is not a listing: a case runs in its ``case_result`` fixture's set-up, so
    its model is called, and each result reaches the report on that set-up's report, as no call
    follows (in one process every result was lost: exit 12, PARTIAL RESULTS; under xdist only
    the workers' journals kept them)."""
    report = tmp_path / "report.json"
    proc, _ = run_listing(tmp_path, "-n", workers, "--setup-only", "--model", "oracle",
                          "--toolbench-json", str(report))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    record = json.loads(report.read_text())
    assert len(record["cases"]) == 18 and not record["partial"], output[-3000:]
    assert "PARTIAL RESULTS" not in output and "recovered from the workers' journals" not in output


@pytest.mark.parametrize("name", LISTING_OPTIONS)
def test_each_listing_mode_runs_no_tests(name: str) -> None:
    options = dict.fromkeys(LISTING_OPTIONS, False)
    options[name] = ["*"] if name == "cacheshow" else True  # --cache-show appends its glob
    assert runs_tests(SimpleNamespace(option=SimpleNamespace(**options))) is False  # type: ignore[arg-type]


def test_a_plain_command_runs_tests_even_with_a_listing_plugin_disabled() -> None:
    """``-p no:cacheprovider`` removes ``--cache-show`` (and its option) altogether."""
    options = dict.fromkeys(LISTING_OPTIONS, False)
    del options["cacheshow"]
    assert runs_tests(SimpleNamespace(option=SimpleNamespace(**options))) is True  # type: ignore[arg-type]
    assert runs_tests(SimpleNamespace(option=SimpleNamespace(cacheshow=None, setuponly=True))) is True  # type: ignore[arg-type]


def test_markers_lists_each_case_label_once_with_the_benchmarks_that_have_it() -> None:
    """ToolHop and FamilyTool both label cases with hops(n): ``pytest --markers`` listed it
    twice, identically."""
    from pytest_toolbench.session.run_start import register_markers

    lines: list[str] = []
    config = SimpleNamespace(addinivalue_line=lambda name, line: lines.append(line))
    register_markers(config)  # type: ignore[arg-type]
    hops = [line for line in lines if line.startswith("hops(")]
    assert hops == ["hops(n): case label hops (toolhop, familytool)"]
    assert len(lines) == len(set(lines))
