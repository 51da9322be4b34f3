"""--repeats: pass@k / pass^k by hand, the cluster bootstrap, unstable cases, per-repeat tables,
per-repeat cache keys, and end-to-end runs of the bundled ToolHop sample (oracle, flaky HTTP)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, completion

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.benchmarks.toolbehonest import report as tbh_report
from pytest_toolbench.benchmarks.toolbehonest.scoring import CONDITION_LABELS
from pytest_toolbench.models.base import CallContext, ChatRequest, ChatResponse
from pytest_toolbench.models.cache import CachedModel
from pytest_toolbench.results.aggregate import aggregate
from pytest_toolbench.results.bootstrap import bootstrap_ratio
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome
from pytest_toolbench.results.metrics import MetricSpec
from pytest_toolbench.results.repeats import (
    aggregate_repeats,
    base_case_id,
    pass_at_k,
    pass_hat_k,
    repeat_stats,
    tables_per_repeat,
)
from pytest_toolbench.models.repeat import CURRENT_REPEAT
from pytest_toolbench.runtime.repeat import expand_repeats
from shared_data import BUNDLED_TOOLHOP as BUNDLED

REPO = Path(__file__).resolve().parents[1]
ACC = MetricSpec(name="accuracy", value="answer_correct")
SPECS = {"toolhop": (ACC,)}


def run(case: str, repeat: int, correct: float | None, *, hops: int = 3) -> CaseResult:
    error = correct is None
    return CaseResult(
        case_id=f"{case}-r{repeat}", benchmark="toolhop", scenario="direct", repeat=repeat,
        outcome=Outcome.ERROR if error else (Outcome.PASSED if correct else Outcome.FAILED),
        labels={"hops": hops}, values={} if error else {"answer_correct": correct},
        error=InfraError(kind="http_500", message="x") if error else None,
    )


def runs(case: str, outcomes: list[float | None], hops: int = 3) -> list[CaseResult]:
    return [run(case, i + 1, v, hops=hops) for i, v in enumerate(outcomes)]


# --------------------------------------------------------------------------- estimators by hand
@pytest.mark.parametrize(
    "n,c,at,hat",
    [
        # n=3, c=1: pass@1 = 1-2/3, pass@2 = 1-C(2,2)/C(3,2) = 2/3, pass@3 = 1; pass^1 = 1/3, 0, 0
        (3, 1, [1 / 3, 2 / 3, 1.0], [1 / 3, 0.0, 0.0]),
        # n=3, c=2: pass@ = 2/3, 1, 1; pass^2 = C(2,2)/C(3,2) = 1/3, pass^3 = 0
        (3, 2, [2 / 3, 1.0, 1.0], [2 / 3, 1 / 3, 0.0]),
        (3, 3, [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]),
        (3, 0, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
        # n=5, c=2: pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass^2 = C(2,2)/C(5,2) = 1/10
        (5, 2, [2 / 5, 7 / 10, 1 - 1 / 10, 1.0, 1.0], [2 / 5, 1 / 10, 0.0, 0.0, 0.0]),
    ],
)
def test_pass_at_k_and_pass_hat_k_by_hand(n, c, at, hat):
    assert [pass_at_k(n, c, k) for k in range(1, n + 1)] == pytest.approx(at)
    assert [pass_hat_k(n, c, k) for k in range(1, n + 1)] == pytest.approx(hat)


def test_estimators_reject_impossible_counts():
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_hat_k(3, 1, 4)


def test_repeat_stats_average_over_cases_and_flag_unstable_cases():
    results = runs("a", [1, 1, 1]) + runs("b", [0, 1, 0]) + runs("c", [1, 0, 1])
    stats = repeat_stats(results, SPECS, 3, n_boot=200)
    (scenario,) = stats.scenarios
    (acc,) = scenario.binary
    by_k = {p.k: p for p in acc.by_k}
    # per case (n=3): a c=3, b c=1, c c=2
    assert acc.mean == pytest.approx(6 / 9)
    assert by_k[1].pass_at == pytest.approx((1 + 1 / 3 + 2 / 3) / 3)
    assert by_k[2].pass_at == pytest.approx((1 + 2 / 3 + 1) / 3)
    assert by_k[3].pass_at == pytest.approx(1.0)
    assert by_k[1].pass_hat == pytest.approx(by_k[1].pass_at)  # k = 1: both are the mean
    assert by_k[2].pass_hat == pytest.approx((1 + 0 + 1 / 3) / 3)
    assert by_k[3].pass_hat == pytest.approx(1 / 3)
    assert all(p.n_cases == 3 for p in acc.by_k)
    assert [(u.case_id, u.outcomes, u.n_passed) for u in stats.unstable] == [
        ("b", ["failed", "passed", "failed"], 1),
        ("c", ["passed", "failed", "passed"], 2),
    ]
    assert scenario.n_unstable == 2 and stats.unstable[0].metrics == ["accuracy"]


def test_errors_are_left_out_of_n_and_cases_with_too_few_runs_out_of_k():
    # case a: one infrastructure error, 2 scored runs (both pass): not unstable, n=2 < k=3
    results = runs("a", [1, None, 1]) + runs("b", [1, 0, 0])
    stats = repeat_stats(results, SPECS, 3, n_boot=50)
    by_k = {p.k: p for p in stats.scenarios[0].binary[0].by_k}
    assert by_k[3].n_cases == 1 and by_k[3].pass_hat == 0.0 and by_k[3].pass_at == 1.0
    assert by_k[2].n_cases == 2
    assert by_k[2].pass_hat == pytest.approx((1.0 + 0.0) / 2)  # a: C(2,2)/C(2,2); b: C(1,2)=0
    assert [u.case_id for u in stats.unstable] == ["b"]


def test_an_error_rate_gets_no_pass_at_k_but_still_marks_a_case_unstable():
    """A binary metric where 1 is an error (ToolHop's query_error_rate): its "pass@3" was the
    chance of an error in one of 3 runs, printed under "at least one of k runs passes"."""
    errors = MetricSpec(name="query_error_rate", value="query_error", higher_is_better=False)
    results = runs("a", [1, 1, 1]) + runs("b", [1, 1, 1])
    for r, error in zip(results, [0, 1, 0, 0, 0, 0]):
        r.values["query_error"] = float(error)
    stats = repeat_stats(results, {"toolhop": (ACC, errors)}, 3, n_boot=10)
    assert [m.metric for m in stats.scenarios[0].binary] == ["accuracy"]
    assert [(u.case_id, u.metrics) for u in stats.unstable] == [("a", ["query_error_rate"])]


def test_non_binary_metrics_get_no_pass_at_k():
    spec = MetricSpec(name="score", value="answer_correct")
    results = runs("a", [0.5, 1, 1])
    stats = repeat_stats(results, {"toolhop": (spec,)}, 3, n_boot=10)
    assert stats.scenarios[0].binary == []


# --------------------------------------------------------------------------- cluster bootstrap
def test_mean_over_all_runs_with_a_ci_over_cases_not_runs():
    results = runs("a", [1, 1, 1], hops=3) + runs("b", [0, 0, 0], hops=4) + runs("c", [1, 0, None], hops=3)
    metrics = aggregate_repeats(results, SPECS, {"toolhop": ("hops",)}, n_boot=500, seed=3)
    s = metrics.scenarios[0]
    acc = s.metrics["accuracy"]
    assert acc.value == pytest.approx(4 / 8)  # 8 scored runs, 4 correct
    assert acc.n == 3  # cases
    assert (s.n_cases, s.n_errors) == (9, 1)  # runs
    # The interval is exactly the bootstrap of per-case sums over per-case counts.
    expected = bootstrap_ratio([3, 0, 1], [3, 3, 2], n_boot=500, seed=3)
    assert (acc.ci_low, acc.ci_high) == (expected.ci_low, expected.ci_high)
    # Treating the 8 runs as independent would give a narrower interval.
    naive = aggregate(results, SPECS, {"toolhop": ()}, n_boot=500, seed=3).scenarios[0].metrics["accuracy"]
    assert naive.value == acc.value
    assert naive.ci_high - naive.ci_low < acc.ci_high - acc.ci_low
    hops3 = next(g for g in s.breakdown["hops"] if g.group == "3")
    assert hops3.metrics["accuracy"].value == pytest.approx(4 / 5) and hops3.metrics["accuracy"].n == 2
    assert hops3.n_cases == 6 and acc.is_rate


def test_ratio_metrics_pool_numerators_and_denominators_per_case():
    spec = MetricSpec(name="instance_error_rate", kind="ratio", value="err", denominator="calls")
    rs = []
    for i, (e, c) in enumerate([(1, 2), (0, 2), (3, 4)]):
        rs.append(CaseResult(case_id=f"a-r{i + 1}", repeat=i + 1, benchmark="toolhop", scenario="direct",
                             outcome=Outcome.PASSED, values={"err": e, "calls": c}))
    mv = aggregate_repeats(rs, {"toolhop": (spec,)}, {}, n_boot=10).scenarios[0].metrics["instance_error_rate"]
    assert mv.value == pytest.approx(4 / 8) and mv.n == 1 and mv.ci_low == mv.ci_high == mv.value


# --------------------------------------------------------------------------- identity, cache
def test_expand_repeats_is_repeat_major_with_suffixed_ids():
    cases = [Case(id=f"toolhop-{i}-direct", benchmark="toolhop", scenario="direct", sample_id=str(i))
             for i in (1, 2)]
    assert expand_repeats(cases, 1) == cases
    out = expand_repeats(cases, 2)
    assert [c.id for c in out] == ["toolhop-1-direct-r1", "toolhop-2-direct-r1",
                                   "toolhop-1-direct-r2", "toolhop-2-direct-r2"]
    assert [c.repeat for c in out] == [1, 1, 2, 2]
    r = run("toolhop-1-direct", 2, 1.0)
    assert base_case_id(r) == "toolhop-1-direct"
    with pytest.raises(ValueError):
        expand_repeats(cases, 0)


class Counting:
    name = "counting"

    def __init__(self):
        self.calls = 0

    async def complete(self, request, ctx):
        self.calls += 1
        return ChatResponse(message={"role": "assistant", "content": f"reply {self.calls}"})

    async def aclose(self):
        pass

    def describe(self):
        return {"base_url": "http://x"}


def test_each_repeat_has_its_own_cache_entry_and_repeat_one_shares_the_plain_key(tmp_path):
    inner = Counting()
    model = CachedModel(inner, tmp_path)
    request = ChatRequest(messages=[{"role": "user", "content": "q"}])

    async def ask(repeat):
        CURRENT_REPEAT.set(repeat)
        return (await model.complete(request, CallContext(case_id="c"))).content

    plain = asyncio.run(ask(None))
    assert asyncio.run(ask(1)) == plain and inner.calls == 1  # repeat 1 = the ordinary key
    second = asyncio.run(ask(2))
    third = asyncio.run(ask(3))
    assert inner.calls == 3 and len({plain, second, third}) == 3
    assert asyncio.run(ask(2)) == second and inner.calls == 3  # a rerun replays each repeat


# --------------------------------------------------------------------------- benchmark tables
def tbh_result(k: int, repeat: int, condition: str, level: int = 2) -> CaseResult:
    return CaseResult(
        case_id=f"toolbehonest-os-{k}-L{level}-unsolvable-r{repeat}", benchmark="toolbehonest",
        scenario="MNT", repeat=repeat, outcome=Outcome.FAILED,
        labels={"level": level, "subtask": "os", "solvable": False, "variant": "unsolvable"},
        values={"l2_pr": 0.0}, details={"condition": condition},
    )


def test_toolbehonest_tables_are_computed_per_repeat_not_over_all_runs():
    first, second = list(CONDITION_LABELS)[:2]
    results = [tbh_result(0, 1, first), tbh_result(1, 1, first),
               tbh_result(0, 2, first), tbh_result(1, 2, second)]
    shown, per_repeat = tables_per_repeat(tbh_report.report_tables, results)
    analysis = next(t for t in shown if t.name == "error_analysis")
    row = next(r for r in analysis.rows if r[0] == "Level 2 / MNT")
    cols = analysis.columns
    # Repeat 1 counts first=2, repeat 2 counts first=1 and second=1: the mean, not the sum (3).
    assert row[cols.index(CONDITION_LABELS[first])] == 1.5
    assert row[cols.index(CONDITION_LABELS[second])] == 0.5
    assert row[cols.index("Correct")] == 0 and isinstance(row[cols.index("Correct")], int)
    assert "mean of 2 repeats" in analysis.title
    names = [t.name for t in per_repeat]
    assert "error_analysis.r1" in names and "error_analysis.r2" in names
    r1 = next(t for t in per_repeat if t.name == "error_analysis.r1")
    single = tbh_report.error_analysis([r.model_copy(update={"repeat": None}) for r in results[:2]])
    assert r1.rows == single.rows  # repeat 1 alone is scored exactly as a run without repeats


# --------------------------------------------------------------------------- end to end
def run_suite(tmp_path: Path, *args: str, name: str = "report.json"):
    report = tmp_path / name
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider", "-q",
           "-p", "no:randomly", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"), "--toolbench-json",
           str(report), *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    return proc, (json.loads(report.read_text()) if report.exists() else None)


def test_oracle_with_three_repeats_is_stable_under_xdist(tmp_path):
    records = json.loads(BUNDLED.read_text())
    proc, report = run_suite(tmp_path, "--model", "oracle", "--repeats", "3", "-n", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ids = Counter(c["case_id"].rsplit("-r", 1)[0] for c in report["cases"])
    assert len(ids) == 3 * len(records) and set(ids.values()) == {3}
    assert {c["repeat"] for c in report["cases"]} == {1, 2, 3}
    for s in report["metrics"]["scenarios"]:
        assert s["metrics"]["accuracy"]["value"] == 1.0 and s["metrics"]["accuracy"]["n"] == len(records)
        assert s["n_cases"] == 3 * len(records)
    rep = report["repeats"]
    assert rep["repeats"] == 3 and rep["unstable"] == []
    for s in rep["scenarios"]:
        acc = next(b for b in s["binary"] if b["metric"] == "accuracy")
        assert [p["pass_hat"] for p in acc["by_k"]] == [1.0, 1.0, 1.0]
        assert [p["pass_at"] for p in acc["by_k"]] == [1.0, 1.0, 1.0]
    assert "pass^3" in proc.stdout and "unstable cases: none" in proc.stdout
    # node ids carry the repeat
    assert "test_toolhop[toolhop-9001-direct-r2]" in subprocess.run(
        [sys.executable, "-m", "pytest", "suites/toolhop", "--collect-only", "-q", "-p", "no:randomly",
         "--model", "oracle", "--repeats", "2", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs")],
        cwd=REPO, capture_output=True, text=True, timeout=120).stdout


class FlakyAgent:
    """Direct scenario over real HTTP: even ids always answer the gold; odd ids answer it on the
    1st and 3rd time their question is asked and a wrong answer on the 2nd."""

    def __init__(self, records):
        self.by_question = {r["question"]: r for r in records}
        self.asked: Counter[str] = Counter()

    def __call__(self, body, index):
        question = body["messages"][0]["content"].rsplit("Question: ", 1)[1]
        record = self.by_question[question]
        self.asked[question] += 1
        flaky = record["id"] % 2 == 1 and self.asked[question] == 2
        answer = "definitely-wrong" if flaky else record["answer"]
        return 200, {}, completion(f"<answer>{answer}</answer>")


def test_flaky_endpoint_flags_unstable_cases_and_each_repeat_calls_the_model(tmp_path):
    records = json.loads(BUNDLED.read_text())
    # Upstream's rstrip('.0') empties a gold of "0", which then matches any reply
    # (code/evaluation_*.py).
    flaky = {f"toolhop-{r['id']}-direct" for r in records
             if r["id"] % 2 == 1 and r["answer"].rstrip(".0") != ""}
    assert flaky
    agent = FlakyAgent(records)
    with FakeOpenAIServer(agent) as server:
        args = ["--base-url", server.base_url, "--api-key", "t", "--model", "flaky",
                "--scenario", "direct", "--repeats", "3", "-n", "0", "--concurrency", "1"]
        proc, report = run_suite(tmp_path, *args)
        assert len(server.requests) == 3 * len(records)  # the cache did not replay repeat 1
        again, replayed = run_suite(tmp_path, *args, name="again.json")
        assert len(server.requests) == 3 * len(records)  # the rerun replays every repeat
    assert proc.returncode == 1, proc.stdout[-3000:]
    rep = report["repeats"]
    assert {u["case_id"] for u in rep["unstable"]} == flaky
    for u in rep["unstable"]:
        assert u["outcomes"] == ["passed", "failed", "passed"] and u["metrics"] == ["accuracy"]
    n, f = len(records), len(flaky)
    acc = report["metrics"]["scenarios"][0]["metrics"]["accuracy"]
    assert acc["value"] == pytest.approx((3 * n - f) / (3 * n)) and acc["n"] == n
    by_k = {p["k"]: p for p in rep["scenarios"][0]["binary"][0]["by_k"]}
    # flaky cases: n=3, c=2 -> pass^2 = 1/3, pass^3 = 0, pass@2 = 1; stable ones: 1
    assert by_k[3]["pass_hat"] == pytest.approx((n - f) / n)
    assert by_k[2]["pass_hat"] == pytest.approx((n - f + f / 3) / n)
    assert by_k[2]["pass_at"] == pytest.approx(1.0)
    for case_id in flaky:
        assert case_id in proc.stdout  # listed in the terminal summary
    assert f"unstable cases ({f})" in proc.stdout
    assert replayed["repeats"] == report["repeats"]


def test_copies_of_a_case_s_test_by_another_plugin_are_named_in_a_warning(tmp_path):
    """pytest-repeat's ``--count 2`` (here a conftest that parametrises the suite's test again,
    as it does) gives each case two tests that share its one result: "36 passed" with n 6 per
    scenario, no word that the copies were not samples. The warning names it and --repeats."""
    from pytest_toolbench.cli import main

    assert main(["init", str(tmp_path), "--benchmark", "toolhop"]) == 0
    (tmp_path / "conftest.py").write_text(
        "def pytest_generate_tests(metafunc):\n"
        "    if 'case' in metafunc.fixturenames:\n"
        "        metafunc.fixturenames.append('copy')\n"
        "        metafunc.parametrize('copy', [1, 2])\n", encoding="utf-8")
    args = [sys.executable, "-m", "pytest", "suites/toolhop", "--data", "sample", "--model",
            "oracle", "-p", "no:randomly", "-p", "no:cacheprovider", "--no-progress"]
    for extra in ([], ["-n", "2"]):
        run = subprocess.run([*args, *extra], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, run.stdout[-2000:]
        assert "36 passed" in run.stdout
        assert run.stdout.count("18 of 36 collected tests repeat another's case") == 1, run.stdout
        assert "--repeats K runs each case K times" in run.stdout
    (tmp_path / "conftest.py").unlink()
    run = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "18 passed" in run.stdout and "repeat another's case" not in run.stdout
