#!/usr/bin/env python3
"""ToolBeHonest's answer extraction and L1/L2/L3 scores against upstream's own, on generated replies.

    python tests/upstream_diff/toolbehonest_scoring.py UPSTREAM [--replies 3000] [--seed 1]
        [--data FILE] [--calculate-type hard]

``UPSTREAM`` is a clone of ``ToolBeHonest/ToolBeHonest`` (``22da253``; its scoring code is unchanged
since the first commit). For each generated pair of replies (the solvable and the unsolvable
variant of one record at one level) upstream's ``_process_task_eval`` runs with its own
``get_tools_embeddings`` database and all-MiniLM-L6-v2 (upstream's default ``minilm`` embedder,
the model the harness's matcher loads, from its PyPI package), beside the harness's :func:`score_reply` with its FAISS database. The
two must agree on L1 EM, L2 and L3 progress rates, the unsolvable variant's error-analysis
condition and every L3 matching score (to 1e-5: upstream takes sklearn's float64 cosine of
float32 vectors), and must fail on the same replies (upstream raises, the harness's case is a
``ScoringError``). Replies are bent from the record's gold plans: answers in and out of
``<answer>`` tags, across lines, doubled; plans cut, reordered, with tools of another record or
none provided, ``Finish`` added, UnsolvableQuery moved or dropped, lines padded; L3 subgoals that
quote the record's own tool descriptions or another's, full-width colons, a missing space before
``Planned tool``. The records are the real ``test_en.json`` when given, else the project's sample.

``--runs K`` checks whole runs as well: K times, one generated reply for every case of the data
(each record, level and variant), scored by upstream's ``calculate_group_results`` and
``calculate_analysis_results`` and by ``pytest suites/toolbehonest --model replay:FILE``; the
run's leaderboard (each scenario's L1-EM, L2-PR, L3-PR, L3-MS and the Overall) and its error
analysis counts must equal upstream's. Exit status 1 on any difference.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import pickle
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from upstream_source import check_runs, diff_arguments, upstream_functions  # noqa: E402

from pytest_toolbench.benchmarks.toolbehonest.runner import score_reply  # noqa: E402
from pytest_toolbench.benchmarks.toolbehonest.schema import (  # noqa: E402
    UNSOLVABLE,
    ToolBHRecord,
    load_toolbehonest_file,
    parse_tool_string,
)
from pytest_toolbench.benchmarks.toolbehonest.scoring import ScoringError  # noqa: E402
from pytest_toolbench.benchmarks.toolbehonest.tooldb import ToolMatcherIndex, build_tool_database  # noqa: E402
from pytest_toolbench.environments.retrieval import DEFAULT_EMBEDDER, Embedders  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "toolbehonest" / "sample_en.json"
REPO = Path(__file__).resolve().parents[2]
#: upstream's calculate_group_results names -> the leaderboard's keys
LEADERBOARD = {"Level 1 Exact Match": "l1_em", "Level 2 Progress Rate": "l2_pr",
               "Level 3 Progress Rate": "l3_pr", "Level 3 Matching Score": "l3_ms"}
#: upstream's calculate_analysis_results labels -> the error analysis's condition keys
CONDITIONS = {"Non-existent Tools": "non_existent_tools", "Solvability Hallucination": "solvability_hallu",
              "Wrong Tools": "wrong_tools", "Wrong UnsolvableQuery Index": "wrong_unsolvable_index",
              "Wrong Tool Reasoning": "wrong_reasoning", "Correct": "correct"}
EVALUATION = {"calculate_progress_rate", "calculate_scorers", "_evaluate_detecting", "_evaluate_planning",
              "_evaluate_planning_analysis", "_evaluate_diagnosing", "_evaluate_diagnosing_analysis"}
LEVEL_NAMES = {1: "level_1", 2: "level_2", 3: "level_3"}
TOLERANCE = 1e-5


class Upstream:
    """Upstream's evaluation of one record at one level (``_process_task_eval``)."""

    def __init__(self, checkout: Path, records: list[dict[str, Any]], calculate_type: str, embedding_model: Any):
        """``embedding_model``: upstream's ``minilm`` ``SentenceTransformer`` (the harness's own)."""
        from sklearn.metrics.pairwise import cosine_similarity

        utils = checkout / "utils"
        ns: dict[str, Any] = {"re": re, "np": np, "cosine_similarity": cosine_similarity, "os": os,
                              "pickle": pickle}
        upstream_functions(utils / "evaluation_func.py", EVALUATION, ns)
        upstream_functions(utils / "extract_func.py", {"remove_finish_if_last", "_extract_subgoal_plantool_del_lastfinish"}, ns)
        upstream_functions(utils / "process.py", {"_process_task_eval", "convert_hf_data"}, ns)
        upstream_functions(utils / "generation_func.py", {"get_tools_embeddings"}, ns)
        from itertools import chain

        ns.update(chain=chain, tabulate=None)
        upstream_functions(utils / "calculate_metrics.py", {"subtask_groups", "flatten", "calculate_group_metrics",
                                                            "calculate_hallu_analysis", "calculate_overall_level_metrics",
                                                            "calculate_group_results", "calculate_analysis_results"}, ns)
        self.ns = ns
        self.args = SimpleNamespace(answer_pattern=r"<answer>(.*?)</answer>", calculate_type=calculate_type,
                                    embedding_model="minilm", embedding_type="minilm",
                                    emb_model=embedding_model)
        with tempfile.TemporaryDirectory(prefix="toolbench-diff-") as folder, contextlib.chdir(folder):
            self.args.tools_embedding = ns["get_tools_embeddings"](ns["convert_hf_data"](records), self.args)

    def __call__(self, level: int, record: dict[str, Any], replies: dict[str, str]) -> dict[str, Any]:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                return self.ns["_process_task_eval"](LEVEL_NAMES[level], record, record["subtask"], self.args, replies)
        except Exception as exc:  # noqa: BLE001 - upstream's evaluation would stop here
            return {"raise": f"{type(exc).__name__}: {exc}"}


def harness(level: int, record: ToolBHRecord, replies: dict[str, str], matcher: ToolMatcherIndex,
            kind: str) -> dict[str, Any]:
    """The harness's values for both variants, in upstream's shape."""
    out: dict[str, Any] = {}
    for variant in ("solvable", "unsolvable"):
        try:
            values, details = score_reply(record, level, variant == "solvable", replies[variant], matcher, kind)
        except ScoringError as exc:
            return {"raise": f"ScoringError: {exc}"}
        if level == 1:
            out[variant] = next(iter(values.values()))
            continue
        score: dict[str, Any] = {"progress_rate": next(v for k, v in values.items() if "_pr" in k)}
        if level == 3:
            score["scorers"] = "" if details["scorers"] is None else details["scorers"]
        if variant == "unsolvable":
            score["condition"] = details["condition"]
        out[variant] = score
    return out


def same(theirs: Any, ours: Any) -> bool:
    if isinstance(theirs, dict) and isinstance(ours, dict):
        return theirs.keys() == ours.keys() and all(same(theirs[k], ours[k]) for k in theirs)
    if isinstance(theirs, list) and isinstance(ours, list):
        return len(theirs) == len(ours) and all(same(a, b) for a, b in zip(theirs, ours))
    if isinstance(theirs, (int, float, np.floating)) and isinstance(ours, (int, float)):
        return abs(float(theirs) - float(ours)) <= TOLERANCE
    return theirs == ours


class ReplyMaker:
    """Replies bent from a record's gold plans and the tools of its subtask."""

    def __init__(self, rng: random.Random, records: list[ToolBHRecord]):
        self.rng = rng
        self.tools = [tool for record in records for tool in parse_tool_string(record.tools)]

    def l1(self, _: ToolBHRecord, __: bool) -> str:
        rng = self.rng
        answer = rng.choice(["solvable", "unsolvable", "Unsolvable", " UNSOLVABLE ", "solvable.", "", "maybe"])
        wrap = rng.choice(["<answer>{}</answer>", "<answer>\n{}\n</answer>", "{}", "<answer>{}", "Answer: <answer>{}</answer> <answer>solvable</answer>"])
        return rng.choice(["", "Thinking...\n"]) + wrap.format(answer)

    def plan(self, record: ToolBHRecord, solvable: bool) -> list[str]:
        rng = self.rng
        gold = list(record.planning_tools if solvable else record.planning_tools_unsolvable)
        roll = rng.random()
        if roll < 0.3:
            return gold
        if roll < 0.45:
            return gold[: rng.randint(0, len(gold))]
        if roll < 0.55:
            return rng.sample(gold, len(gold))
        if roll < 0.65:
            plan = [t for t in gold if t != UNSOLVABLE]
            return plan if rng.random() < 0.5 else plan + [UNSOLVABLE]
        if roll < 0.75 and gold:
            plan = list(gold)
            plan[rng.randrange(len(plan))] = rng.choice(self.tools)[0] if self.tools else "Other"
            return plan
        if roll < 0.85:
            return [UNSOLVABLE] + gold
        return [rng.choice([" ", ""]) + t + rng.choice([" ", "", "\t"]) for t in gold] + rng.choice([[], ["Finish"], ["finish"]])

    def l2(self, record: ToolBHRecord, solvable: bool) -> str:
        rng = self.rng
        lines = "\n".join(self.plan(record, solvable))
        return rng.choice(["<answer>{}</answer>", "<answer>\n{}\n</answer>", "{}", "Plan:\n<answer>{}</answer>\n<answer>Finish</answer>"]).format(lines)

    def l3(self, record: ToolBHRecord, solvable: bool) -> str:
        rng = self.rng
        own = dict(parse_tool_string(record.tools))
        described = dict(self.tools)
        lines = []
        for k, tool in enumerate(self.plan(record, solvable), 1):
            roll = rng.random()
            missing = record.planning_tools[k - 1] if k <= len(record.planning_tools) else ""
            if tool.strip() == UNSOLVABLE and missing in described and rng.random() < 0.5:
                text = described[missing]  # what the tool the variant lacks would do: MS 1.0
            elif roll < 0.4 and own:
                text = own.get(tool.strip()) or rng.choice(list(own.values()))
            elif roll < 0.7 and self.tools:
                text = rng.choice(self.tools)[1]
            else:
                text = rng.choice(["Do the step.", "Install the package", "Charge the card", ""])
            colon = rng.choice([":", ":", "："])
            gap = rng.choice([" "] * 6 + ["", "\n"])
            lines.append(f"Subgoal {k}{colon} {text}{gap}Planned tool{colon} {tool}")
        return rng.choice(["<answer>{}</answer>", "<answer>\n{}\n</answer>", "{}"]).format("\n".join(lines))


def bent_record(rng: random.Random, raw: dict[str, Any], record: ToolBHRecord) -> tuple[dict[str, Any], ToolBHRecord]:
    """Now and then a copy of the record that upstream cannot fully score: a solvable plan cut
    short of an UnsolvableQuery index, a ``tools`` string without one of the solvable plan's tools,
    a plan that is only ``Finish`` (the loader warns of each; the harness scores the case as an
    error exactly where upstream raises)."""
    roll = rng.random()
    if roll < 0.9:
        return raw, record
    if roll < 0.94:
        update = {"planning_tools": record.planning_tools[: rng.randint(0, len(record.planning_tools))]}
    elif roll < 0.98:
        dropped = rng.choice(record.planning_tools)
        update = {"tools": "\n".join(line for line in record.tools.split("\n") if not re.search(
            rf"\d+\.\s*{re.escape(dropped)}\s*[:：]", line))}
    else:
        update = {rng.choice(["planning_tools", "planning_tools_unsolvable"]): ["Finish"]}
    return {**raw, **update}, record.model_copy(update=update)


def whole_run(upstream: Upstream, raw: list[dict[str, Any]], records: list[ToolBHRecord], maker: ReplyMaker,
              data: Path, folder: Path) -> list[str]:
    """One generated run scored by upstream's tables and by the suite; the differences found."""
    cases, per_task = [], collections.defaultdict(lambda: collections.defaultdict(list))
    position: collections.Counter[str] = collections.Counter()
    for raw_record, record in zip(raw, records):
        i = position[record.subtask]
        position[record.subtask] += 1
        for level in (1, 2, 3):
            make = {1: maker.l1, 2: maker.l2, 3: maker.l3}[level]
            replies = {variant: make(record, variant == "solvable") for variant in ("solvable", "unsolvable")}
            per_task[record.subtask][LEVEL_NAMES[level]].append(upstream(level, raw_record, replies))
            cases += [{"case_id": f"toolbehonest-{record.subtask}-{i}-L{level}-{variant}",
                       "responses": [{"role": "assistant", "content": reply}]} for variant, reply in replies.items()]
    if any("raise" in result for levels in per_task.values() for results in levels.values() for result in results):
        return []  # upstream's whole evaluation stops: nothing to compare
    with contextlib.redirect_stdout(io.StringIO()):
        groups = upstream.ns["calculate_group_results"](per_task)
        analysis = upstream.ns["calculate_analysis_results"](per_task)
    replay, report = folder / "replies.jsonl", folder / "report.json"
    replay.write_text("".join(json.dumps(case) + "\n" for case in cases), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/toolbehonest", "-q", "-p", "no:randomly", "-n", "0", *suite_data(data),
         "--model", f"replay:{replay}", "--no-cache", "--runs-dir", str(folder / "runs"),
         "--toolbench-json", str(report)],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    if not report.exists():
        return [f"the suite wrote no report: {proc.stdout[-800:]}"]
    return table_differences(groups, analysis, report)


def data_lang(data: Path) -> str:
    """The language of a ToolBeHonest data file: sample_en.json / test_zh.json."""
    return data.stem.rsplit("_", 1)[-1]


def suite_data(data: Path) -> list[str]:
    """The suite's options that read ``data`` (the project's sample, or a real ``test_<lang>.json``)."""
    return (["--data", "sample"] if data.stem.startswith("sample_") else ["--data-dir", str(data.parent.parent)]) \
        + ["--toolbehonest-lang", data_lang(data)]


def table_differences(groups: dict[str, Any], analysis: dict[str, Any], report: Path) -> list[str]:
    """Upstream's ``calculate_group_results`` / ``calculate_analysis_results`` against the
    leaderboard and error-analysis tables of the suite's JSON report."""
    tables = {t["name"]: t["values"] for t in json.loads(report.read_text(encoding="utf-8"))["metrics"]["tables"]}
    differences = []
    for scenario in ("MNT", "PT", "LFT"):
        for name, key in LEADERBOARD.items():
            theirs, ours = float(groups[scenario][name]), tables["leaderboard"].get(f"{scenario}.{key}")
            if ours is None or abs(theirs - ours) > TOLERANCE:
                differences.append(f"{scenario} {name}: upstream {theirs}, harness {ours}")
    theirs, ours = float(groups["overall"]["overall"]), tables["leaderboard"].get("overall")
    if ours is None or abs(theirs - ours) > TOLERANCE:
        differences.append(f"Overall: upstream {theirs}, harness {ours}")
    for label, counts in analysis.items():  # upstream's labels read "LeveL 2 / MNT" (its str.replace)
        ours_label = label.replace("LeveL", "Level")
        for name, key in CONDITIONS.items():
            if tables["error_analysis"].get(f"{ours_label}.{key}") != counts[name]:
                differences.append(f"{ours_label} {name}: upstream {counts[name]}, "
                                   f"harness {tables['error_analysis'].get(f'{ours_label}.{key}')}")
    return differences


def main() -> int:
    parser = diff_arguments(__doc__, ("upstream", "a clone of ToolBeHonest/ToolBeHonest"), ("--replies", 3000))
    parser.add_argument("--data", type=Path, default=SAMPLE, help="test_en.json (default: the project's sample)")
    parser.add_argument("--calculate-type", choices=["hard", "soft"], default="hard")
    parser.add_argument("--runs", type=int, default=0, help="whole generated runs to check (see the docstring)")
    args = parser.parse_args()
    raw = json.loads(args.data.read_text(encoding="utf-8"))
    records = load_toolbehonest_file(args.data)
    scratch = tempfile.TemporaryDirectory(prefix="toolbench-diff-")  # removed when main returns
    embedders = Embedders(Path(scratch.name))
    upstream = Upstream(args.upstream, raw, args.calculate_type, embedders.get(DEFAULT_EMBEDDER).model)
    matcher = ToolMatcherIndex(build_tool_database(records), embedders)
    rng = random.Random(args.seed)
    maker = ReplyMaker(rng, records)
    outcomes: collections.Counter[str] = collections.Counter()
    differ = 0
    for _ in range(args.replies):
        index = rng.randrange(len(records))
        level = rng.choice([1, 2, 3])
        make = {1: maker.l1, 2: maker.l2, 3: maker.l3}[level]
        raw_record, record = bent_record(rng, raw[index], records[index])
        replies = {variant: make(record, variant == "solvable") for variant in ("solvable", "unsolvable")}
        theirs = upstream(level, raw_record, replies)
        ours = harness(level, record, replies, matcher, args.calculate_type)
        unsolvable = theirs.get("unsolvable")
        condition = unsolvable.get("condition") if isinstance(unsolvable, dict) else None
        outcomes[f"L{level} " + ("raises" if "raise" in theirs else str(condition or unsolvable))] += 1
        if ("raise" in theirs) != ("raise" in ours) or ("raise" not in theirs and not same(theirs, ours)):
            differ += 1
            if differ <= args.show:
                print(json.dumps({"record": index, "level": level, "replies": replies, "upstream": theirs,
                                  "harness": ours}, ensure_ascii=False, default=float))
    for what, count in sorted(outcomes.items()):
        print(f"{what:32} {count}")
    print(f"{args.replies} reply pairs (seed {args.seed}, {args.data.name}): {differ} differ from upstream")
    if args.runs and args.calculate_type != "hard":
        raise SystemExit("--runs checks the suite's default scoring: --calculate-type hard")
    runs_differ = check_runs(args.runs, args.show, lambda folder: whole_run(
        upstream, raw, records, maker, args.data, folder), "tables")
    return 1 if differ or runs_differ else 0


if __name__ == "__main__":
    sys.exit(main())
