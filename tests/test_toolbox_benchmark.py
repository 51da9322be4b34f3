"""An outside, tool-using benchmark (tests/toolbox_benchmark/), installed as tests/test_toy_benchmark.py
installs the toy: copied out of this repository, its entry point line in a dist-info on the path.

Its tools run in the harness's sandbox from its own module (``sandbox_modules``, not source
text), and under ``--decoding open`` its replies are read by its own parser, in the same pytest
session as ToolHop with ToolHop's parser: a local OpenAI-compatible server (fake_openai_server.py)
answers each benchmark with raw text in that benchmark's own format (Qwen2.5 ``<tool_call>`` for
ToolHop, ``[TOOL_CALLS] [...]`` for the toolbox). Each parser reads only its own format, so a
reply read by the other benchmark's parser would leave no tool call.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fake_openai_server import FakeOpenAIServer, completion
from installed_folder import install_project

REPO = Path(__file__).resolve().parents[1]
TOOLBOX = REPO / "tests" / "toolbox_benchmark"


@pytest.fixture(scope="module")
def toolbox_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toolbox folder outside this repository (no conftest.py, no fixtures/ above it)."""
    folder = tmp_path_factory.mktemp("outside") / "toolbox_benchmark"
    shutil.copytree(TOOLBOX, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


@pytest.fixture(scope="module")
def toolbox_env(tmp_path_factory: pytest.TempPathFactory, toolbox_dir: Path) -> dict[str, str]:
    """An interpreter's environment where the toolbox package is installed: its entry point line
    (read from its pyproject.toml) in a dist-info folder on the path, its folder on the path."""
    env = install_project(TOOLBOX, tmp_path_factory.mktemp("site"), toolbox_dir)
    return {k: v for k, v in env.items() if not k.startswith("OPENAI_")}


def run_pytest(env: dict[str, str], tmp_path: Path, cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", *args, "--toolbench-json", str(report), "-p", "no:cacheprovider",
           "-p", "no:randomly", "--runs-dir", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"),
           "-n", "0"]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    data = json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}
    return proc, data


def assert_ran_in_the_sandbox(tool_runs: list[dict[str, Any]], module: Path) -> None:
    """Each call ran from the benchmark's own module, in a call directory of a sandbox zygote,
    in a process other than the harness's."""
    assert tool_runs
    for run in tool_runs:
        where = run["where"]
        assert run["status"] == "ok", run
        assert where["module"] == str(module.resolve()), where
        folder, call = Path(where["cwd"]).parent.name, Path(where["cwd"]).name
        assert folder.startswith("toolbench-sandbox-") and call.startswith("call-"), where
        assert where["pid"] != os.getpid()


def test_the_toolbox_runs_its_tools_in_the_sandbox_from_its_module(
        toolbox_env: dict[str, str], toolbox_dir: Path, tmp_path: Path) -> None:
    proc, report = run_pytest(toolbox_env, tmp_path, toolbox_dir, "suites/toolbox", "--model", "oracle")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [c["case_id"] for c in report["cases"]] == ["toolbox-q1-tools", "toolbox-q2-tools"]
    assert [c["values"]["tool_calls"] for c in report["cases"]] == [1.0, 2.0]
    for case in report["cases"]:
        assert_ran_in_the_sandbox(case["details"]["tool_runs"], toolbox_dir / "toolbox_tools.py")
    assert report["run"]["sandbox"]["kernel_isolation"] is True


# ------------------------------------------------------------------------ both benchmarks, open


def toolhop_reply(body: dict[str, Any]) -> str:
    """ToolHop record 9001 (mandatory), as Qwen2.5 writes it: one <tool_call>, then the answer."""
    if any(m["role"] == "tool" for m in body["messages"]):
        return "<answer>6</answer>"
    call = {"name": "letter_counter", "arguments": {"text": "Steven"}}
    return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"


def toolbox_reply(body: dict[str, Any], records: dict[str, dict[str, Any]]) -> str:
    """The toolbox's gold calls one per turn in its own format, then the gold answer."""
    record = records[body["messages"][0]["content"]]
    done = sum(1 for m in body["messages"] if m["role"] == "tool")
    if done < len(record["calls"]):
        return "Let me compute. [TOOL_CALLS] " + json.dumps([record["calls"][done]])
    return record["answer"]


def test_toolhop_and_the_toolbox_each_parsed_by_their_own_parser(
        toolbox_env: dict[str, str], toolbox_dir: Path, tmp_path: Path) -> None:
    records = {r["question"]: r for r in json.loads(
        (toolbox_dir / "data" / "toolbox" / "cases.json").read_text(encoding="utf-8"))}

    def handler(body: dict[str, Any], index: int):
        names = {t["function"]["name"] for t in body.get("tools") or []}
        text = toolbox_reply(body, records) if names == {"add", "multiply"} else toolhop_reply(body)
        return 200, {}, completion(text)

    with FakeOpenAIServer(handler) as server:
        proc, report = run_pytest(
            toolbox_env, tmp_path, REPO, "suites/toolhop", str(toolbox_dir / "suites" / "toolbox"),
            "--data", "sample", "-k", "toolhop-9001-mandatory or toolbox", "--decoding", "open",
            "--model", "Qwen/Qwen2.5-7B-Instruct", "--base-url", server.base_url, "--api-key", "t")
        bodies = list(server.requests)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    cases = {c["case_id"]: c for c in report["cases"]}
    assert set(cases) == {"toolhop-9001-mandatory", "toolbox-q1-tools", "toolbox-q2-tools"}
    # Upstream's open protocol for both: tools in the template, the server's parser off.
    assert bodies and all(b["tool_choice"] == "none" for b in bodies)

    # ToolHop's reply was read by parse_qwen25 (call ids "call_..."), its tool ran, it scored.
    toolhop = cases["toolhop-9001-mandatory"]
    (call,) = [c for m in toolhop["transcript"] if m["role"] == "assistant" for c in m["tool_calls"] or []]
    assert call["id"].startswith("call_") and call["function"]["name"] == "letter_counter"
    assert [m["content"] for m in toolhop["transcript"] if m["role"] == "tool"] == ["6"]
    assert toolhop["outcome"] == "passed" and toolhop["values"]["answer_correct"] == 1.0
    assert toolhop["details"]["protocol"]["open_parser"] == "qwen25"

    # The toolbox's replies were read by its own parser (call ids "tbx_..."), its tools ran in the
    # sandbox from its module, and it scored.
    for case_id, n_calls in (("toolbox-q1-tools", 1), ("toolbox-q2-tools", 2)):
        case = cases[case_id]
        calls = [c for m in case["transcript"] if m["role"] == "assistant" for c in m["tool_calls"] or []]
        assert len(calls) == n_calls and all(c["id"].startswith("tbx_") for c in calls), calls
        assert case["outcome"] == "passed" and case["values"]["correct"] == 1.0
        assert_ran_in_the_sandbox(case["details"]["tool_runs"], toolbox_dir / "toolbox_tools.py")
        assert "[TOOL_CALLS]" in case["details"]["raw_outputs"][0]

    scored = {(s["benchmark"], s["scenario"]): s["metrics"] for s in report["metrics"]["scenarios"]}
    assert scored[("toolhop", "mandatory")]["accuracy"]["value"] == 1.0
    assert scored[("toolbox", "tools")]["accuracy"]["value"] == 1.0
