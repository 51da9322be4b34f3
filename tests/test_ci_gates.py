"""The suite as a CI pipeline runs it: exit codes, JUnit XML, early validation, partial runs.

Everything runs ``pytest suites/toolhop`` in a subprocess against the bundled sample and a real
local HTTP endpoint (tests/fake_openai_server.py), and reads what a CI system reads: the exit
status, the JUnit XML (parsed), stdout/stderr and the JSON report.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, completion, delayed, error_body, reply, tool_call
from pytest_toolbench.exitcodes import ToolbenchExit
from shared_data import BUNDLED_TOOLHOP as BUNDLED

REPO = Path(__file__).resolve().parents[1]
RECORDS = json.loads(BUNDLED.read_text())
N = len(RECORDS)  # records in the bundled sample (one case per record and scenario)


def suite_cmd(tmp_path: Path, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly",
        "-o", f"cache_dir={tmp_path / 'pytest-cache'}", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"),
        "--toolbench-json", str(tmp_path / "report.json"), "--junitxml", str(tmp_path / "junit.xml"),
        *args,
    ]


def run_suite(tmp_path: Path, *args: str, timeout: float = 300):
    for name in ("report.json", "junit.xml"):
        (tmp_path / name).unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run(suite_cmd(tmp_path, *args), cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env)
    report = tmp_path / "report.json"
    return proc, json.loads(report.read_text()) if report.exists() else None


def junit_cases(tmp_path: Path) -> list[ET.Element]:
    return list(ET.parse(tmp_path / "junit.xml").getroot().iter("testcase"))


def props(case: ET.Element) -> dict[str, str]:
    return {p.get("name"): p.get("value") for p in case.iter("property")}


def http(server: FakeOpenAIServer, *extra: str) -> list[str]:
    return ["--base-url", server.base_url, "--api-key", "t", "--model", "m", *extra]


def wrong(body: dict, index: int):
    """Wrong for every record but one: upstream's scorer strips gold "0" to "" (a substring of
    anything), so record 9005 counts correct whatever the answer (code/evaluation_*.py)."""
    return 200, {}, completion("<answer>xyz</answer>")


def gold_for(body: dict) -> dict:
    question = body["messages"][0]["content"].rsplit("Question: ", 1)[1]
    return next(r for r in RECORDS if r["question"] == question)


def half_right(body: dict, index: int):
    record = gold_for(body)
    answer = record["answer"] if record["id"] % 2 == 0 else "definitely-wrong"
    return 200, {}, completion(f"<answer>{answer}</answer>")


# --------------------------------------------------------------------------- gates and JUnit
@pytest.mark.parametrize("workers", ["0", "2"])
def test_only_wrong_answers_and_a_passing_gate_exit_0_with_no_junit_failure(tmp_path, workers):
    with FakeOpenAIServer(wrong) as server:
        proc, report = run_suite(
            tmp_path, *http(server, "--scenario", "direct", "-n", workers, "--no-cache"),
            "--gate", "toolhop.direct.accuracy<=0.5", "--gate", "toolhop.direct.error_rate<=0",
        )
    assert proc.returncode == ToolbenchExit.OK, proc.stdout[-3000:]
    cases = junit_cases(tmp_path)
    suite = [c for c in cases if c.get("classname", "").startswith("suites.")]
    gates = [c for c in cases if c.get("classname") == "toolbench-gates"]
    outcomes = {c["case_id"]: c["outcome"] for c in report["cases"]}
    n_wrong = sum(o == "failed" for o in outcomes.values())
    assert len(suite) == N and n_wrong == N - 1
    for c in suite:  # the case outcome stays visible as a JUnit property
        case_id = c.get("name").split("[")[1].rstrip("]")
        assert props(c)["toolbench.outcome"] == outcomes[case_id]
        if outcomes[case_id] == "failed":
            assert props(c)["toolbench.failure_message"].startswith("question:")
    assert not any(c.find("failure") is not None or c.find("error") is not None for c in cases)
    # One JUnit testcase per --gate, with its verdict and reason.
    assert [g.get("name") for g in gates] == ["toolhop.direct.accuracy<=0.5",
                                              "toolhop.direct.error_rate<=0"]
    assert all(props(g)["toolbench.gate.verdict"] == "passed" for g in gates)
    assert f"actual {1 / N:.4g} satisfies" in props(gates[0])["toolbench.gate.reason"]
    root = ET.parse(tmp_path / "junit.xml").getroot()
    suite_el = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite_el.get("failures") == "0" and suite_el.get("errors") == "0"
    # Wrong answers stay visible in the terminal and the JSON; the gate table is printed last.
    assert f"{n_wrong} wrong" in proc.stdout
    tail = proc.stdout.strip().splitlines()
    assert tail[-1] == "gates PASSED (exit status 0 OK): set by the gates, not single cases"
    # A table row, or at 80 columns a block "PASS  <gate>  (actual x)" (report/terminal.py).
    assert any(line.startswith(("| PASS", "PASS  ")) and "accuracy<=0.5" in line
               for line in tail[-8:])


def test_failing_gate_exits_gate_failed_and_is_a_junit_failure(tmp_path):
    with FakeOpenAIServer(half_right) as server:
        proc, report = run_suite(tmp_path, *http(server, "--scenario", "direct", "--no-cache"),
                                 "--gate", "toolhop.direct.accuracy>=0.9")
    assert proc.returncode == ToolbenchExit.GATE_FAILED, proc.stdout[-3000:]
    gate = next(c for c in junit_cases(tmp_path) if c.get("classname") == "toolbench-gates")
    failure = gate.find("failure")
    assert failure is not None and "violates >= 0.9" in failure.get("message")
    assert report["gates"][0]["passed"] is False
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("gates FAILED (exit status 10") and len(last) <= 80, last


def test_too_many_infrastructure_errors_exit_infra_errors(tmp_path):
    def down(body: dict, index: int):
        return 500, {}, error_body(500, "down")

    with FakeOpenAIServer(down) as server:
        proc, report = run_suite(
            tmp_path, *http(server, "--scenario", "direct", "--limit", "2", "--max-retries", "0",
                            "--no-cache"),
            "--gate", "toolhop.direct.accuracy>=0", "--max-error-rate", "0.5",
        )
    assert proc.returncode == ToolbenchExit.INFRA_ERRORS, proc.stdout[-3000:]
    cases = junit_cases(tmp_path)
    rate = next(c for c in cases if c.get("classname") == "toolbench-error-rate")
    assert rate.find("failure") is not None
    # The errored cases are skipped in JUnit (the error-rate testcase carries the verdict).
    suite = [c for c in cases if c.get("classname", "").startswith("suites.")]
    assert all(c.find("skipped") is not None and c.find("error") is None for c in suite)
    assert all(props(c)["toolbench.error_kind"] == "http_500" for c in suite)
    assert "2 infra-error" in proc.stdout


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_failing_test_beside_the_suite_fails_a_run_whose_gates_pass(tmp_path, workers):
    """With gates the cases' own outcomes do not decide the exit status; a test that fails
    otherwise (here a plain one collected beside the suite) still fails the run: a CI step gated
    on metrics must not go green over it."""
    plain = tmp_path / "plain" / "test_plain.py"
    plain.parent.mkdir()
    plain.write_text("def test_fine():\n    pass\n\n\ndef test_broken():\n    assert 1 == 2\n")
    with FakeOpenAIServer(wrong) as server:
        proc, report = run_suite(
            tmp_path, *http(server, "--scenario", "direct", "-n", workers, "--no-cache"),
            "--gate", "toolhop.direct.accuracy<=0.5", str(plain))
    assert proc.returncode == ToolbenchExit.CASES_FAILED, proc.stdout[-3000:]
    *gates, tests = report["gates"]
    assert gates and all(g["passed"] for g in gates)  # the metric gate and the error-rate limit
    assert tests["kind"] == "tests" and tests["passed"] is False and tests["actual"] == 1
    assert "test_plain.py::test_broken" in tests["reason"]
    assert "test_fine" not in tests["reason"]
    cases = junit_cases(tmp_path)
    (check,) = [c for c in cases if c.get("classname") == "toolbench-run"]
    assert check.get("name") == "every other test passed" and check.find("failure") is not None
    (broken,) = [c for c in cases if c.get("name") == "test_broken"]
    assert broken.find("failure") is not None  # pytest's own testcase, as without gates
    # the wrong answers stay passes: only the plain test is named
    assert not any(c.find("failure") is not None for c in cases
                   if c.get("classname", "").startswith("suites."))
    last = proc.stdout.strip().splitlines()[-1]
    assert last == "gates FAILED (exit status 1 CASES_FAILED): 1 other test failed (named above)"
    assert "test_plain.py::test_broken" in proc.stdout.split("pytest-toolbench gates")[-1]


def test_without_gates_wrong_answers_still_fail_as_before(tmp_path):
    with FakeOpenAIServer(half_right) as server:
        proc, report = run_suite(tmp_path, *http(server, "--scenario", "direct", "--no-cache"))
    assert proc.returncode == ToolbenchExit.CASES_FAILED
    failures = [c for c in junit_cases(tmp_path) if c.find("failure") is not None]
    assert len(failures) == sum(c["outcome"] == "failed" for c in report["cases"]) >= 1


# --------------------------------------------------------------------------- early validation
@pytest.mark.parametrize(
    "args,needle",
    [
        (["--gate", "toolhop.direct.acuracy>=0.5"], "has no metric 'acuracy'"),
        (["--gate", "toolhop.direkt.accuracy>=0.5"], "has no scenario 'direkt'"),
        (["--gate", "toolhop.direct[hop=3].accuracy>=0.5"], "no subgroup label 'hop'"),
        (["--gate", "nobench.direct.accuracy>=0.5"], "unknown benchmark 'nobench'"),
        (["--gate", "toolhop.direct.query_error_rate<=0.5"], "has no metric 'query_error_rate'"),
        (["--gate", "toolhop.direct.accuracy>=45"], "write 'toolhop.direct.accuracy>=0.45' or"),
        (["--gate", "toolhop.direct[hops=99].accuracy>=0.5"], "no selected case has hops=99"),
        (["--scenario", "direct", "--gate", "toolhop.free.accuracy>=0.5"], "not among the selected"),
        (["--limit", "0"], "--limit 0: must be at least 1"),
        (["--sandbox-workers", "0"], "--sandbox-workers 0: must be at least 1"),
        (["--case-timeout", "0"], "--case-timeout 0.0: must be positive"),
    ],
)
def test_bad_options_are_one_line_usage_errors_before_any_model_call(tmp_path, args, needle):
    with FakeOpenAIServer(wrong) as server:
        proc, report = run_suite(tmp_path, *http(server, "--no-cache"), *args)
        assert server.requests == []
    assert proc.returncode == ToolbenchExit.USAGE_ERROR, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and needle in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and report is None


@pytest.mark.parametrize(("args", "needle"), [
    (["--gate", "toolhop.direct[hops=99].accuracy>=0.5"], "no selected case has hops=99"),
    (["--data-dir", "BAD"], "answer: must be a string"),
])
def test_under_xdist_validation_still_precedes_every_model_call(tmp_path, args, needle):
    """The controller validates after xdist has started its workers (their start-up overlaps
    it), yet a worker runs nothing before the controller's test loop: no request is sent."""
    bad = tmp_path / "bad"
    (bad / "toolhop").mkdir(parents=True)
    records = json.loads(BUNDLED.read_text())
    records[1]["answer"] = 5
    (bad / "toolhop" / "ToolHop.json").write_text(json.dumps(records))
    args = [str(bad) if a == "BAD" else a for a in args]
    with FakeOpenAIServer(wrong) as server:
        proc, report = run_suite(tmp_path, *http(server, "--no-cache", "-n", "2"), *args)
        assert server.requests == []
    assert proc.returncode == ToolbenchExit.USAGE_ERROR, proc.stdout + proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr and report is None


WATCH_VALIDATION = """
import pytest
from pytest_toolbench.session import run_start

def pytest_configure(config):
    validate = run_start.validate_and_record

    def watched(config):
        dsession = config.pluginmanager.getplugin("dsession")
        started = getattr(dsession, "nodemanager", None) is not None
        with open({out!r}, "w") as f:
            f.write("workers started" if started else "no workers yet")
        return validate(config)

    run_start.validate_and_record = watched
"""


def test_under_xdist_the_workers_start_before_the_controller_validates(tmp_path):
    """Their start-up (imports, collection) overlaps the controller's parse of the data: xdist
    starts them in its own sessionstart hook, which must run before the validation."""
    out = tmp_path / "seen.txt"
    (tmp_path / "watch_validation.py").write_text(WATCH_VALIDATION.format(out=str(out)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    proc = subprocess.run([*suite_cmd(tmp_path, "--model", "oracle", "-n", "2"), "-p", "watch_validation"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert out.read_text() == "workers started"


@pytest.mark.parametrize("gates", [[], ["--gate", "toolhop.direct.accuracy>=0"]])
def test_a_selection_matching_no_case_fails_before_any_model_call(tmp_path, gates):
    with FakeOpenAIServer(wrong) as server:
        proc, _ = run_suite(tmp_path, *http(server, "--sample-ids", "no-such-id"), *gates)
        assert server.requests == []
    assert proc.returncode == ToolbenchExit.NO_CASES, proc.stdout + proc.stderr
    assert "the selection matches no case (--sample-ids no-such-id)" in proc.stderr
    # what went wrong, and what the suite's ids look like
    assert f"no sample no-such-id in toolhop (toolhop's ids look like '{RECORDS[0]['id']}')" \
        in proc.stderr


def test_a_long_sample_id_list_that_matches_nothing_is_named_in_one_short_line(tmp_path):
    """Thirty ids from another benchmark made a 400-character line naming each one twice."""
    ids = [f"x{i}" for i in range(30)]
    proc, _ = run_suite(tmp_path, "--model", "oracle", "--sample-ids", ",".join(ids))
    assert proc.returncode == ToolbenchExit.NO_CASES, proc.stdout + proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("Exit: ")]
    assert "(--sample-ids x0,x1,x2,x3,x4,x5,x6,x7,x8,x9 and 20 more)" in line
    assert "no sample x0, x1, x2, x3, x4, x5, x6, x7, x8, x9 and 20 more in toolhop" in line
    assert "x29" not in line and len(line) < 250, line


def test_a_mistyped_sample_id_among_good_ones_is_named_and_the_others_run(tmp_path):
    """A typo in --sample-ids was dropped without a word: the run scored the other ids only. An
    id the suite has but --scenario leaves out is no typo and is not named."""
    good, other = str(RECORDS[0]["id"]), str(RECORDS[1]["id"])
    proc, report = run_suite(tmp_path, "--model", "oracle", "--scenario", "direct",
                             "--sample-ids", f"{good},{other},{good}0", "-W", "default")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (f"pytest-toolbench: --sample-ids: no sample {good}0 in toolhop (toolhop's ids look "
            f"like '{RECORDS[0]['id']}')") in proc.stdout
    assert sorted(c["case_id"] for c in report["cases"]) == sorted(
        f"toolhop-{i}-direct" for i in (good, other))
    # a project whose settings make warnings errors (-W error, filterwarnings = error): one
    # line, exit 4, no model call (it was INTERNALERROR, a traceback, exit 3)
    strict, _ = run_suite(tmp_path, "--model", "oracle", "--sample-ids", f"{good},{good}0",
                          "-W", "error")
    assert strict.returncode == ToolbenchExit.USAGE_ERROR, strict.stdout[-2000:] + strict.stderr
    assert strict.stderr.startswith(f"ERROR: pytest-toolbench: --sample-ids: no sample {good}0")
    assert "INTERNALERROR" not in strict.stdout + strict.stderr


def test_a_targeted_suite_left_without_cases_says_so_under_the_tables(tmp_path):
    """Two suites, a selection only ToolHop has: FamilyTool had no table and no line saying why
    (only pytest's "got empty parameter set" skip, under -rs)."""
    proc = subprocess.run(
        [*suite_cmd(tmp_path, "--model", "oracle", "--sample-ids", str(RECORDS[0]["id"])),
         "suites/familytool"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "toolhop subset: 3 of" in proc.stdout
    assert re.search(r"^familytool: 0 of \d+ cases, no metrics$", proc.stdout, re.M), proc.stdout
    # the record names it too (`toolbench runs`, the leaderboard's data groups read it there)
    coverage = json.loads((tmp_path / "report.json").read_text())["run"]["coverage"]
    assert coverage["familytool"]["cases"] == 0 and coverage["familytool"]["subset"] is True
    assert coverage["toolhop"]["cases"] == 3
    # JUnit (and Allure) had "test_familytool[NOTSET]: got empty parameter set for (case)"
    (skipped,) = [c for c in junit_cases(tmp_path) if c.find("skipped") is not None]
    assert skipped.get("name") == "test_familytool[no-case-selected]"
    assert skipped.find("skipped").get("message") == (  # type: ignore[union-attr]
        f"pytest-toolbench: the selection (--sample-ids {RECORDS[0]['id']}) left no familytool "
        f"case of {coverage['familytool']['suite_cases']}")


def test_an_unknown_scenario_is_refused_naming_the_scenarios_there_are(tmp_path):
    """It said ``unknown --scenario ['bogus']``, a Python list and no hint of the right names."""
    proc, _ = run_suite(tmp_path, "--model", "oracle", "--scenario", "bogus,direct")
    assert proc.returncode == ToolbenchExit.USAGE_ERROR, proc.stdout + proc.stderr
    assert ("pytest-toolbench: unknown --scenario bogus; the scenarios are toolhop: direct, "
            "mandatory, free") in proc.stderr


def test_deselecting_every_case_fails_with_no_cases(tmp_path):
    proc, report = run_suite(tmp_path, "--model", "oracle", "-k", "no_such_case", "--gate",
                             "toolhop.direct.accuracy>=0")
    assert proc.returncode == ToolbenchExit.NO_CASES
    # a JSON report with no case (run_suite removed the last one): a CI step reading the path
    # never reads an earlier run's file as this run's
    assert report is not None
    assert (report["cases"], report["partial"], report["run"]["exit_status"]) == ([], False, 5)
    assert [(g["gate"], g["passed"], g["reason"]) for g in report["gates"]] == [
        ("toolhop.direct.accuracy>=0", False, "no case ran")]
    # the JUnit file says so: the gate failed on nothing, and the data the run was on
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    (gate,) = suite.iter("testcase")
    assert gate.get("name") == "toolhop.direct.accuracy>=0" and gate.find("failure") is not None
    suite_props = props(suite.find("properties"))
    assert suite_props["toolbench.data.kind"] == "sample" and "toolbench.data.toolhop" in suite_props


def test_dataset_errors_list_every_bad_record_on_one_line_each(tmp_path):
    records = json.loads(BUNDLED.read_text())
    records[1]["answer"] = 3
    del records[3]["question"]
    records[4]["id"] = records[0]["id"]
    data = tmp_path / "data" / "toolhop"
    data.mkdir(parents=True)
    (data / "ToolHop.json").write_text(json.dumps(records))
    proc, _ = run_suite(tmp_path, "--model", "oracle", "--data-dir", str(tmp_path / "data"))
    assert proc.returncode == ToolbenchExit.USAGE_ERROR
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "ToolHop.json record #" in ln]
    assert len(lines) == 3, proc.stderr
    assert "record #1" in lines[0] and "answer: must be a string" in lines[0]
    assert "record #3" in lines[1] and "missing keys ['question']" in lines[1]
    assert "record #4" in lines[2] and "duplicate id (also record #0)" in lines[2]


# --------------------------------------------------------------------------- data, subset, cache
def test_summary_and_json_name_the_data_the_subset_and_the_cache(tmp_path):
    import hashlib

    sha = hashlib.sha256(BUNDLED.read_bytes()).hexdigest()
    with FakeOpenAIServer(half_right) as server:
        first, first_report = run_suite(tmp_path, *http(server, "--scenario", "direct", "--limit", "2"))
        proc, report = run_suite(tmp_path, *http(server, "--scenario", "direct", "--limit", "2"),
                                 "-vv")  # -v (over the command's -q): each data file in full
    # The endpoint's usage (10 prompt + 5 completion a reply), summed; the re-run's replies come
    # from the cache with the tokens they were recorded with, and the line says so.
    assert "tokens: 20 prompt + 10 completion over 2 model calls\n" in first.stdout
    assert ("tokens: 20 prompt + 10 completion over 2 model calls (2 from the cache, as recorded)"
            in " ".join(proc.stdout.split()))  # wrapped at the terminal's width
    for rec in (first_report, report):
        assert rec["run"]["usage"] == {"prompt_tokens": 20, "completion_tokens": 10}
        assert sum(c["usage"]["prompt_tokens"] for c in rec["cases"]) == 20
    # toolbench runs: the same words under each run, newest first; the table's cell the total
    from pytest_toolbench.runs.listing import render_runs
    from pytest_toolbench.runs.store import list_runs

    listed = render_runs(list_runs(tmp_path / "runs"), 80)
    assert [" ".join(b.split("tokens:", 1)[1].split("gates:")[0].split())
            for b in listed.split("\n\n")] == [
        "20 prompt + 10 completion over 2 model calls (2 from the cache, as recorded)",
        "20 prompt + 10 completion over 2 model calls"]
    table = render_runs(list_runs(tmp_path / "runs"), 400).splitlines()
    at = table[0].index("tokens")
    assert [row[at:].split()[0] for row in table] == ["tokens", "30", "30"]
    out = proc.stdout
    flat = " ".join(line.strip() for line in out.splitlines())  # data lines wrap at the width
    assert f"data: toolhop: {BUNDLED}, {N} records, sha256 {sha[:12]}" in flat
    assert "data: toolhop: bundled sample (not the real benchmark), no upstream revision" in flat
    assert report["run"]["data"]["kind"] == "sample"
    assert f"fingerprint {report['run']['data']['fingerprint']}" in flat
    assert f"toolhop subset: 2 of {3 * N} cases" in out
    assert "replies from the response cache: 2 of 2 model calls" in out
    source = report["run"]["data_sources"][0]
    assert source["sha256"] == sha and source["records"] == N and source["bundled"] is True
    assert report["run"]["coverage"]["toolhop"] == {"cases": 2, "suite_cases": 3 * N, "subset": True}
    # (the re-run is answered whole by the result cache: runtime/result_cache.py)
    assert report["run"]["cache"] == {"model_calls": 2, "replies_from_cache": 2, "results_from_cache": 2}


def test_replies_without_usage_print_no_tokens_line():
    """The oracle, a replay or an endpoint that sends no ``usage``: no "tokens: 0" line."""
    from pytest_toolbench.results.run_sections import TokenTotals

    assert TokenTotals().text(6) is None and TokenTotals().text(0, 0) is None
    assert (TokenTotals(prompt_tokens=1_234_567).text(952)
            == "1,234,567 prompt + 0 completion over 952 model calls")


def test_last_failed_reruns_the_wrong_answers_and_says_it_is_a_subset(tmp_path):
    with FakeOpenAIServer(half_right) as server:
        first, full = run_suite(tmp_path, *http(server, "--scenario", "direct"))
        assert first.returncode == 1 and "subset" not in json.dumps(full["run"]["coverage"]).replace(
            '"subset": true', "")
        proc, report = run_suite(tmp_path, *http(server, "--scenario", "direct", "--lf"))
        # With gates, --lf still knows the wrong answers although JUnit shows them passed.
        gated, _ = run_suite(tmp_path, *http(server, "--scenario", "direct"),
                             "--gate", "toolhop.direct.accuracy>=0")
        again, after_gates = run_suite(tmp_path, *http(server, "--scenario", "direct", "--lf"))
    odd = sorted(c["case_id"] for c in full["cases"] if c["outcome"] == "failed")
    assert sorted(c["case_id"] for c in report["cases"]) == odd, proc.stdout[-2000:]
    assert report["run"]["coverage"]["toolhop"]["subset"] is True
    assert f"toolhop subset: {len(odd)} of {3 * N} cases" in proc.stdout
    assert gated.returncode == 0
    assert sorted(c["case_id"] for c in after_gates["cases"]) == odd


def test_failed_first_after_a_gated_run_puts_the_wrong_answers_first(tmp_path):
    """The gated run's JUnit shows every case passed; --ff must still know which were wrong."""
    gate = ("--gate", "toolhop.direct.accuracy>=0")
    with FakeOpenAIServer(half_right) as server:
        _, full = run_suite(tmp_path, *http(server, "--scenario", "direct", *gate))
        proc, report = run_suite(tmp_path, *http(server, "--scenario", "direct", "--ff", *gate))
    wrong_ids = {c["case_id"] for c in full["cases"] if c["outcome"] == "failed"}
    assert 0 < len(wrong_ids) < N
    order = [c.get("name", "").split("[", 1)[-1].rstrip("]") for c in junit_cases(tmp_path)
             if c.get("classname", "").endswith("test_toolhop")]
    assert len(order) == N and len(report["cases"]) == N, proc.stdout[-2000:]
    assert set(order[: len(wrong_ids)]) == wrong_ids, order


# --------------------------------------------------------------------------- endpoint faults
def test_case_timeout_is_an_infrastructure_error_of_its_own_kind(tmp_path):
    slow = delayed(3.0, reply("<answer>x</answer>"))
    with FakeOpenAIServer(slow) as server:
        proc, report = run_suite(
            tmp_path, *http(server, "--scenario", "direct", "--limit", "1", "--no-cache",
                            "--case-timeout", "0.5"),
        )
    case = report["cases"][0]
    assert case["outcome"] == "error" and case["error"]["kind"] == "case_timeout"
    assert "--case-timeout 0.5s" in case["error"]["message"]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_pytest_timeout_is_an_infrastructure_error_and_the_case_is_reported(tmp_path, workers):
    """pytest-timeout's ``--timeout`` (or a project's ``timeout`` setting), its SIGALRM raised in
    a test's wait for its case: the test ended in a traceback through the harness's event loop,
    the case had no result and the run read "PARTIAL RESULTS ... never reported". It is an
    infrastructure error of kind test_timeout, its request given up; the other cases score."""
    slow_first = delayed(4.0, reply("<answer>x</answer>"), only_first=1)
    with FakeOpenAIServer(slow_first) as server:
        proc, report = run_suite(
            tmp_path, *http(server, "--scenario", "direct", "--limit", "2", "--no-cache",
                            "--concurrency", "1", "--timeout", "1", *workers),
        )
    assert "PARTIAL" not in proc.stdout and not report["run"].get("partial"), proc.stdout[-3000:]
    errors = [c for c in report["cases"] if c["outcome"] == "error"]
    assert [c["error"]["kind"] for c in errors] == ["test_timeout"], proc.stdout[-3000:]
    assert "stopped while it waited: Timeout" in errors[0]["error"]["message"]  # pytest-timeout's
    assert len(report["cases"]) == 2 and "test_timeout x1" in proc.stdout
    assert "Traceback" not in proc.stdout and "selectors.py" not in proc.stdout


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_both_transports_send_through_the_environment_s_proxy(tmp_path, transport):
    """Behind a proxy (HTTP_PROXY, a company network): the endpoint's host resolves only there.
    The help said only httpx honoured the variable; the default aiohttp client does too, and so
    does the shared SDK process, which gets them from the pytest process."""
    with FakeOpenAIServer(reply("<answer>x</answer>")) as proxy:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("OPENAI_") and not k.lower().endswith("_proxy")}
        env.update(HTTP_PROXY=proxy.base_url.removesuffix("/v1"), NO_PROXY="")
        proc = subprocess.run(
            suite_cmd(tmp_path, "--base-url", "http://llm.internal.invalid/v1", "--api-key",
                      "t", "--model", "m", "--scenario", "direct", "--limit", "1", "--no-cache",
                      "--max-retries", "0", "--http-transport", transport),
            cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    report = json.loads((tmp_path / "report.json").read_text())
    assert [c["outcome"] for c in report["cases"]] == ["failed"], proc.stdout[-2000:]
    assert len(proxy.requests) == 1


def _tool_then_gold(body: dict, index: int):
    record = gold_for(body)
    if body.get("tools") and len(body["messages"]) == 1:
        name = body["tools"][0]["function"]["name"]
        return 200, {}, completion(None, [tool_call(name, {}, call_id="call_0")])
    return 200, {}, completion(f"<answer>{record['answer']}</answer>")


def _first_request_fails(status: int):
    def handler(body: dict, index: int):
        if index == 0:
            return status, {"Retry-After": "0"}, error_body(status)
        return _tool_then_gold(body, index)

    return handler


def test_retries_are_recorded_per_case_and_upstream_lost_turns_reproduces_upstream(tmp_path):
    one = ["--scenario", "mandatory", "--limit", "1", "--no-cache"]
    with FakeOpenAIServer(_first_request_fails(503)) as server:
        _, retried = run_suite(tmp_path, *http(server, *one))
        retried_requests = len(server.requests)
    with FakeOpenAIServer(_first_request_fails(503)) as server:
        _, lost = run_suite(tmp_path, *http(server, *one, "--upstream-lost-turns"))
        lost_requests = len(server.requests)
    default = retried["cases"][0]
    assert default["outcome"] == "passed"
    assert default["details"]["endpoint_retries"]["count"] == 1
    assert default["details"]["endpoint_retries"]["statuses"] == {"http_503": 1}
    assert retried_requests == 3  # 503, retry: tool call, answer
    # Upstream: the 503 consumes turn 0 with nothing appended; the model is asked again.
    upstream = lost["cases"][0]
    assert upstream["outcome"] == "passed" and lost_requests == 3
    assert upstream["details"]["lost_turns"][0]["turn"] == 0
    assert upstream["details"]["lost_turns"][0]["kind"] == "http_503"
    assert "endpoint_retries" not in upstream["details"]
    assert upstream["details"]["turn"] == default["details"]["turn"] + 1
    assert [m["role"] for m in upstream["transcript"]] == [m["role"] for m in default["transcript"]]


def test_upstream_lost_turns_on_a_dead_endpoint_scores_every_case_wrong(tmp_path):
    def down(body: dict, index: int):
        return 500, {}, error_body(500)

    with FakeOpenAIServer(down) as server:
        _, report = run_suite(tmp_path, *http(server, "--scenario", "direct", "--limit", "2",
                                              "--no-cache", "--upstream-lost-turns"))
        assert len(server.requests) == 2  # one call per direct case, never retried
    assert [c["outcome"] for c in report["cases"]] == ["failed", "failed"]
    assert all(c["details"]["answer_status"] == "no_answer" for c in report["cases"])


def test_sigterm_writes_summary_and_json_marked_partial(tmp_path):
    slow = delayed(0.5, reply("<answer>x</answer>"))
    with FakeOpenAIServer(slow) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        proc = subprocess.Popen(
            suite_cmd(tmp_path, *http(server, "--no-cache", "--concurrency", "1", "-n", "0")),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        deadline = time.monotonic() + 120
        while len(server.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == ToolbenchExit.INTERRUPTED, out[-2000:] + err[-2000:]
    assert "PARTIAL RESULTS: the run was interrupted (SIGTERM)" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["partial"] is True and report["run"]["interrupted_by"] == "SIGTERM"
    assert 1 <= len(report["cases"]) < 3 * N
