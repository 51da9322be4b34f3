#!/usr/bin/env python3
"""Whole ToolBeHonest runs, upstream's inference and evaluation and the harness, against one scripted model.

    python tests/upstream_diff/toolbehonest_served_runs.py UPSTREAM [--runs 3] [--seed 1] [--data FILE]

``UPSTREAM`` is a clone of ``ToolBeHonest/ToolBeHonest`` (``22da253``). Upstream's own
``process_all_tasks_infer`` runs with its own ``OpenAIGeneration`` (the openai SDK, as its
``scripts/infer_openai.sh`` runs it, model ``gpt-4o-2024-05-13``, pointed at the endpoint served
here with ``OPENAI_BASE_URL``); its ``process_all_tasks_eval`` then scores what it got, with
``calculate_group_results`` and ``calculate_analysis_results`` making the tables (all-MiniLM-L6-v2,
the model the harness loads). ``pytest suites/toolbehonest --base-url`` runs against the same
endpoint. The endpoint's reply depends only on the prompt it is sent: a reply bent from that
record's gold plans for the level the prompt asks (``toolbehonest_scoring.ReplyMaker``).

Compared: every request each side sent (model, messages, temperature, ``max_tokens``, any other
key), and the run's leaderboard (each scenario's L1-EM, L2-PR, L3-PR, L3-MS, the Overall) and error
analysis counts. So the prompts of every record, level and variant, upstream's sampling settings for
OpenAI models, and upstream's run loop (results located with ``task_items.index``) are checked
together with the scoring. Exit status 1 on any difference.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any
from unittest import mock

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_endpoint import ScriptedEndpoint, completion, request_differences, request_key  # noqa: E402
from toolbehonest_scoring import (  # noqa: E402
    REPO,
    SAMPLE,
    ReplyMaker,
    Upstream,
    data_lang,
    suite_data,
    table_differences,
)
from upstream_source import check_runs, diff_arguments, upstream_functions  # noqa: E402

from pytest_toolbench.benchmarks.toolbehonest.schema import ToolBHRecord, load_toolbehonest_file  # noqa: E402
from pytest_toolbench.environments.retrieval import DEFAULT_EMBEDDER, Embedders  # noqa: E402

#: the model of upstream's scripts/infer_openai.sh
MODEL = "gpt-4o-2024-05-13"
PROMPTS = {"_detecting_en", "_planning_en", "_diagnosing_en", "_detecting_zh", "_planning_zh", "_diagnosing_zh"}


class ScriptedModel:
    """The reply to a prompt: its level read from upstream's prompt it starts with, its record and
    variant from its ``<task>``; bent by a generator seeded with the run's seed and the request."""

    def __init__(self, records: list[ToolBHRecord], prompts: dict[str, str], seed: int):
        self.tasks: dict[str, tuple[ToolBHRecord, bool]] = {}
        for record in records:
            self.tasks.setdefault(record.unsolvable_task, (record, False))
            self.tasks.setdefault(record.task, (record, True))
        self.levels = {text: int("_planning" in name) + 2 * int("_diagnosing" in name) + 1
                       for name, text in prompts.items()}
        self.maker = ReplyMaker(random.Random(seed), records)
        self.seed = seed
        self.lock = threading.Lock()

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        key = request_key(body)
        prompt = body["messages"][-1]["content"]
        level = next(level for text, level in self.levels.items() if prompt.startswith(text + "\n\n<task>\n"))
        task = re.search(r"<task>\n(.*?)\n</task>", prompt, flags=re.S)
        record, solvable = self.tasks[task.group(1) if task else ""]
        with self.lock:  # one generator, reseeded for this request
            self.maker.rng = random.Random(f"{self.seed}:{key}")
            reply = {1: self.maker.l1, 2: self.maker.l2, 3: self.maker.l3}[level](record, solvable)
        return completion({"role": "assistant", "content": reply}, key, MODEL)


def upstream_run(upstream: Upstream, raw: list[dict[str, Any]], prompts: dict[str, str], lang: str,
                 base_url: str) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """Upstream's infer then eval mode, in this process: its tables, or why it stopped."""
    ns = upstream.ns
    args = upstream.args
    args.__dict__.update(mode="infer", level_1=True, level_2=True, level_3=True, model_name_save=MODEL,
                         detecting_prompt=prompts[f"_detecting_{lang}"], planning_prompt=prompts[f"_planning_{lang}"],
                         diagnosing_prompt=prompts[f"_diagnosing_{lang}"])
    items = ns["convert_hf_data"](raw)
    # upstream's OpenAI() client finds the endpoint in the environment, as infer_openai.sh leaves it
    with mock.patch.dict(os.environ, OPENAI_BASE_URL=base_url, OPENAI_API_KEY="upstream"):
        generation = ns["OpenAIGeneration"](api_key="upstream", model=MODEL)
        with contextlib.redirect_stdout(io.StringIO()):
            results = ns["process_all_tasks_infer"](items, args, generation.generation_openai)
    args.mode = "eval"
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            metrics = ns["process_all_tasks_eval"](items, args, results)
            return ns["calculate_group_results"](metrics), ns["calculate_analysis_results"](metrics)
    except Exception as exc:  # noqa: BLE001 - upstream's evaluation stops here
        return f"upstream's evaluation raised {type(exc).__name__}: {exc}"


def one_run(upstream: Upstream, raw: list[dict[str, Any]], records: list[ToolBHRecord], prompts: dict[str, str],
            data: Path, seed: int, folder: Path) -> list[str]:
    model = ScriptedModel(records, prompts, seed)
    with ScriptedEndpoint(model.respond) as endpoint:
        tables = upstream_run(upstream, raw, prompts, data_lang(data), endpoint.base_url)
        if isinstance(tables, str):
            print(f"seed {seed}: not compared, {tables}")
            return []
        report = folder / "report.json"
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "suites/toolbehonest", "-q", "-p", "no:randomly", "-n", "0",
             *suite_data(data), "--model", MODEL, "--base-url", endpoint.base_url, "--api-key", "harness",
             "--no-cache", "--runs-dir", str(folder / "runs"), "--toolbench-json", str(report)],
            cwd=REPO, capture_output=True, text=True, timeout=1800)
        if not report.exists():
            return [f"the suite wrote no report: {proc.stdout[-800:]}{proc.stderr[-800:]}"]
        found = request_differences("requests", endpoint.requests["upstream"], endpoint.requests["harness"])
        REQUESTS[0] += len(endpoint.requests["harness"])
    return found + table_differences(*tables, report)


#: requests the harness sent over every run
REQUESTS = [0]


def main() -> int:
    parser = diff_arguments(__doc__, ("upstream", "a clone of ToolBeHonest/ToolBeHonest"), ("--runs", 3))
    parser.add_argument("--data", type=Path, default=SAMPLE, help="test_en.json (default: the project's sample)")
    args = parser.parse_args()
    raw = json.loads(args.data.read_text(encoding="utf-8"))
    records = load_toolbehonest_file(args.data)
    scratch = tempfile.TemporaryDirectory(prefix="toolbench-diff-")  # removed when main returns
    upstream = Upstream(args.upstream, raw, "hard", Embedders(Path(scratch.name)).get(DEFAULT_EMBEDDER).model)
    utils = args.upstream / "utils"
    upstream_functions(utils / "process.py", {"_process_task_infer", "process_task", "process_all_tasks_infer",
                                              "process_all_tasks_eval"}, upstream.ns)
    upstream_functions(utils / "generation_func.py", {"OpenAIGeneration"}, upstream.ns)
    upstream.ns["OpenAI"] = openai.OpenAI  # what generation_func.py imports (its Gemini imports are not needed)
    upstream.ns["tqdm"] = lambda iterable, **_: iterable
    prompts = {k: v for k, v in upstream_functions(utils / "generation_prompt.py", PROMPTS, {}).items() if k in PROMPTS}
    seeds = iter(range(args.seed, args.seed + args.runs))
    differing = check_runs(args.runs, args.show, lambda folder: one_run(
        upstream, raw, records, prompts, args.data, next(seeds), folder), "inference and tables")
    print(f"{REQUESTS[0]} requests from the harness ({args.data.name})")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
