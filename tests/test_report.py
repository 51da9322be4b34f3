"""Reports: terminal summary, JSON report, result journal and Allure results."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from pytest_toolbench.report.allure_report import (
    _write_container_fallback,
    attach_case,
    attach_run_metrics,
    tool_calls_from_transcript,
)
from pytest_toolbench.fileio import indented_json
from pytest_toolbench.report.json_report import build_json_report, record_of
from pytest_toolbench.report.terminal import render_summary
from pytest_toolbench.results.aggregate import RunMetrics, aggregate
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome
from pytest_toolbench.results.gates import error_rate_verdicts, evaluate_gates, parse_gates
from spawned import run_in_processes
from pytest_toolbench.results.journal import JournalError, ResultJournal, read_journal
from pytest_toolbench.results.metrics import MetricSpec

pytest_plugins = ["pytester"]  # the Allure test runs a real pytest session with --alluredir

REPO = Path(__file__).resolve().parents[1]
SPECS = {
    "toolhop": (
        MetricSpec(name="accuracy", value="answer_correct"),
        MetricSpec(
            name="instance_error_rate",
            kind="ratio",
            value="error_calls",
            denominator="calls",
            higher_is_better=False,
            scenarios=("mandatory",),
        ),
    )
}
BREAKDOWN = {"toolhop": ("hops",)}

TRANSCRIPT = [
    {"role": "user", "content": "Who directed the film?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "film_director", "arguments": '{"film": "Heat"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "oops", "arguments": "{bad"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '"Michael Mann"'},
    {"role": "tool", "tool_call_id": "call_2", "content": "name 'oops' is not defined"},
    {"role": "assistant", "content": "<answer>Michael Mann</answer>"},
]


def make_case(
    i: int,
    correct: bool,
    hops: int,
    *,
    error: str | None = None,
    calls: tuple[int, int] | None = None,
    scenario: str = "mandatory",
    parse_failures: int = 0,
) -> CaseResult:
    values = {} if error else {"answer_correct": float(correct)}
    if calls and not error:
        values.update(error_calls=float(calls[0]), calls=float(calls[1]))
    return CaseResult(
        case_id=f"toolhop-{i:03d}-{scenario}",
        benchmark="toolhop",
        scenario=scenario,
        model="m",
        outcome=Outcome.ERROR if error else (Outcome.PASSED if correct else Outcome.FAILED),
        labels={"hops": hops, "domain": "film"},
        values=values,
        details={"question": f"q{i}?", "gold": "Michael Mann", "prediction": "<answer>x</answer>"},
        error=InfraError(kind=error, message="server said 500") if error else None,
        transcript=TRANSCRIPT,
        parse_failures=[
            {"reason": "unextracted_tool_call", "raw_text": f"<tool_call>{{broken {i}", "detail": ""}
        ]
        * parse_failures,
    )


def run_cases() -> list[CaseResult]:
    # hops 3: 4/5 correct, hops 10: 3/5 correct -> 7/10; 2 http_500 errors.
    rs = [make_case(i, i < 4, 3, calls=(1, 4)) for i in range(5)]
    rs += [make_case(5 + i, i < 3, 10, calls=(0, 4), parse_failures=int(i == 0)) for i in range(5)]
    rs += [make_case(20, False, 3, error="http_500"), make_case(21, False, 10, error="http_500")]
    return rs


@pytest.fixture(scope="module")
def metrics() -> RunMetrics:
    return aggregate(run_cases(), SPECS, BREAKDOWN)


# --- terminal ---------------------------------------------------------------------------------


def test_render_summary_content_and_layout(metrics: RunMetrics) -> None:
    gates = parse_gates(["toolhop.mandatory.accuracy>=0.45", "toolhop.mandatory[hops=3].accuracy>0.9"])
    verdicts = evaluate_gates(gates, metrics) + error_rate_verdicts(metrics, 0.5)
    text = render_summary(metrics, verdicts, width=120)
    assert "toolhop / mandatory: 12 cases, 10 scored" in text
    assert re.search(r"\| accuracy\s+\|\s+70\.00% \| \[\d+\.\d\d%, \d+\.\d\d%\] \| 10 \|", text), text
    # 5 x (1 of 4) + 5 x (0 of 4) calls: 5 / 40 = 12.50% (not the 2 hop-group means averaged).
    assert re.search(r"\| instance_error_rate\s+\|\s+12\.50% \|", text), text
    assert "by hops" in text
    rows = [ln for ln in text.splitlines() if re.match(r"\|\s+(3|10) \|", ln)]
    assert [r.split("|")[1].strip() for r in rows] == ["3", "10"]  # natural order
    assert "80.00% [" in rows[0] and "n=5" in rows[0] and "6 (1 err)" in rows[0]
    assert "25.00% [25.00, 25.00] n=5" in rows[0]  # 1 of 4 calls in every case: no spread
    assert "60.00% [" in rows[1]
    assert "2 infrastructure errors excluded from metrics: http_500 x2" in text
    assert "1 tool-call parse failure in 1 case" in text
    assert "gates: 3 checked, 1 FAILED" in text
    assert re.search(r"\| PASS\s+\| toolhop\.mandatory\.accuracy>=0\.45\s+\|\s+0\.7 \|", text), text
    assert re.search(r"\| FAIL\s+\| toolhop\.mandatory\[hops=3\]\.accuracy>0\.9", text), text
    assert "\x1b[" not in text  # plain log, no ANSI codes
    assert max(len(ln) for ln in text.splitlines()) <= 120
    assert all(ln == ln.rstrip() for ln in text.splitlines())
    assert text.isascii()


def test_render_summary_narrow_and_empty() -> None:
    assert "no case results" in render_summary(RunMetrics(scenarios=[]), [])
    m = aggregate([make_case(1, True, 3)], SPECS, BREAKDOWN)
    text = render_summary(m, [], width=80)
    assert max(len(ln) for ln in text.splitlines()) <= 80
    assert "0 infrastructure errors" in text and "gates" not in text


# --- JSON ---------------------------------------------------------------------------------------


def test_json_report_is_complete_sorted_and_atomic(tmp_path: Path, metrics: RunMetrics) -> None:
    cases = run_cases()
    verdicts = evaluate_gates(parse_gates(["toolhop.mandatory.accuracy>=0.45"]), metrics)
    out = tmp_path / "reports" / "toolbench.json"
    path = record_of(metrics, reversed(cases), {"model": "m", "seed": 0}, verdicts).write(out)
    assert path == out
    assert [p.name for p in out.parent.iterdir()] == ["toolbench.json"]  # no temp leftovers
    data = json.loads(out.read_text(encoding="utf-8"))
    assert set(data) == {"schema_version", "partial", "missing_cases", "run", "metrics", "gates",
                         "cases"}
    assert data["partial"] is False and data["missing_cases"] == []
    assert data["run"]["model"] == "m" and data["run"]["seed"] == 0  # kept beside the run fields
    assert [c["case_id"] for c in data["cases"]] == sorted(c.case_id for c in cases)
    assert data["cases"][0]["transcript"] == TRANSCRIPT
    assert data["gates"][0]["passed"] is True
    assert RunMetrics.model_validate(data["metrics"]) == metrics
    assert [CaseResult.model_validate(c) for c in data["cases"]] == sorted(cases, key=lambda c: c.case_id)
    # Byte-identical regardless of input order; an existing report is replaced whole.
    first = out.read_bytes()
    record_of(metrics, cases, {"model": "m", "seed": 0}, verdicts).write(out)
    assert out.read_bytes() == first
    record_of(metrics, cases, {"model": "m", "seed": 0}).write(out)
    assert json.loads(out.read_text())["gates"] == []
    # The fast encoder writes what json.dumps(indent=2, ensure_ascii=False) would write.
    report = build_json_report(metrics, cases, {"model": "m", "seed": 0, "note": "é\u2028\x00"}, verdicts)
    assert indented_json(report) == (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode()


# --- journal ------------------------------------------------------------------------------------


def test_journal_roundtrip_and_truncated_tail(tmp_path: Path) -> None:
    path = tmp_path / "run" / "results.jsonl"
    cases = run_cases()[:4]
    with ResultJournal(path) as journal:
        for c in cases[:3]:
            journal.append(c)
    assert read_journal(path) == cases[:3]
    assert read_journal(tmp_path / "missing.jsonl") == []
    # Simulate a crash halfway through writing the fourth line.
    line = cases[3].model_dump_json()
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line[: len(line) // 2])
    with pytest.warns(UserWarning, match=r"results\.jsonl:4: skipping a truncated last journal line"):
        assert read_journal(path) == cases[:3]
    # A resumed run cuts the partial record before appending, so nothing fuses.
    ResultJournal(path).append(cases[3])
    assert read_journal(path) == cases
    assert path.read_text().count("\n") == 4


def test_journal_corrupt_middle_line_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    j = ResultJournal(path)
    j.append(make_case(1, True, 3))
    with path.open("a") as fh:
        fh.write('{"case_id": "x"}\n')  # valid JSON, not a CaseResult
    j.append(make_case(2, True, 3))
    with pytest.raises(JournalError, match=r"results\.jsonl:2: invalid journal record") as raised:
        read_journal(path)
    assert "\n" not in str(raised.value)  # one line, not pydantic's several


def _append_many(path: str, worker: int, count: int) -> None:
    journal = ResultJournal(path)
    for i in range(count):
        journal.append(make_case(worker * 1000 + i, i % 2 == 0, 3))


def test_journal_is_process_safe(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    run_in_processes(_append_many, [(str(path), w, 25) for w in range(4)], timeout=60)
    results = read_journal(path)
    assert len(results) == 100
    assert len({r.case_id for r in results}) == 100


# --- Allure -------------------------------------------------------------------------------------


def test_tool_calls_from_transcript() -> None:
    calls = tool_calls_from_transcript(TRANSCRIPT)
    assert calls == [
        {"turn": 1, "id": "call_1", "name": "film_director", "arguments": {"film": "Heat"}, "result": '"Michael Mann"'},
        {"turn": 1, "id": "call_2", "name": "oops", "arguments": "{bad", "result": "name 'oops' is not defined"},
    ]
    assert tool_calls_from_transcript([{"role": "assistant", "content": "hi"}]) == []


def test_attach_functions_are_noops_without_alluredir(metrics: RunMetrics) -> None:
    attach_case(make_case(1, True, 3), "m")  # must not raise outside an Allure run
    assert attach_run_metrics(metrics, "summary") is False


def test_container_fallback_links_existing_results(tmp_path: Path, metrics: RunMetrics) -> None:
    (tmp_path / "abc-result.json").write_text(json.dumps({"uuid": "abc", "name": "t"}))
    assert _write_container_fallback(tmp_path, "the table", metrics.model_dump_json())
    (container_file,) = tmp_path.glob("*-container.json")
    container = json.loads(container_file.read_text())
    assert container["children"] == ["abc"]
    sources = [a["source"] for a in container["befores"][0]["attachments"]]
    assert (tmp_path / sources[0]).read_text() == "the table"


ALLURE_TEST = '''
import os
from pytest_toolbench.report.allure_report import attach_case
from pytest_toolbench.results.case_result import CaseResult

def test_case():
    result = CaseResult.model_validate_json(open(os.environ["CASE_JSON"]).read())
    attach_case(result, os.environ["MODEL"])
    assert result.outcome.value == "passed", result.failure_message
'''

ALLURE_CONFTEST = '''
import os
from pytest_toolbench.report.allure_report import attach_run_metrics
from pytest_toolbench.results.aggregate import RunMetrics

def pytest_sessionfinish(session):
    metrics = RunMetrics.model_validate_json(open(os.environ["METRICS_JSON"]).read())
    assert attach_run_metrics(metrics, "THE SUMMARY TABLE")
'''


def _allure_run(pytester: pytest.Pytester, model: str, alluredir: Path) -> dict:
    pytester.makepyfile(test_case=ALLURE_TEST)
    pytester.makeconftest(ALLURE_CONFTEST)
    os.environ["MODEL"] = model
    result = pytester.runpytest_subprocess("--alluredir", str(alluredir), "-p", "allure_pytest")
    result.assert_outcomes(passed=1)
    (result_file,) = alluredir.glob("*-result.json")
    return json.loads(result_file.read_text())


def test_allure_results_carry_labels_parameter_and_attachments(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, metrics: RunMetrics
) -> None:
    case = make_case(7, True, 3, calls=(1, 4), parse_failures=1)
    case_json, metrics_json = tmp_path / "case.json", tmp_path / "metrics.json"
    case_json.write_text(case.model_dump_json())
    metrics_json.write_text(metrics.model_dump_json())
    monkeypatch.setenv("CASE_JSON", str(case_json))
    monkeypatch.setenv("METRICS_JSON", str(metrics_json))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("MODEL", "")

    alluredir = tmp_path / "allure-a"
    data = _allure_run(pytester, "gpt-4o", alluredir)
    labels = {(lab["name"], lab["value"]) for lab in data["labels"]}
    assert {
        ("epic", "toolhop"),
        ("feature", "mandatory"),
        ("story", "hops=3"),
        ("hops", "3"),
        ("domain", "film"),
        ("tag", "gpt-4o"),
    } <= labels
    assert {"name": "model", "value": "'gpt-4o'"} in data["parameters"]
    assert data["name"] == "[gpt-4o] toolhop-007-mandatory: q7?"  # runs of several models stay apart
    assert "**Gold answer:** Michael Mann" in data["description"]
    attachments = {a["name"]: alluredir / a["source"] for a in data["attachments"]}
    assert {"transcript", "tool calls", "details", "tool-call parse failures"} <= set(attachments)
    assert json.loads(attachments["transcript"].read_text()) == TRANSCRIPT
    calls = json.loads(attachments["tool calls"].read_text())
    assert [(c["name"], c["arguments"], c["result"]) for c in calls] == [
        ("film_director", {"film": "Heat"}, '"Michael Mann"'),
        ("oops", "{bad", "name 'oops' is not defined"),
    ]
    raw = attachments["parse failure 1: raw model text"].read_text()
    assert raw == "<tool_call>{broken 7"
    # The run-level metrics went to allure.global_attach (a *-globals.json), not to the test.
    global_atts = [
        att
        for f in alluredir.glob("*-globals.json")  # allure writes one file per global_attach call
        for att in json.loads(f.read_text())["attachments"]
    ]
    assert {a["name"] for a in global_atts} == {"toolbench metrics", "toolbench metrics (json)"}
    assert data["steps"][-1]["name"] == "score: passed"
    text_att = next(a for a in global_atts if a["name"] == "toolbench metrics")
    assert (alluredir / text_att["source"]).read_text() == "THE SUMMARY TABLE"

    # The model is part of the history id: the same case under another model is another result.
    other = _allure_run(pytester, "qwen2.5-7b", tmp_path / "allure-b")
    assert other["historyId"] != data["historyId"]
    assert ("tag", "qwen2.5-7b") in {(lab["name"], lab["value"]) for lab in other["labels"]}


def test_recover_missing_adds_only_results_the_controller_lacks(tmp_path):
    from pytest_toolbench.results.case_result import CaseResult, Outcome
    from pytest_toolbench.results.journal import ResultJournal, recover_missing

    def result(case_id: str, outcome: Outcome) -> CaseResult:
        return CaseResult(case_id=case_id, benchmark="toolhop", scenario="direct", outcome=outcome)

    journal = ResultJournal(tmp_path / "worker-gw0.jsonl")
    journal.append(result("a", Outcome.PASSED))
    journal.append(result("b", Outcome.FAILED))
    received = {"a": result("a", Outcome.FAILED)}  # what the report channel delivered
    assert recover_missing([journal.path], received) == 1
    assert set(received) == {"a", "b"}
    assert received["a"].outcome is Outcome.FAILED  # a delivered result is never overwritten


def test_benchmark_report_tables_render_after_scenarios_and_survive_json():
    from pytest_toolbench.report.terminal import render_summary
    from pytest_toolbench.results.aggregate import ReportTable, RunMetrics

    table = ReportTable(
        benchmark="demo", name="leaderboard", title="Leaderboard (paper Table 2)",
        columns=["model", "MNT", "Overall"], rows=[["m", 12.5, None]], note="unsolvable only",
        values={"overall": None, "MNT": 12.5},
    )
    metrics = RunMetrics(scenarios=[], tables=[table])
    text = render_summary(metrics, [])
    assert "== demo: Leaderboard (paper Table 2) ==" in text
    assert "12.5" in text and "n/a" in text and "unsolvable only" in text
    assert RunMetrics.model_validate_json(metrics.model_dump_json()).tables == [table]


def test_the_allure_story_is_hops_else_the_benchmarks_first_breakdown_label() -> None:
    """ToolHop and FamilyTool keep "hops=N"; ToolBeHonest (and an installed benchmark) get
    their first breakdown label; a benchmark with none, or an unknown one, gets no story."""
    from pytest_toolbench.report.allure_report import _story
    from pytest_toolbench.results.case_result import CaseResult, Outcome

    def result(benchmark: str, **labels) -> CaseResult:
        return CaseResult(case_id="c", benchmark=benchmark, scenario="s", outcome=Outcome.PASSED,
                          labels=labels)

    assert _story(result("toolhop", hops=3, domain="film")) == "hops=3"
    assert _story(result("familytool", split="e", hops=2)) == "hops=2"
    assert _story(result("toolbehonest", subtask="ms", level=1)) == "subtask=ms"
    assert _story(result("metabench", category="x")) is None
    assert _story(result("not-installed", topic="t")) is None


def test_an_infrastructure_errors_text_is_escaped_one_way_for_every_writer() -> None:
    """The one text a case ended on an infrastructure error shows (its failed test, an Allure
    result the plugin completes, a JUnit testcase written for it): kind and message, the
    endpoint's text escaped, newlines kept only in a block."""
    from pytest_toolbench.results.infra_errors import not_scored_text

    message = "HTTP 502\n\x1b[2Kbad gateway \u202e"
    assert not_scored_text("server", message) == (
        "infrastructure error (server), not scored: HTTP 502\n\\x1b[2Kbad gateway \\u202e")
    assert not_scored_text("server", message, multiline=False) == (
        "infrastructure error (server), not scored: HTTP 502\\n\\x1b[2Kbad gateway \\u202e")


def test_a_cut_short_result_completed_from_an_infrastructure_error_says_what_its_test_says(
        monkeypatch) -> None:
    """A test a signal stopped after its case's result was known but before attach_case is
    completed from that result (allure_report._cut_short): its status message is the text its
    test fails with (session/fixtures.py), the same function's."""
    from allure_commons.model2 import Parameter, TestResult

    from pytest_toolbench.benchmarks.base import Case
    from pytest_toolbench.report import allure_report
    from pytest_toolbench.results.case_result import InfraError
    from pytest_toolbench.results.infra_errors import not_scored_text
    from pytest_toolbench.session import fixtures

    assert fixtures.not_scored_text is not_scored_text  # what its failed test says
    case = Case(id="toolhop-1-direct", benchmark="toolhop", scenario="direct", sample_id="1")
    result = CaseResult(case_id=case.id, benchmark="toolhop", scenario="direct",
                        outcome=Outcome.ERROR,
                        error=InfraError(kind="timeout", message="no reply\n\x1b[1Aafter 30 s"))
    monkeypatch.setitem(allure_report._KNOWN_RESULTS, case.id,
                        ("suites/toolhop/test_toolhop.py::test_toolhop[toolhop-1-direct]", case,
                         result, "m"))
    cut = TestResult(parameters=[Parameter(name="case", value="Case(toolhop-1-direct)")])  # bare
    assert allure_report._cut_short(cut) is False
    assert cut.statusDetails.message == not_scored_text("timeout", "no reply\n\x1b[1Aafter 30 s")
    assert "\x1b" not in cut.statusDetails.message
    assert {(x.name, x.value) for x in cut.labels} >= {("error_kind", "timeout"),
                                                      ("toolbench_outcome", "infrastructure error")}
