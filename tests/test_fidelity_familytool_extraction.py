"""FamilyTool KG extraction replayed against the values upstream's own code computed.

``../shared/fidelity/familytool-extraction.jsonl`` holds model replies to the extraction prompt of
real records, with the extraction string and EM / F1 / No-Hallucination / Coverage / Format Error
that upstream's ``KG_search`` + ``calculate_f1em_score_single_sample`` + coverage gave (Relation
Retrieval with all-MiniLM-L6-v2 vectors, the harness's default embedder). Every line is checked
twice: through the extraction and scoring functions (one test per line, so a failure names it) and
through the suite itself, ``--model replay:`` on the real data, one ``--repeats`` index per reply.
The file is read from ``../shared`` (``TOOLBENCH_SHARED_DIR`` names another; never copied here);
without it the tests skip.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from shared_data import REAL_FAMILYTOOL, SHARED_DATASETS, SHARED_FIDELITY
from test_suite_familytool import run_suite

from pytest_toolbench.benchmarks.familytool.extraction import extract
from pytest_toolbench.benchmarks.familytool.kg import KnowledgeGraph
from pytest_toolbench.benchmarks.familytool.retriever import RelationRetriever
from pytest_toolbench.benchmarks.familytool.schema import FamilyToolRecord, load_records
from pytest_toolbench.benchmarks.familytool.scoring import extraction_values
from pytest_toolbench.environments import DEFAULT_EMBEDDER
from pytest_toolbench.environments.retrieval import Embedders

FIDELITY_FILE = SHARED_FIDELITY / "familytool-extraction.jsonl"
#: upstream's names -> the harness's per-case value names
VALUES = ("em", "f1", "clean", "coverage", "format_error")


def fidelity_lines() -> list[dict[str, Any]]:
    if not FIDELITY_FILE.is_file():
        return []
    lines = [json.loads(line) for line in FIDELITY_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [line for line in lines if "_about" not in line]


LINES = fidelity_lines()
pytestmark = pytest.mark.skipif(
    not LINES or not REAL_FAMILYTOOL.is_dir(),
    reason=f"{FIDELITY_FILE} or the FamilyTool data of ../shared absent",
)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Any]:
    records = {s: load_records(REAL_FAMILYTOOL / f"familytool-{s}.jsonl", s) for s in "be"}
    kgs = {s: KnowledgeGraph.from_file(REAL_FAMILYTOOL / f"familykg-{s}.txt") for s in "be"}
    embedders = Embedders(tmp_path_factory.mktemp("embeddings"))
    retrievers = {s: RelationRetriever(kgs[s], embedders, DEFAULT_EMBEDDER) for s in "be"}
    return {"records": records, "kgs": kgs, "retrievers": retrievers}


def assert_upstream_values(got: dict[str, Any], upstream: dict[str, Any], where: str) -> None:
    assert got["text"] == upstream["text"], f"{where}: extraction string differs"
    for key in VALUES:
        assert got[key] == pytest.approx(upstream[key], abs=1e-12), f"{where}: {key} differs"


@pytest.mark.parametrize("line", LINES, ids=[line["id"] for line in LINES])
def test_reply_scores_as_upstream(world, line):
    split = line["split"]
    record: FamilyToolRecord = world["records"][split][line["index"]]
    extraction = extract(line["reply"], world["kgs"][split], line["method"], world["retrievers"][split].top_k, 3)
    values = extraction_values(record.golden_links, extraction.text, record.golden_calls)
    assert_upstream_values({"text": extraction.text, **values}, line["upstream"], line["id"])


def replay_plan(lines: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[tuple[str, int, int, str], str], int]:
    """One replay line per (record, repeat): repeat k of a record replays its k-th distinct reply
    (records with fewer replies repeat their last). Returns the replay lines, the fidelity line id
    expected per (split, index, repeat, method) and the number of repeats."""
    replies: dict[tuple[str, int], list[str]] = defaultdict(list)
    for line in lines:
        key = (line["split"], line["index"])
        if line["reply"] not in replies[key]:
            replies[key].append(line["reply"])
    repeats = max(len(v) for v in replies.values())
    by_reply = {(line["split"], line["index"], line["reply"], line["method"]): line["id"] for line in lines}
    recording, expected = [], {}
    for (split, index), texts in replies.items():
        for repeat in range(1, repeats + 1):
            text = texts[min(repeat, len(texts)) - 1]
            recording.append({"case_id": f"familytool-{split}-{index}-extraction-r{repeat}",
                              "responses": [{"role": "assistant", "content": text}]})
            for method in ("gs", "rr"):
                if (split, index, text, method) in by_reply:
                    expected[(split, index, repeat, method)] = by_reply[(split, index, text, method)]
    return recording, expected, repeats


def test_suite_replay_gives_upstream_values(tmp_path):
    """The same replies through ``pytest suites/familytool --model replay:`` on the real data."""
    recording, expected, repeats = replay_plan(LINES)
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in recording), encoding="utf-8")
    sample_ids = sorted({f"{split}-{index}" for split, index, _, _ in expected})
    proc, report = run_suite(
        tmp_path, "--data-dir", str(SHARED_DATASETS), "--model", f"replay:{replay}", "-n", "0",
        "--no-cache", "--scenario", "extract-gs,extract-rr", "--repeats", str(repeats),
        "--sample-ids", ",".join(sample_ids),
    )
    assert report is not None, proc.stdout[-3000:]
    by_id = {case["case_id"]: case for case in report["cases"]}
    lines = {line["id"]: line for line in LINES}
    checked = set()
    for (split, index, repeat, method), line_id in expected.items():
        case = by_id[f"familytool-{split}-{index}-extract-{method}-r{repeat}"]
        assert case["outcome"] != "error", case.get("failure_message")
        got = {"text": case["details"]["extraction"]["extraction_string"], **case["values"]}
        assert_upstream_values(got, lines[line_id]["upstream"], f"{case['case_id']} ({line_id})")
        checked.add(line_id)
    # Lines sharing a reply and method with another (same upstream values) are checked through it.
    assert {(l["split"], l["index"], l["reply"], l["method"]) for l in LINES} == {
        (lines[i]["split"], lines[i]["index"], lines[i]["reply"], lines[i]["method"]) for i in checked}
