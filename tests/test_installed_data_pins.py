"""A benchmark installed from another package pins its own real data (the ``pytest_toolbench.data``
entry point, datasets/registry.py): fetched, verified, cached and reported as the built-in
benchmarks' data is, with no edit of this package.

The toy benchmark (tests/toy_benchmark) is installed with a second entry point naming its pin, a
file on the local server that plays the Hugging Face Hub (nothing reaches the internet): two of
its three questions, so a run on the real file is told from one on its bundled sample.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fake_data_hub import FakeDataHub
from installed_folder import write_dist_info

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "tests" / "toy_benchmark"
TOY_REPO, TOY_REV = "test-org/Toy", "e" * 40
REAL = json.dumps(json.loads((TOY / "data" / "toy" / "cases.json").read_text())[:2]).encode()

PINS = '''from pytest_toolbench.datasets.registry import BenchmarkData, PinnedFile

PINS = BenchmarkData(
    benchmark="toy", host="huggingface", repo="{repo}", revision="{rev}",
    files=[PinnedFile(name="cases.json", path="data/cases.json", sha256="{sha}", size={size},
                      records=2)],
    note="the toy's questions, pinned as a package pins its benchmark's data")
BAD_NAME = PINS.model_copy(update={{"benchmark": "other"}})
NOT_A_PIN = {{"benchmark": "toy"}}
'''


@pytest.fixture
def hub():
    with FakeDataHub() as server:
        server.add_hub_file(TOY_REPO, TOY_REV, "data/cases.json", REAL)
        yield server


def _env(tmp_path: Path, hub: FakeDataHub, pin: str = "toy_pins:PINS") -> dict[str, str]:
    """An interpreter where the toy package is installed with its benchmark and its data pin; real
    data by default; a fresh Hugging Face cache; the local hub."""
    code = tmp_path / "code"
    shutil.copytree(TOY, code, ignore=shutil.ignore_patterns("__pycache__"))
    (code / "toy_pins.py").write_text(PINS.format(repo=TOY_REPO, rev=TOY_REV, sha=hashlib.sha256(REAL).hexdigest(),
                                                  size=len(REAL)), encoding="utf-8")
    site = tmp_path / "site"
    write_dist_info(site, "toybench-toy", "0.1", {"pytest_toolbench.benchmarks": {"toy": "toybench_toy:TOY"},
                                                  "pytest_toolbench.data": {"toy": pin}})
    env = {k: v for k, v in os.environ.items()
           if k not in ("TOOLBENCH_DATA", "TOOLBENCH_DATA_REGISTRY", "HF_HUB_OFFLINE", "HF_TOKEN")}
    return {**env, "PYTHONPATH": os.pathsep.join([str(site), str(code), env.get("PYTHONPATH", "")]),
            "HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1",
            "TOOLBENCH_RUNS_DIR": str(tmp_path / "runs"), "TOY_CODE": str(code)}


def _run(env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "suites/toy", "--model", "oracle", "-q", "-p", "no:cacheprovider",
         "--no-cache", "--toolbench-json", str(tmp_path / "r.json"), *args],
        cwd=env["TOY_CODE"], env=env, capture_output=True, text=True, timeout=300)


def _toolbench(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", *args], cwd=env["TOY_CODE"],
                          env=env, capture_output=True, text=True, timeout=120)


def test_an_installed_benchmarks_pinned_data_is_fetched_verified_and_reported(tmp_path: Path, hub: FakeDataHub):
    env = _env(tmp_path, hub)
    listed = _toolbench(env, "data", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = [r for r in json.loads(listed.stdout) if r["benchmark"] == "toy"]
    assert row["source"] == f"huggingface:{TOY_REPO}" and row["cached"] is False
    assert "installed (toybench-toy, entry point)" in _toolbench(env, "data", "list").stdout

    proc = _run(env, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "4 passed" in proc.stdout  # 2 real questions x 2 scenarios, not the sample's 3 x 2
    assert hub.gets[f"/datasets/{TOY_REPO}/resolve/{TOY_REV}/data/cases.json"] == 1
    run = json.loads((tmp_path / "r.json").read_text())["run"]
    (source,) = [d for d in run["data_sources"] if d["benchmark"] == "toy"]
    assert source["kind"] == "real" and source["verified"] is True and source["revision"] == TOY_REV
    assert source["registry"] == "installed (toybench-toy, entry point)"
    assert _toolbench(env, "data", "verify", "toy").returncode == 0

    # the sample is still a flag away, and says so
    sample = _run(env, tmp_path, "--data", "sample")
    assert sample.returncode == 0 and "6 passed" in sample.stdout, sample.stdout[-3000:]


def test_a_file_that_is_not_the_pinned_one_is_refused_before_any_model_call(tmp_path: Path, hub: FakeDataHub):
    hub.add_hub_file(TOY_REPO, TOY_REV, "data/cases.json", REAL.replace(b"Paris", b"Lyon!"))
    proc = _run(_env(tmp_path, hub), tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4 and "sha256" in out and "data/cases.json" in out, out[-3000:]
    assert "passed" not in proc.stdout


@pytest.mark.parametrize("pin, message", [
    ("toy_pins:BAD_NAME", "data pin entry point 'toy' (toy_pins:BAD_NAME, from toybench-toy) was left out: "
                          "it pins 'other', not 'toy'"),
    ("toy_pins:MISSING", "data pin entry point 'toy' (toy_pins:MISSING, from toybench-toy) was left out: "
                         "AttributeError: module 'toy_pins' has no attribute 'MISSING'"),
    ("toy_pins:NOT_A_PIN", "data pin entry point 'toy' (toy_pins:NOT_A_PIN, from toybench-toy) was left out: "
                           "not a data pin (1 validation error for BenchmarkData)"),
])
def test_a_pin_that_cannot_be_read_is_one_line(tmp_path: Path, hub: FakeDataHub, pin: str, message: str):
    """The listing goes on without it and says why; the run that needs it stops, saying why."""
    env = _env(tmp_path, hub, pin)
    listed = _toolbench(env, "data", "list")
    assert listed.returncode == 0 and "toolhop" in listed.stdout, listed.stderr
    assert listed.stderr == f"toolbench: warning: {message}\n"
    proc = _run(env, tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4 and f"toy: its real data cannot be had: its {message}" in out, out[-3000:]
    assert "Traceback" not in out and "passed" not in proc.stdout


def test_a_registry_file_that_is_not_one_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from pytest_toolbench.datasets.registry import REGISTRY_ENV, load_registry

    bad = tmp_path / "pins.json"
    bad.write_text('{"benchmarks": [{"benchmark": "toy"}]}\n', encoding="utf-8")  # no host
    monkeypatch.setenv(REGISTRY_ENV, str(bad))
    with pytest.raises(ValueError) as info:
        load_registry()
    assert str(info.value).startswith(f"${REGISTRY_ENV} {bad}: not a data registry (1 validation error")
    assert "\n" not in str(info.value)
