"""Allure case steps, run-level Allure files, model identity, and metric plots."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_toolbench.report import allure_folder
from pytest_toolbench.report.allure_fixtures import unwrap_internal_finalizers
from pytest_toolbench.report.allure_gates import gate_rules
from pytest_toolbench.report.allure_report import (
    INFRA,
    PARSE,
    PASSED,
    WRONG,
    case_title,
    display_model,
    outcome_class,
)
from pytest_toolbench.report.allure_run import (
    allurerc,
    categories_json,
    check_records,
    perf_records,
    render_metrics_html,
)
from pytest_toolbench.report.allure_steps import (
    PlannedStep,
    conversation_plan,
    readable,
    step_results,
)
from pytest_toolbench.report.plots import plots_dir_for, run_figures, write_plots
from pytest_toolbench.results.aggregate import RunMetrics
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome
from pytest_toolbench.results.gates import GateVerdict
from shared_data import BUNDLED_TOOLHOP

REPO = Path(__file__).resolve().parents[1]

TRANSCRIPT = [
    {"role": "user", "content": "Who directed Heat?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "film_director", "arguments": '{"film": "Héat", "year": 1995}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"director": "Michael Mann"}'},
    {"role": "assistant", "content": "<answer>Michael Mann</answer>"},
]


def attached(step: PlannedStep) -> dict[str, str]:
    return {name: body for body, name, _ in step.attachments}


def test_conversation_steps_are_one_per_turn_and_call_with_readable_text() -> None:
    steps = conversation_plan(TRANSCRIPT)
    # The tool message is shown inside its call, not as a turn of its own.
    assert [s.title for s in steps] == [
        "turn 1 · user: Who directed Heat?",
        "turn 2 · assistant: 1 tool call",
        "turn 4 · assistant: <answer>Michael Mann</answer>",
    ]
    assert attached(steps[0]) == {"message": "Who directed Heat?"} and attached(steps[1]) == {}
    (call,) = steps[1].steps
    assert call.title == 'tool call film_director(film="Héat", year=1995)'
    # Pretty-printed, non-ASCII kept, no escaped JSON string.
    assert attached(call) == {"arguments": '{\n  "film": "Héat",\n  "year": 1995\n}',
                              "result": '{\n  "director": "Michael Mann"\n}'}
    assert readable("plain text") == "plain text"
    assert readable('"quoted"') == "quoted"
    assert readable("{not json") == "{not json"


def test_unanswered_call_and_list_content() -> None:
    steps = conversation_plan([
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "{bad"}}]},
    ])
    assert steps[0].title == "turn 1 · user: hi"
    assert attached(steps[1].steps[0]) == {"arguments": "{bad",
                                           "result": "(no tool message answered this call)"}


def test_step_results_rebuild_the_conversation_outside_a_test() -> None:
    """What `toolbench finish --alluredir` writes for a case whose result file a kill prevented:
    the live page's steps as step results, each call nested in its turn with its text."""
    def attach(body: str, name: str, kind: object) -> str:
        return f"{name}={body}"

    plan = conversation_plan(TRANSCRIPT + [
        {"role": "assistant", "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "{}"}}]}])
    steps = step_results(plan, attach, 10, 20)
    assert [s.name for s in steps] == [
        "turn 1 · user: Who directed Heat?", "turn 2 · assistant: 1 tool call",
        "turn 4 · assistant: <answer>Michael Mann</answer>", "turn 5 · assistant: 1 tool call"]
    assert all(s.status == "passed" and (s.start, s.stop) == (10, 20) for s in steps)
    assert steps[0].attachments == ["message=Who directed Heat?"] and steps[1].attachments == []
    (call,) = steps[1].steps
    assert call.name == 'tool call film_director(film="Héat", year=1995)'
    assert call.attachments == ['arguments={\n  "film": "Héat",\n  "year": 1995\n}',
                                'result={\n  "director": "Michael Mann"\n}']
    assert steps[3].steps[0].attachments[1] == "result=(no tool message answered this call)"


def _case(i: int, ok: bool | None, hops: int, *, parse: bool = False) -> CaseResult:
    if ok is None:
        return CaseResult(case_id=f"c{i}", benchmark="toolhop", scenario="mandatory",
                          outcome=Outcome.ERROR, labels={"hops": hops},
                          error=InfraError(kind="http_500", message="boom"))
    return CaseResult(case_id=f"c{i}", benchmark="toolhop", scenario="mandatory",
                      outcome=Outcome.PASSED if ok else Outcome.FAILED, labels={"hops": hops},
                      values={"answer_correct": 1.0 if ok else 0.0},
                      parse_failures=[{"raw_text": "<tool_call>{"}] if parse else [])


def test_outcome_class_separates_wrong_parse_and_infra() -> None:
    assert outcome_class(_case(1, True, 3)) == PASSED
    assert outcome_class(_case(2, False, 3)) == WRONG
    assert outcome_class(_case(3, False, 3, parse=True)) == PARSE
    assert outcome_class(_case(4, None, 3)) == INFRA


@pytest.fixture
def metrics() -> RunMetrics:
    from pytest_toolbench.results.aggregate import aggregate
    from pytest_toolbench.results.metrics import MetricSpec

    # hops 3: 2 of 3 correct; hops 4: 0 of 1 correct, plus one infrastructure error.
    cases = [_case(1, True, 3), _case(2, True, 3), _case(3, False, 3), _case(4, False, 4),
             _case(5, None, 4)]
    return aggregate(cases, {"toolhop": (MetricSpec(name="accuracy", value="answer_correct"),)},
                     {"toolhop": ("hops",)}, n_boot=200, seed=1)


def test_perf_records_are_one_row_per_metric_with_its_ci_and_n(metrics: RunMetrics) -> None:
    """Allure's metrics view shows a row per key: one per scenario metric, its value the
    sample, its CI and n in the title (each CI bound and subgroup was a row of its own)."""
    recs = {r["key"]: r for r in perf_records(metrics, now_ms=5)}
    assert list(recs) == ["toolhop.mandatory.accuracy"]
    acc = recs["toolhop.mandatory.accuracy"]
    assert acc["value"] == pytest.approx(50.0) and acc["unit"] == "%"  # 2 of 4, in %
    mv = metrics.scenarios[0].metrics["accuracy"]
    assert acc["title"] == (f"toolhop.mandatory accuracy · 50.0% [95% CI {100 * mv.ci_low:.1f}%, "
                            f"{100 * mv.ci_high:.1f}%] n=4")
    assert all(r["start"] == r["stop"] == 5 and r["group"] == "toolhop.mandatory" for r in recs.values())
    # With a model, keys and titles name it: Allure averages samples that share a key.
    named = {r["key"]: r for r in perf_records(metrics, now_ms=5, model="replay:/tmp/x/rec.jsonl")}
    assert named["replay:rec.jsonl/toolhop.mandatory.accuracy"]["title"].startswith(
        "replay:rec.jsonl · toolhop.mandatory accuracy · 50.0% [95% CI ")


VERDICTS = [
    GateVerdict(gate="toolhop.mandatory.accuracy>=0.4", actual=0.5, passed=True, reason="ok"),
    GateVerdict(gate="toolhop.mandatory.error_rate<=0", actual=0.2, passed=False,
                reason="1/5 errors", kind="error_rate"),
]


def test_titles_and_labels_name_the_model() -> None:
    assert display_model("replay:/tmp/pytest-1/wrong.jsonl") == "replay:wrong.jsonl"
    assert display_model("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
    assert case_title("toolhop-1-direct", "oracle", "Who?") == "[oracle] toolhop-1-direct: Who?"
    assert case_title("c1", "", None) == "c1"


def test_folder_files_show_every_runs_gates_and_headline_metrics(metrics: RunMetrics,
                                                                 tmp_path: Path) -> None:
    """Two runs in one folder: the Metadata (environment.xml) lists both runs' gates first, then
    each scenario's headline metric run beside run; neither run's record is overwritten."""
    first = allure_folder.make_entry(metrics, VERDICTS[:1], run_id="r1", model="oracle",
                                      now_ms=1)
    second = allure_folder.make_entry(metrics, VERDICTS, run_id="r2",
                                       model="replay:/tmp/a/rec.jsonl", now_ms=2)
    for rec in (second, first):
        allure_folder.save_entry(tmp_path, rec)
    (tmp_path / "environment.properties").write_text("gates=PASSED\nrun_id=old\n")
    records = allure_folder.load_entries(tmp_path)
    assert [r.run_id for r in records] == ["r1", "r2"]
    entries = allure_folder.metadata_entries(records)
    assert entries[:2] == [("oracle", "gates PASSED 1/1"), ("replay:rec.jsonl", "gates FAILED 1/2")]
    mv = metrics.scenarios[0].metrics["accuracy"]
    assert entries[2] == ("oracle", f"mandatory accuracy 50.0% CI {100 * mv.ci_low:.0f}-"
                                    f"{100 * mv.ci_high:.0f} n=4")
    assert entries[3][0] == "replay:rec.jsonl"
    # each failed gate whole, last (Allure cuts a chip after ~37 characters)
    assert entries[4:] == [("replay:rec.jsonl", "FAILED toolhop.mandatory.error_rate<=0")]
    allure_folder.write_folder_files(tmp_path, records)
    xml = (tmp_path / "environment.xml").read_text()
    assert "error_rate≤0" in xml and "<=" not in xml.replace("<environment>", "")
    assert not (tmp_path / "environment.properties").exists()  # ours, from before
    assert allure_folder.report_name(records) == "pytest-toolbench: oracle, replay:rec.jsonl"
    # The same model twice: each run is named by its run id too.
    twice = [first, first.model_copy(update={"run_id": "r3", "written_ms": 3})]
    assert allure_folder.run_labels(twice) == ["oracle · run r1", "oracle · run r3"]


def test_checks_html_and_categories(metrics: RunMetrics) -> None:
    checks = check_records(VERDICTS, label="oracle", run_id="r1")
    assert [(c["id"], c["name"], c["status"]) for c in checks] == [
        ("toolbench-r1-gate-1", "oracle · gate toolhop.mandatory.accuracy>=0.4", "passed"),
        ("toolbench-r1-gate-2", "oracle · gate toolhop.mandatory.error_rate<=0", "failed")]
    page = render_metrics_html(metrics, VERDICTS, {"model": "m1"})
    assert "<table class='toolbench-metrics'>" in page and "by hops" in page
    assert "<td class='fail'>FAILED</td>" in page and "50.0%" in page
    names = [c["name"] for c in categories_json()]
    assert names == ["Infrastructure errors", "Tool-call parse failures", "Wrong answers"]


def _load_config(path: Path) -> dict:
    """allurerc.mjs as Allure loads it (a JS module; its rule type is code)."""
    script = ("import(process.argv[1]).then(async (m) => { const c = m.default; const r = [];"
              " for (const rule of c.qualityGate?.rules ?? []) { const v = await c.qualityGate"
              ".use[0].validate({ expected: rule.toolbench }); r.push({ id: rule.id, ...v,"
              " message: (v.success ? c.qualityGate.use[0].successMessage : c.qualityGate.use[0]"
              ".message)({ expected: rule.toolbench }) }); } console.log(JSON.stringify({ ...c,"
              " qualityGate: r })); })")
    out = subprocess.run(["node", "--input-type=module", "-e", script, path.as_uri()],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_allurerc_has_every_verdict_as_a_quality_gate_rule(metrics: RunMetrics,
                                                          tmp_path: Path) -> None:
    """Every verdict the harness computed (error-rate and baseline gates included) is one rule
    whose check returns that verdict, for every run in the folder; Allure recomputes nothing."""
    baseline = GateVerdict(gate="toolhop.mandatory.accuracy>=baseline-0.02", actual=0.5,
                           passed=False, reason="below the baseline")
    rules = gate_rules([("oracle", VERDICTS), ("m2", [baseline, baseline])])
    assert [r["id"] for r in rules] == [
        "oracle · toolhop.mandatory.accuracy>=0.4", "oracle · toolhop.mandatory.error_rate<=0",
        "m2 · toolhop.mandatory.accuracy>=baseline-0.02",
        "m2 · toolhop.mandatory.accuracy>=baseline-0.02 (2)"]
    assert rules[1]["toolbench"]["passed"] is False
    records = [allure_folder.make_entry(metrics, VERDICTS, run_id="r1", model="oracle")]
    config_text = allurerc(records)
    assert "qualityGate" not in allurerc([allure_folder.make_entry(metrics, [], run_id="r",
                                                                    model="m")])
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the config's JS is not evaluated here")
    path = tmp_path / "allurerc.mjs"
    path.write_text(config_text)
    config = _load_config(path)
    assert config["name"] == "pytest-toolbench: oracle"
    assert config["plugins"]["awesome"]["options"]["groupBy"] == ["parentSuite", "suite", "subSuite"]
    # one file that opens from disk; one environment per model, its rules filed under it
    assert config["plugins"]["awesome"]["options"]["singleFile"] is True
    assert config["environments"] == {"oracle": {"name": "oracle"}}  # the matcher is code
    assert {rule["toolbench"]["environment"] for rule in gate_rules(
        [("oracle", VERDICTS)], ["oracle"])} == {"oracle"}
    assert [(r["id"], r["success"]) for r in config["qualityGate"]] == [
        ("oracle · toolhop.mandatory.accuracy>=0.4", True),
        ("oracle · toolhop.mandatory.error_rate<=0", False)]
    assert config["qualityGate"][1]["message"] == \
        "oracle: toolhop.mandatory.error_rate<=0 FAILED: 1/5 errors"
    assert {"name": "Wrong answers", "matchers": {"labels": {"toolbench_outcome": "wrong answer"}}} \
        in config["categories"]


def test_each_model_is_an_allure_environment_matched_on_its_cases_model_label(tmp_path: Path) -> None:
    """Allure's donut and statistics are per environment: one per model, so none mixes two
    models' cases. Ids and names as Allure accepts them (no ``/`` in a name)."""
    from pytest_toolbench.report.allure_run import environments

    metrics = RunMetrics(scenarios=[])
    records = [allure_folder.make_entry(metrics, [], run_id=f"r{i}", model=m)
               for i, m in enumerate(["Qwen/Qwen2.5-7B-Instruct", "replay:/tmp/a/x.jsonl",
                                      "Qwen/Qwen2.5-7B-Instruct", "default"])]
    assert environments(records) == [
        ("Qwen-Qwen2-5-7B-Instruct", "Qwen\u2215Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
        ("replay-x-jsonl", "replay:x.jsonl", "replay:/tmp/a/x.jsonl"),
        ("default-2", "default", "default")]
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the config's JS is not evaluated here")
    path = tmp_path / "allurerc.mjs"
    path.write_text(allurerc(records))
    script = ("import(process.argv[1]).then((m) => { const e = m.default.environments;"
              " const labels = (model) => ({ labels: [{ name: 'model', value: model }] });"
              " console.log(JSON.stringify(Object.fromEntries(Object.entries(e).map(([k, v]) =>"
              " [k, [v.matcher(labels('Qwen/Qwen2.5-7B-Instruct')), v.matcher(labels('default'))]]))));"
              " })")
    out = subprocess.run(["node", "--input-type=module", "-e", script, path.as_uri()],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"Qwen-Qwen2-5-7B-Instruct": [True, False],
                                      "replay-x-jsonl": [False, False], "default-2": [False, True]}


def test_pytest_internal_finalizers_are_unwrapped() -> None:
    """allure-pytest's wrapper around pytest's own finalizer becomes an "unknown" step; it is
    handed back unwrapped, a fixture author's finalizer keeps its wrapper (and its step)."""
    import _pytest.fixtures

    internal = eval("lambda: None", vars(_pytest.fixtures))  # defined "inside pytest"

    def teardown() -> None:
        pass

    class Wrapped:
        def __init__(self, f):
            self._fixture_function = f

    class FixtureDef:
        _finalizers = [Wrapped(teardown), Wrapped(internal)]

    fd = FixtureDef()
    assert unwrap_internal_finalizers(fd) == 1
    assert isinstance(fd._finalizers[0], Wrapped) and fd._finalizers[1] is internal


def test_plots_draw_exactly_the_aggregate_values(metrics: RunMetrics, tmp_path: Path) -> None:
    overview, toolhop = run_figures(metrics, model="m", run_id="r1")
    s = metrics.scenarios[0]
    groups = s.breakdown["hops"]
    ((panel,),) = [toolhop.panels]
    assert [b.label for b in panel.bars] == ["mandatory", "  hops=3", "  hops=4"]
    assert [b.value for b in panel.bars] == pytest.approx(
        [100 * s.metrics["accuracy"].value, *(100 * g.metrics["accuracy"].value for g in groups)])
    assert [b.value for b in panel.bars[1:]] == pytest.approx([200 / 3, 0.0])
    assert [b.ci_low for b in panel.bars[1:]] == pytest.approx(
        [100 * g.metrics["accuracy"].ci_low for g in groups])
    assert [b.ci_high for b in panel.bars[1:]] == pytest.approx(
        [100 * g.metrics["accuracy"].ci_high for g in groups])
    assert [b.n for b in panel.bars] == [4, 3, 1]  # the infrastructure error is not scored
    assert [b.label for b in overview.panels[0].bars] == ["mandatory"]
    assert toolhop.title == "toolhop · model m · run r1" and "model m · run r1" in overview.title
    pngs = write_plots(metrics, tmp_path / "plots", model="m", run_id="r1")
    assert [p.name for p in pngs] == ["overview.png", "toolhop.png"]
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000
    assert plots_dir_for(tmp_path / "r.json") == tmp_path / "r.plots"


def _suite(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider", "-q",
           "-p", "no:randomly", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"), "--model", "oracle",
           "--limit", "1", *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


def test_suite_run_writes_plots_and_allure_run_files(tmp_path: Path) -> None:
    alluredir, report = tmp_path / "allure", tmp_path / "run.json"
    proc = _suite(tmp_path, "--alluredir", str(alluredir), "--toolbench-json", str(report),
                  "--gate", "toolhop.mandatory.accuracy>=0.5")
    assert proc.returncode == 0, proc.stdout[-2000:]
    data = json.loads(report.read_text())
    plots = sorted(p.name for p in (tmp_path / "run.plots").glob("*.png"))
    assert plots == ["overview.png", "toolhop.png"]  # one per run, one per benchmark
    # The drawn numbers are the JSON report's numbers.
    metrics = RunMetrics.model_validate(data["metrics"])
    run_id = data["run"]["run_id"]
    figure = next(f for f in run_figures(metrics, model="oracle", run_id=run_id)
                  if f.filename == "toolhop.png")
    panel = next(p for p in figure.panels if p.title == "accuracy")
    mand = next(s for s in data["metrics"]["scenarios"] if s["scenario"] == "mandatory")
    at = [b.label for b in panel.bars].index("mandatory")
    drawn = [b.value for b in panel.bars[at + 1:at + 1 + len(mand["breakdown"]["hops"])]]
    assert drawn == [100 * g["metrics"]["accuracy"]["value"] for g in mand["breakdown"]["hops"]]
    for name in ("environment.xml", "categories.json", "allurerc.mjs"):
        assert (alluredir / name).stat().st_size > 0, name
    (perf,) = alluredir.glob("toolbench-*-perf.json")
    assert any(r["key"] == "oracle/toolhop.mandatory.accuracy" for r in json.loads(perf.read_text()))
    env = (alluredir / "environment.xml").read_text()
    assert "<key>oracle</key><value>gates PASSED 4/4</value>" in env
    checks = [json.loads(p.read_text()) for p in alluredir.glob("*-check.json")]
    assert {c["name"] for c in checks} >= {"oracle · gate toolhop.mandatory.accuracy>=0.5"}
    globals_ = [a for p in alluredir.glob("*-globals.json") for a in json.loads(p.read_text())["attachments"]]
    run_id = data["run"]["run_id"]
    prefix = f"oracle · run {run_id} · "
    names = {a["name"] for a in globals_}
    assert {f"{prefix}toolbench metrics (html)", f"{prefix}plot overview",
            f"{prefix}plot toolhop"} <= names
    html_att = next(a for a in globals_ if a["name"] == f"{prefix}toolbench metrics (html)")
    assert "toolbench-gates" in (alluredir / html_att["source"]).read_text()
    # No tear-down without a status (Allure's "unknown" steps): pytest's own finalizers.
    afters = [a for p in alluredir.glob("*-container.json")
              for a in json.loads(p.read_text()).get("afters", [])]
    assert afters and all(a.get("status") for a in afters), afters
    assert not any("<lambda>" in a["name"] for a in afters)
    results = [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]
    case = next(r for r in results if "mandatory" in r["name"])
    assert [s["name"] for s in case["steps"]][-1].startswith("score: ")
    assert case["steps"][0]["name"].startswith("turn 1 · user: ")
    labels = {(lab["name"], lab["value"]) for lab in case["labels"]}
    assert ("toolbench_outcome", "passed") in labels and ("model", "oracle") in labels
    assert {("parentSuite", "oracle"), ("suite", "toolhop")} <= labels
    assert case["name"].startswith("[oracle] toolhop-")
    params = {p["name"]: p for p in case["parameters"]}
    assert params["case"]["value"].startswith("'toolhop-") and not params["model"].get("excluded")


def _by_record(body: dict, index: int):
    """Per bundled record: 9001 the endpoint fails (an infrastructure error), 9002 a reply whose
    tool call the server left in the text (a parse failure, scored wrong), 9003 plain wrong."""
    from fake_openai_server import completion, error_body

    records = json.loads(BUNDLED_TOOLHOP.read_text())
    question = body["messages"][0]["content"].rsplit("Question: ", 1)[1]
    rid = next(r["id"] for r in records if r["question"] == question)
    if rid == 9001:
        return 500, {}, error_body(500, "down")
    if rid == 9002:
        return 200, {}, completion('<tool_call>{"name": "f", "arguments": {}}</tool_call>')
    return 200, {}, completion("<answer>definitely-wrong</answer>")


def _category_of(result: dict, categories: list[dict]) -> str | None:
    """The first category whose Allure 2 matcher (status + message regex, full match as Allure
    does) takes the result, as the classic report assigns it."""
    import re

    message = (result.get("statusDetails") or {}).get("message") or ""
    for c in categories:
        if result["status"] in c["matchedStatuses"] and re.fullmatch(c["messageRegex"], message):
            return c["name"]
    return None


@pytest.mark.parametrize("gated", [False, True])
def test_parse_failures_and_infrastructure_errors_land_in_their_categories(tmp_path: Path, gated) -> None:
    """The written result files, read as Allure reads them: an infrastructure error, a parse
    failure and a wrong answer each match their own category (Allure 2: status and message
    regex from categories.json; Allure 3: the toolbench_outcome label in allurerc.mjs), gates
    or not (with gates the JUnit status changes, Allure's must not)."""
    from fake_openai_server import FakeOpenAIServer

    alluredir = tmp_path / "allure"
    gate = ["--gate", "toolhop.direct.accuracy>=0", "--max-error-rate", "1"] if gated else []
    with FakeOpenAIServer(_by_record) as server:
        cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly",
               "-p", "no:cacheprovider", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"),
               "--base-url", server.base_url, "--api-key", "t", "--model", "m",
               "--scenario", "direct", "--sample-ids", "9001,9002,9003", "--max-retries", "0",
               "--alluredir", str(alluredir), *gate]
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == (0 if gated else 1), proc.stdout[-3000:]
    categories = json.loads((alluredir / "categories.json").read_text())
    # Allure 3's categories, from allurerc.mjs as node loads it (without node: the JSON data of
    # its categories, which hold no code).
    if shutil.which("node"):
        allure3 = _load_config(alluredir / "allurerc.mjs")["categories"]
    else:
        from pytest_toolbench.report.allure_run import CATEGORIES

        allure3 = [{"name": n, "matchers": {"labels": {"toolbench_outcome": v}}}
                   for n, v, _, _ in CATEGORIES]
    by_label = {c["matchers"]["labels"]["toolbench_outcome"]: c["name"] for c in allure3}
    results = {}
    for path in alluredir.glob("*-result.json"):
        r = json.loads(path.read_text())
        case = next(p["value"] for p in r["parameters"] if p["name"] == "case")
        results[case.strip("'")] = r
    assert set(results) == {"toolhop-9001-direct", "toolhop-9002-direct", "toolhop-9003-direct"}
    expected = {"toolhop-9001-direct": ("Infrastructure errors", INFRA),
                "toolhop-9002-direct": ("Tool-call parse failures", PARSE),
                "toolhop-9003-direct": ("Wrong answers", WRONG)}
    for case, (category, outcome) in expected.items():
        r = results[case]
        labels = {lab["name"]: lab["value"] for lab in r["labels"]}
        assert _category_of(r, categories) == category, (case, r["status"], r.get("statusDetails"))
        assert labels["toolbench_outcome"] == outcome and by_label[outcome] == category
    assert "infrastructure error" in results["toolhop-9001-direct"]["statusDetails"]["message"]
    assert results["toolhop-9002-direct"]["statusDetails"]["message"].startswith("tool-call parse failure")


def test_two_models_in_one_results_folder_are_two_results_not_retries(tmp_path: Path) -> None:
    alluredir = tmp_path / "allure"
    record = tmp_path / "rec.jsonl"
    assert _suite(tmp_path, "--alluredir", str(alluredir), "--scenario", "direct",
                  "--record", str(record)).returncode == 0
    assert _suite(tmp_path, "--alluredir", str(alluredir), "--scenario", "direct", "--no-cache",
                  "--model", f"replay:{record}").returncode == 0
    results = [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]
    assert len(results) == 2
    assert results[0]["fullName"] == results[1]["fullName"]
    assert len({r["historyId"] for r in results}) == 2
    assert len({r["testCaseId"] for r in results}) == 2
    # ... told apart by title and suite path, and both runs stay in the folder's Metadata.
    assert sorted(r["name"].split("]")[0] for r in results) == ["[oracle", "[replay:rec.jsonl"]
    suites = {lab["value"] for r in results for lab in r["labels"] if lab["name"] == "parentSuite"}
    assert suites == {"oracle", "replay:rec.jsonl"}
    env = (alluredir / "environment.xml").read_text()
    assert "<key>oracle</key>" in env and "<key>replay:rec.jsonl</key>" in env


def test_allure_html_without_alluredir_is_a_usage_error(tmp_path: Path) -> None:
    proc = _suite(tmp_path, "--allure-html", str(tmp_path / "html"))
    assert proc.returncode == 4 and "--allure-html DIR needs --alluredir" in proc.stderr


def test_allure_page_loses_its_analytics_and_keeps_everything_else(tmp_path: Path) -> None:
    """Allure 3's awesome page embeds Google Analytics whatever the environment says: the built
    page is cleaned, so opening a report (a CI artifact, a private run) calls nobody."""
    from pytest_toolbench.report.allure_html import strip_analytics

    head = '<html><head><script src="app.js"></script></head><body><div id="app"></div>'
    analytics = ('<script async src="https://www.googletagmanager.com/gtag/js?id=G-X"></script>\n'
                 "    <script>\n        window.dataLayer = window.dataLayer || [];\n"
                 "        function gtag(){dataLayer.push(arguments);}\n        gtag('js', new Date());\n"
                 "    </script>\n")
    tail = "<script>window.allure = {};</script></body></html>"
    index = tmp_path / "index.html"
    index.write_text(head + analytics + tail, encoding="utf-8")
    strip_analytics(index)
    assert index.read_text(encoding="utf-8") == head + tail
    strip_analytics(index)  # nothing left to remove: unchanged
    assert index.read_text(encoding="utf-8") == head + tail
