"""The run start's fail-fast model build (session/run_start.py ``configure_run``) under
``--decoding open``: it plans the open protocol with the run's own benchmarks' parsers, so it
warns "no upstream open-model parser fits" only for a family none of them reads, once.

Built with no parser, it warned for every model, a Qwen2.5 one that ToolHop's parser reads
included. The run is ``pytest suites/toolhop`` in a subprocess against a local endpoint
(tests/fake_openai_server.py); the gate keeps the wrong answer from failing the case, so pytest
prints no captured log that would repeat the model fixture's own warning.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, completion

REPO = Path(__file__).resolve().parents[1]
WARNING = "no upstream open-model parser fits"


def _open_run(tmp_path: Path, model: str, workers: str) -> tuple[int, str]:
    """One ToolHop case under ``--decoding open``; (exit status, stdout + stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "tests"), env.get("PYTHONPATH")]))
    with FakeOpenAIServer(lambda body, index: (200, {}, completion("<answer>x</answer>"))) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:randomly",
             "-p", "no:cacheprovider", "--data", "sample", "-k", "toolhop-9001-direct",
             "--decoding", "open", "--model", model, "--base-url", server.base_url,
             "--api-key", "t", "--no-cache", "--runs-dir", str(tmp_path / "runs"),
             "--gate", "toolhop.direct.accuracy>=0", "-n", workers],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_family_with_a_parser_gets_no_warning_and_one_without_gets_it_once(tmp_path, workers):
    status, out = _open_run(tmp_path / "qwen", "Qwen/Qwen2.5-7B-Instruct", workers)
    assert status == 0, out[-3000:]
    assert WARNING not in out  # ToolHop's parser reads Qwen2.5 (its qwen25 series)

    status, out = _open_run(tmp_path / "mistral", "mistralai/Mistral-7B-Instruct-v0.3", workers)
    assert status == 0, out[-3000:]
    assert out.count(WARNING) == 1, out[-3000:]  # no ToolHop parser series for mistral
    assert f"{WARNING} the mistral family" in out
