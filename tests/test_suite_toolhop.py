"""End-to-end: the ToolHop suite run by pytest in a subprocess, as a user runs it.

Models are the oracle, replay files, or a real local OpenAI-compatible HTTP server
(tests/fake_openai_server.py) that answers from the gold data, so outcomes are known in advance.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fake_openai_server import FakeOpenAIServer, completion, delayed, error_body, tool_call

from pytest_toolbench.results.case_store import read_cases

REPO = Path(__file__).resolve().parents[1]
from shared_data import BUNDLED_TOOLHOP as BUNDLED, REAL_TOOLHOP as SHARED_TOOLHOP, SHARED_DATASETS as SHARED

# Verbatim from upstream code/evaluation_*.py (typo "final nswer" included).
UPSTREAM_PROMPTS = {
    "direct": "You will be asked a question, and should provide a short answer.\nIf the answer is a date, format is as follows: YYYY-MM-DD (ISO standard)\nIf the answer is a name, format it as follows: Firstname Lastname\nIf the answer contains any number, format it as a number, not a word, and only output that number. Do not include leading 0s.\n\nPlease provide the answer in the following format: <answer>your answer here</answer>\nAnswer as short as possible.\nQuestion: {question}",
    "mandatory": "You will be asked a question with some tools, and should provide a short final answer.\nPlease note that you must call the tool at every step, you must not use your own knowledge. Your final answer must also be returned from the tool.\nIf the final answer is a date, format is as follows: YYYY-MM-DD (ISO standard)\nIf the final nswer is a name, format it as follows: Firstname Lastname\nIf the final answer contains any number, format it as a number, not a word, and only output that number. Do not include leading 0s.\n\nPlease provide the final answer in the following format: <answer>final answer here</answer>\nAnswer as short as possible.\nQuestion: {question}",
    "free": "You will be asked a question with some tools, and should provide a short final answer.\nIf the final answer is a date, format is as follows: YYYY-MM-DD (ISO standard)\nIf the final nswer is a name, format it as follows: Firstname Lastname\nIf the final answer contains any number, format it as a number, not a word, and only output that number. Do not include leading 0s.\n\nPlease provide the final answer in the following format: <answer>final answer here</answer>\nAnswer as short as possible.\nQuestion: {question}",
}

needs_shared = pytest.mark.skipif(not SHARED_TOOLHOP.exists(), reason="../shared datasets absent")


def run_suite(tmp_path: Path, *args: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, dict | None]:
    """Run ``pytest suites/toolhop`` with a private cache and JSON report; return (proc, report)."""
    report = tmp_path / f"report-{len(list(tmp_path.glob('report-*.json')))}.json"
    cmd = [
        sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider", "-q",
        "-p", "no:randomly", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"), "--toolbench-json", str(report),
        *args,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)
    data = json.loads(report.read_text()) if report.exists() else None
    return proc, data


def failure_text(proc: subprocess.CompletedProcess) -> str:
    """A failed run's output for an assertion message: the head of its first failure (the frames
    a tail would cut) and the tail of the whole."""
    start = proc.stdout.find("= FAILURES =")
    head = proc.stdout[start:start + 6000] + "\n[...]\n" if start >= 0 else ""
    return head + proc.stdout[-3000:] + proc.stderr[-3000:]


def metric_table(report: dict) -> dict[str, Any]:
    return {
        f"{s['benchmark']}.{s['scenario']}": {
            "n_cases": s["n_cases"],
            "n_errors": s["n_errors"],
            "metrics": s["metrics"],
            "breakdown": s["breakdown"],
        }
        for s in report["metrics"]["scenarios"]
    }


def load_records(path: Path) -> list[dict]:
    return json.loads(path.read_text())


class GoldAgent:
    """A deterministic agent behind real HTTP: in tool scenarios it calls the first tool once with
    no arguments (an invocation error for tools with required parameters), then answers. It
    answers the gold for even sample ids and a wrong answer for odd ones."""

    def __init__(self, records: list[dict]):
        self.by_question = {r["question"]: r for r in records}

    def record_for(self, body: dict) -> dict:
        first = body["messages"][0]["content"]
        question = first.rsplit("Question: ", 1)[1]
        return self.by_question[question]

    def __call__(self, body: dict, index: int):
        record = self.record_for(body)
        answer = record["answer"] if record["id"] % 2 == 0 else "definitely-wrong"
        messages = body["messages"]
        if body.get("tools") and len(messages) == 1:
            name = body["tools"][0]["function"]["name"]
            return 200, {}, completion(None, [tool_call(name, {}, call_id="call_0")])
        return 200, {}, completion(f"<answer>{answer}</answer>")


# --------------------------------------------------------------------------- oracle, real data
@needs_shared
def test_oracle_scores_100_percent_on_real_records_with_xdist(tmp_path):
    proc, report = run_suite(
        tmp_path, "--data-dir", str(SHARED), "--model", "oracle", "-n", "2"
    )
    assert proc.returncode == 0, failure_text(proc)
    table = metric_table(report)
    assert set(table) == {"toolhop.direct", "toolhop.mandatory", "toolhop.free"}
    for name, row in table.items():
        assert row["metrics"]["accuracy"]["value"] == 1.0, name
        assert row["metrics"]["accuracy"]["n"] == 80, name
        assert row["n_errors"] == 0
    assert len(report["cases"]) == 240
    assert "pytest-toolbench" in proc.stdout and "accuracy" in proc.stdout

    # The first user message of every transcript is the upstream prompt, byte for byte.
    questions = {str(r["id"]): r["question"] for r in load_records(SHARED_TOOLHOP)}
    for case in report["cases"]:
        sample_id = case["case_id"].split("-")[1]
        expected = UPSTREAM_PROMPTS[case["scenario"]].replace("{question}", questions[sample_id])
        first = case["transcript"][0]
        assert first["role"] == "user" and first["content"] == expected
        assert not any(m["role"] == "system" for m in case["transcript"])
    assert_oracle_walked_the_gold_chain(report, load_records(SHARED_TOOLHOP))
    # The sample80's gold chains, as called in the sandbox: most tools return their hop's gold
    # answer; the few calls that raise are recorded per hop (see gold_chain.py), not hidden.
    chains = [c["details"]["oracle_chain"] for c in report["cases"] if c["scenario"] == "mandatory"]
    calls = sum(ch["calls"] for ch in chains)
    assert calls == sum(len(r["sub_task"]) for r in load_records(SHARED_TOOLHOP))
    assert sum(ch["reached_gold"] for ch in chains) >= 0.75 * calls
    assert sum(ch["from_example"] for ch in chains) >= 0.75 * calls
    assert 0 < sum(ch["raised"] for ch in chains) <= 0.02 * calls


def assert_oracle_walked_the_gold_chain(report: dict, records: list[dict]) -> None:
    """The oracle called each hop's tool in hop order, then answered: every mandatory metric
    has a value (invocation errors included), and direct made no tool call."""
    by_id = {str(r["id"]): r for r in records}
    for case in report["cases"]:
        record = by_id[case["case_id"].split("-")[1]]
        called = [c["function"]["name"] for m in case["transcript"] for c in m.get("tool_calls") or []]
        tools = [m for m in case["transcript"] if m["role"] == "tool"]
        if case["scenario"] == "direct":
            assert called == [] and "oracle_chain" not in case["details"]
            continue
        assert called == [t["name"] for t in record["tools"].values()], case["case_id"]
        assert len(tools) == case["details"]["tool_calls"] == len(record["sub_task"])
        assert case["details"]["oracle_chain"]["calls"] == len(record["sub_task"])
        assert case["transcript"][-1] == {"role": "assistant",
                                          "content": f"<answer>{record['answer']}</answer>"}
    mandatory = metric_table(report)["toolhop.mandatory"]["metrics"]
    for name in ("accuracy", "query_error_rate", "instance_error_rate"):
        assert mandatory[name]["value"] is not None, name


def test_oracle_calls_the_gold_tool_chain_in_the_sandbox_on_the_bundled_sample(tmp_path):
    """A wiring check: --model oracle goes through the tool sandbox in mandatory and free, and
    still scores 100%. Record 9006 has two tools named element_property_lookup; upstream execs
    the last definition for both (``get_feedback`` in code/evaluation_*.py), so the first one's gold call raises: recorded in its
    chain report and counted as what it is, not hidden."""
    proc, report = run_suite(tmp_path, "--model", "oracle", "-n", "0")
    assert proc.returncode == 0, failure_text(proc)
    records = load_records(BUNDLED)
    assert_oracle_walked_the_gold_chain(report, records)
    for row in metric_table(report).values():
        assert row["metrics"]["accuracy"]["value"] == 1.0 and row["n_errors"] == 0
    chain = next(c for c in report["cases"] if c["case_id"] == "toolhop-9006-mandatory")
    hop1 = chain["details"]["oracle_chain"]["hops"][1]
    assert hop1["tool"] == "element_property_lookup" and hop1["shadowed_by_later_duplicate"]
    assert hop1["raised"] and not hop1["reached_gold"]
    others = [c for c in report["cases"] if c["scenario"] == "mandatory" and c is not chain]
    assert all(c["details"]["invocation_errors"]["error_calls"] == 0 for c in others)


# --------------------------------------------------------------------------- markers
def collected_ids(tmp_path: Path, *args: str) -> set[str]:
    proc, _ = run_suite(tmp_path, "--collect-only", "--model", "oracle", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return set(re.findall(r"test_toolhop\[([^\]]+)\]", proc.stdout))


def test_marker_filters_select_exactly_the_matching_cases(tmp_path):
    records = load_records(BUNDLED)
    hops = {str(r["id"]): len(r["sub_task"]) for r in records}
    all_ids = collected_ids(tmp_path)
    assert len(all_ids) == 3 * len(records)

    three = collected_ids(tmp_path, "-m", "hops(n=3)")
    assert three == {i for i in all_ids if hops[i.split("-")[1]] == 3} and three

    mandatory = collected_ids(tmp_path, "-m", "scenario(name='mandatory')")
    assert mandatory == {i for i in all_ids if i.endswith("-mandatory")}

    both = collected_ids(tmp_path, "-m", "hops(n=3) and scenario(name='free')")
    assert both == {i for i in three if i.endswith("-free")}

    domain = records[0]["domain"]
    by_domain = collected_ids(tmp_path, "-m", f"domain(name='{domain}')")
    assert by_domain == {i for i in all_ids if any(
        str(r["id"]) == i.split("-")[1] and r["domain"] == domain for r in records)}


def test_limit_scenario_and_sample_ids_cut_the_set_deterministically(tmp_path):
    records = load_records(BUNDLED)
    first_two = {str(r["id"]) for r in records[:2]}
    ids = collected_ids(tmp_path, "--limit", "2", "--scenario", "direct,free")
    assert {i.split("-")[1] for i in ids} == first_two
    assert {i.rsplit("-", 1)[1] for i in ids} == {"direct", "free"}
    chosen = str(records[-1]["id"])
    assert collected_ids(tmp_path, "--sample-ids", chosen) == {
        f"toolhop-{chosen}-{s}" for s in ("direct", "mandatory", "free")
    }


# --------------------------------------------------------------------------- HTTP model
def test_http_model_xdist_and_serial_give_identical_metrics(tmp_path):
    agent = GoldAgent(load_records(BUNDLED))
    with FakeOpenAIServer(agent) as server:
        url = ["--base-url", server.base_url, "--api-key", "test", "--model", "gold-agent"]
        serial, rep0 = run_suite(tmp_path, *url, "-n", "0", "--no-cache")
        parallel, rep4 = run_suite(tmp_path, *url, "-n", "4", "--no-cache")
    assert serial.returncode == 1 and parallel.returncode == 1  # odd ids answer wrong
    assert metric_table(rep0) == metric_table(rep4)
    # The workers' journals (the backstop of the report channel, tests/test_no_silent_loss.py)
    # were merged into the run's journal and removed; that journal holds every reported case.
    folder = tmp_path / "runs" / rep4["run"]["run_id"]
    assert not list(folder.glob("worker-*"))
    assert {c.case_id for c in read_cases(folder)} == {c["case_id"] for c in rep4["cases"]}
    table = metric_table(rep0)
    records = load_records(BUNDLED)
    # Even ids answer the gold; odd ids are wrong unless the gold is "0", which upstream's
    # rstrip('.0') empties, so it matches any reply (code/evaluation_*.py).
    correct = sum(1 for r in records if r["id"] % 2 == 0 or r["answer"].rstrip(".0") == "")
    assert correct < len(records)
    assert table["toolhop.direct"]["metrics"]["accuracy"]["value"] == pytest.approx(correct / len(records))
    # One call without arguments per mandatory case: an invocation error where parameters are required.
    mandatory = table["toolhop.mandatory"]["metrics"]
    assert mandatory["instance_error_rate"]["n"] == len(records)
    failed = [c for c in rep0["cases"] if c["outcome"] == "failed"]
    assert failed and all(c["failure_message"] for c in failed)
    # A wrong answer is a short failure message, not a traceback.
    assert "Traceback" not in serial.stdout and "definitely-wrong" in serial.stdout


def test_record_then_replay_gives_identical_metrics_without_model_calls(tmp_path):
    agent = GoldAgent(load_records(BUNDLED))
    recording = tmp_path / "run.jsonl"
    with FakeOpenAIServer(agent) as server:
        _, recorded = run_suite(
            tmp_path, "--base-url", server.base_url, "--api-key", "t", "--model", "gold-agent",
            "--no-cache", "--record", str(recording), "-n", "2",
        )
    lines = [json.loads(line) for line in recording.read_text().splitlines()]
    assert {line["case_id"] for line in lines} == {c["case_id"] for c in recorded["cases"]}
    # The server is gone now: any model call would be an infrastructure error.
    proc, replayed = run_suite(tmp_path, "--model", f"replay:{recording}", "--no-cache")
    assert metric_table(replayed) == metric_table(recorded)
    assert all(c["outcome"] != "error" for c in replayed["cases"]), proc.stdout[-2000:]


def test_endpoint_answering_429_then_500_is_retried_and_the_case_scores(tmp_path):
    records = load_records(BUNDLED)
    agent = GoldAgent(records)
    even_id = str(next(r["id"] for r in records if r["id"] % 2 == 0))

    def flaky(body: dict, index: int):
        if index == 0:
            return 429, {"Retry-After": "0.2"}, error_body(429, "slow down")
        if index == 1:
            return 500, {}, error_body(500, "boom")
        return agent(body, index)

    with FakeOpenAIServer(flaky) as server:
        proc, report = run_suite(
            tmp_path, "--base-url", server.base_url, "--api-key", "t", "--model", "m",
            "--scenario", "direct", "--sample-ids", even_id, "--no-cache",
        )
        assert len(server.requests) == 3
    assert proc.returncode == 0, failure_text(proc)
    assert report["cases"][0]["outcome"] == "passed"


def test_failing_endpoint_is_an_error_apart_from_wrong_answers(tmp_path):
    def broken(body: dict, index: int):
        return 500, {}, error_body(500, "down")

    with FakeOpenAIServer(broken) as server:
        proc, report = run_suite(
            tmp_path, "--base-url", server.base_url, "--api-key", "t", "--model", "m",
            "--scenario", "direct", "--limit", "2", "--max-retries", "1", "--no-cache",
        )
    assert proc.returncode != 0
    assert "2 errors" in proc.stdout and "failed" not in proc.stdout.splitlines()[-1]
    row = metric_table(report)["toolhop.direct"]
    assert row["n_errors"] == 2 and row["metrics"]["accuracy"]["n"] == 0
    assert {c["error"]["kind"] for c in report["cases"]} == {"http_500"}
    assert "infrastructure error" in proc.stdout


EDIT_PLUGIN = """
import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    # After collection, before any case starts: every record's place in the file moves by a byte.
    with open(os.environ["TOOLBENCH_TEST_EDIT"], "r+b") as fh:
        data = fh.read()
        fh.seek(0)
        fh.write(b" " + data)
"""


def test_a_data_file_edited_mid_run_errors_its_cases_naming_the_file(tmp_path, monkeypatch):
    """A case reads its record back from the file when it starts (benchmarks/packed.py): a file
    edited after collection is an error of kind data_error for every case that starts after,
    named in the summary, and never scores other text as the record."""
    data = tmp_path / "data" / "toolhop" / "ToolHop.json"
    data.parent.mkdir(parents=True)
    data.write_bytes(BUNDLED.read_bytes())
    (tmp_path / "edit_data_plugin.py").write_text(EDIT_PLUGIN, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("TOOLBENCH_TEST_EDIT", str(data))
    proc, report = run_suite(tmp_path, "--model", "oracle", "--data-dir", str(tmp_path / "data"),
                             "--scenario", "direct", "--limit", "2", "-p", "edit_data_plugin")
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "2 errors" in proc.stdout and "failed" not in proc.stdout.splitlines()[-1]
    assert {c["error"]["kind"] for c in report["cases"]} == {"data_error"}
    assert all(str(data) in c["error"]["message"] for c in report["cases"])
    assert "infrastructure error (data_error), not scored" in proc.stdout
    assert "changed since the run parsed it" in proc.stdout


def estimates_kept(cache: Path) -> set[str]:
    """The keys of the bootstrap estimates kept in a response cache's folder."""
    from pytest_toolbench.results import estimate_memo

    file = cache / estimate_memo.FOLDER / f"u{os.geteuid()}" / estimate_memo.FILE
    return set(json.loads(file.read_text())["entries"])


def test_a_run_told_no_cache_writes_nothing_in_the_cache_folder(tmp_path):
    proc, report = run_suite(tmp_path, "--model", "oracle", "--no-cache", "--scenario", "direct",
                             "--limit", "2")
    assert proc.returncode == 0 and report is not None, proc.stdout[-2000:]
    assert not (tmp_path / "cache").exists()


def test_rerun_of_finished_suite_makes_no_model_calls(tmp_path):
    agent = GoldAgent(load_records(BUNDLED))
    with FakeOpenAIServer(agent) as server:
        args = ["--base-url", server.base_url, "--api-key", "t", "--model", "m", "-n", "2"]
        _, first = run_suite(tmp_path, *args)
        calls = len(server.requests)
        assert calls > 0
        kept = estimates_kept(tmp_path / "cache")
        assert kept  # the intervals, kept for a re-run (results/estimate_memo.py)
        _, second = run_suite(tmp_path, *args)
        assert len(server.requests) == calls
        url = server.base_url
    assert metric_table(first) == metric_table(second)
    assert estimates_kept(tmp_path / "cache") == kept  # each read back: none computed anew
    assert all(c["cached_calls"] == c["model_calls"] > 0 for c in second["cases"])

    # --cache-only: the server is gone; the finished run re-scores from the cache alone, a
    # re-scoring option changes nothing in the requests, and another model is a cache miss.
    offline = ["--base-url", url, "--api-key", "t", "--cache-only"]
    _, third = run_suite(tmp_path, *offline, "--model", "m", "-n", "2")
    assert metric_table(third) == metric_table(first)
    _, fourth = run_suite(tmp_path, *offline, "--model", "m", "--toolhop-scorer", "strict",
                          "--scenario", "direct", "--limit", "1")
    assert fourth["cases"][0]["outcome"] != "error"
    _, fifth = run_suite(tmp_path, *offline, "--model", "other", "--scenario", "direct", "--limit", "1")
    assert fifth["cases"][0]["error"]["kind"] == "cache_miss"


def test_the_shared_sdk_process_changes_nothing_but_where_the_sdk_runs(tmp_path):
    """--sdk-process shared (the default) and inline: the same requests, results and metrics
    under -n 2, and the same cache keys (an inline re-run is answered from the shared run's cache
    without a request)."""
    agent = GoldAgent(load_records(BUNDLED))
    runs = {}
    with FakeOpenAIServer(agent) as server:
        for mode in ("shared", "inline"):
            before = len(server.requests)
            proc, report = run_suite(tmp_path / mode, "--base-url", server.base_url, "--api-key", "t",
                                     "--model", "m", "-n", "2", "--sdk-process", mode)
            assert report is not None, proc.stdout[-2000:] + proc.stderr[-2000:]
            bodies = sorted(json.dumps(b, sort_keys=True) for b in server.requests[before:])
            runs[mode] = (report, bodies)
        _, rerun = run_suite(tmp_path / "shared", "--base-url", server.base_url, "--api-key", "t",
                             "--model", "m", "-n", "2", "--sdk-process", "inline", "--cache-only")
    (shared, shared_bodies), (inline, inline_bodies) = runs["shared"], runs["inline"]
    assert shared_bodies == inline_bodies and shared_bodies
    assert metric_table(shared) == metric_table(inline)

    def outcomes(report):
        return {c["case_id"]: (c["outcome"], c["model_calls"], c.get("failure_message")) for c in report["cases"]}

    assert outcomes(shared) == outcomes(inline)
    assert metric_table(rerun) == metric_table(shared)
    assert all(c["cached_calls"] == c["model_calls"] > 0 for c in rerun["cases"])


def test_cases_run_ahead_of_pytest_up_to_the_concurrency(tmp_path):
    """-n 0 --concurrency 32: a slow endpoint sees about 32 requests at once."""
    if SHARED_TOOLHOP.exists():
        data, concurrency = ["--data-dir", str(SHARED), "--scenario", "direct"], 32
        n_cases = len(load_records(SHARED_TOOLHOP))
    else:
        data, concurrency = [], 16
        n_cases = 3 * len(load_records(BUNDLED))
    slow = delayed(1.0, lambda b, i: (200, {}, completion("<answer>x</answer>")))
    with FakeOpenAIServer(slow) as server:
        proc, report = run_suite(
            tmp_path, *data, "--base-url", server.base_url, "--api-key", "t", "--model", "m",
            "-n", "0", "--concurrency", str(concurrency), "--no-cache",
        )
        in_flight = server.max_in_flight
    assert len(report["cases"]) == n_cases, proc.stdout[-2000:]
    assert concurrency - 2 <= in_flight <= concurrency, in_flight


# --------------------------------------------------------------------------- gates
def test_gates_decide_the_exit_status(tmp_path):
    ok, _ = run_suite(tmp_path, "--model", "oracle", "--scenario", "direct",
                      "--gate", "toolhop.direct.accuracy>=0.99")
    assert ok.returncode == 0 and "PASS" in ok.stdout

    agent = GoldAgent(load_records(BUNDLED))
    with FakeOpenAIServer(agent) as server:
        http = ["--base-url", server.base_url, "--api-key", "t", "--model", "m", "--scenario", "direct"]
        lenient, _ = run_suite(tmp_path, *http, "--gate", "toolhop.direct.accuracy>=0.1")
        strict, _ = run_suite(tmp_path, *http, "--gate", "toolhop.direct.accuracy.ci_low>=0.9")
    assert lenient.returncode == 0, lenient.stdout[-2000:]  # wrong answers alone do not fail
    assert strict.returncode == 10 and "FAIL" in strict.stdout  # ToolbenchExit.GATE_FAILED

    bad, _ = run_suite(tmp_path, "--model", "oracle", "--gate", "toolhop.direct.accuracy=>1")
    assert bad.returncode == 4 and "gate" in (bad.stdout + bad.stderr)


# --------------------------------------------------------------------------- sandbox, end to end
HOSTILE_BODIES = {
    "loops_forever": "    while True:\n        pass\n",
    "allocates_10gb": "    block = bytearray(10 * 1024 ** 3)\n    return len(block)\n",
    "opens_a_socket": (
        "    import socket\n    s = socket.socket()\n    s.connect(('127.0.0.1', 9))\n"
        "    return 'connected'\n"
    ),
    "writes_to_etc": (
        "    with open('/etc/toolbench_probe', 'w') as f:\n        f.write('x')\n"
        "    return 'written'\n"
    ),
}


@pytest.mark.parametrize("behaviour", sorted(HOSTILE_BODIES))
def test_hostile_tool_is_stopped_and_reported_to_the_model_while_the_run_goes_on(tmp_path, behaviour):
    records = load_records(BUNDLED)[:2]
    first = records[0]
    name = next(iter(first["tools"].values()))["name"]
    hostile = f"def {name}(**kwargs):\n" + HOSTILE_BODIES[behaviour]
    first = {**first, "functions": [hostile if f.startswith(f"def {name}(") else f for f in first["functions"]]}
    data_dir = tmp_path / "data"
    (data_dir / "toolhop").mkdir(parents=True)
    (data_dir / "toolhop" / "ToolHop.json").write_text(json.dumps([first, records[1]]))

    with FakeOpenAIServer(GoldAgent([first, records[1]])) as server:
        proc, report = run_suite(
            tmp_path, "--data-dir", str(data_dir), "--base-url", server.base_url, "--api-key", "t",
            "--model", "m", "--scenario", "mandatory", "--toolhop-tool-timeout", "2", "--no-cache",
        )
    assert not Path("/etc/toolbench_probe").exists()
    assert len(report["cases"]) == 2  # the run went on to the next case
    assert all(c["outcome"] in ("passed", "failed") for c in report["cases"]), proc.stdout[-2000:]
    case = next(c for c in report["cases"] if c["case_id"] == f"toolhop-{first['id']}-mandatory")
    feedback = [m["content"] for m in case["transcript"] if m["role"] == "tool"]
    assert feedback and feedback[0].startswith(f"an error occured when call {name}:"), feedback


def test_api_model_without_key_is_a_clear_usage_error(tmp_path):
    proc, report = run_suite(tmp_path, "--model", "gpt-4o")
    assert proc.returncode == 4 and report is None
    assert "OPENAI_API_KEY" in proc.stderr


def test_allure_results_carry_benchmark_labels_model_and_transcript(tmp_path):
    alluredir = tmp_path / "allure"
    agent = GoldAgent(load_records(BUNDLED))
    with FakeOpenAIServer(agent) as server:
        proc, _ = run_suite(
            tmp_path, "--base-url", server.base_url, "--api-key", "t", "--model", "gold-agent",
            "--scenario", "mandatory", "--limit", "2", "--alluredir", str(alluredir), "-n", "2",
        )
    results = [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]
    assert len(results) == 2, proc.stdout[-2000:]
    records = {str(r["id"]): r for r in load_records(BUNDLED)}
    for result in results:
        labels = {(label["name"], label["value"]) for label in result["labels"]}
        sample = re.search(r"toolhop-(\d+)-", result["name"] + json.dumps(result["parameters"])).group(1)
        hops = len(records[sample]["sub_task"])
        assert {("epic", "toolhop"), ("feature", "mandatory"), ("story", f"hops={hops}")} <= labels
        assert {"name": "model", "value": "'gold-agent'"} in result["parameters"]
        names = {a["name"] for a in result["attachments"]}
        assert {"transcript", "tool calls"} <= names
    globals_ = [json.loads(p.read_text()) for p in alluredir.glob("*-globals.json")]
    # Named by model and run, so several runs in one results folder stay apart.
    assert any(a["name"].startswith("gold-agent · run ") and a["name"].endswith(" · toolbench metrics")
               for g in globals_ for a in g["attachments"])


@pytest.mark.parametrize("workers", ["0", "2"])
def test_junit_xml_carries_a_compact_summary_not_the_transcript(tmp_path, workers):
    junit = tmp_path / "junit.xml"
    proc, report = run_suite(tmp_path, "--model", "oracle", "--limit", "1", "-n", workers,
                             "--junitxml", str(junit))
    assert proc.returncode == 0 and len(report["cases"]) == 3
    import xml.etree.ElementTree as ET

    cases = ET.parse(junit).getroot().findall(".//testcase")
    assert len(cases) == 3
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.findall("./properties/property")}
        assert props["toolbench.outcome"] == "passed" and props["toolbench.answer_correct"] == "1.0"
        assert "toolbench_result" not in props and all(len(v) < 100 for v in props.values())


def test_interrupted_run_keeps_its_results_and_a_rerun_resumes_from_the_cache(tmp_path):
    import signal
    import time

    slow = delayed(0.5, lambda b, i: (200, {}, completion("<answer>x</answer>")))
    report = tmp_path / "interrupted.json"
    with FakeOpenAIServer(slow) as server:
        args = ["--base-url", server.base_url, "--api-key", "t", "--model", "m",
                "--scenario", "direct", "--concurrency", "2", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs")]
        data = ["--data-dir", str(SHARED)] if SHARED_TOOLHOP.exists() else []
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:cacheprovider",
             "--toolbench-json", str(report), *args, *data],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            # A child inherits an ignored SIGINT (Python then installs no KeyboardInterrupt
            # handler): give it the default disposition so the Ctrl-C below reaches pytest.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        journal_glob = (tmp_path / "runs").glob
        # A wait for the first results, not a bound: pytest's start-up and collection come first
        # and take many times longer on a busy machine.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not any(
            j.read_text().count("\n") >= 3 for j in journal_glob("*/results.jsonl")
        ):
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 2, out[-2000:]
        kept = json.loads(report.read_text())["cases"]
        # the run's journal, compacted at the session end (results/case_store.py)
        journal = [r for folder in journal_glob("*") for r in read_cases(folder)]
        assert len(kept) >= 3 and len(journal) == len(kept)
        total = len(load_records(SHARED_TOOLHOP if data else BUNDLED))
        assert len(kept) < total

        before = len(server.requests)
        _, resumed = run_suite(tmp_path, *args, *data)
        assert len(resumed["cases"]) == total
        assert len(server.requests) - before <= total - len(kept)  # finished cases are not re-asked
