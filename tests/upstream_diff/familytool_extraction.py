#!/usr/bin/env python3
"""FamilyTool's KG extraction and its metrics against upstream's own code, on generated replies.

    python tests/upstream_diff/familytool_extraction.py UPSTREAM [--replies 6000] [--seed 1]
        [--methods gs,rr] [--data-dir ../shared/datasets]

``UPSTREAM`` is a clone of ``yxzwang/FamilyTool`` at ``c3c5fc7`` (``pipeline/`` holds the code).
Each reply is made for a real record of ``--data-dir``'s FamilyTool data from its golden path,
then bent the ways a model bends it: relations renamed, cut, swapped, upper-cased, tagged,
suffixed with the legacy ``全部``; the start entity changed, lower-cased, spaced, unknown or empty;
quotes of every kind, full-width commas and brackets, a line break inside the path, ``path=[]``,
a misspelt keyword, arguments swapped or missing, several calls, code fences. Upstream's
``KG_search`` (Greedy Search as its ``exact`` type, Relation Retrieval as ``relation_retrieval``) and
its metric code (``extract_links_func``, ``changelink2label``, ``calculate_f1em_score_single_sample``,
Format Error, No-Hallucination) run on each reply beside the harness's :func:`extract` and
:func:`extraction_values`; the extraction strings and the five values must be equal. Prints the
first differences and counts of the outcomes; exit status 1 on any difference.

``--runs K`` checks whole runs as well: K times, one generated reply for every record of both
splits, scored by upstream's ``metric_KG_extraction`` (its ratios: EM, F1, No-Hallucination over
the replies that are not format errors, Coverage, Format Error) and by ``pytest suites/familytool
--model replay:FILE --scenario <the methods>``; each method's and split's five figures must be
equal.

Relation Retrieval gives upstream a handler that embeds with the harness's default embedder, the
model the harness's retriever loads (all-MiniLM-L6-v2 from its PyPI package; jina-embeddings-v3
cannot be had here), the same stand-in
``../shared/fidelity/familytool-extraction.jsonl`` was computed with. Upstream embeds every KG
relation again for each reply, so RR runs at a few replies a second.
"""

from __future__ import annotations

import collections
import contextlib
import io
import itertools
import json
import random
import re
import sys
import subprocess
import tempfile
import types
from collections import defaultdict
from pathlib import Path
from typing import Any

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from upstream_source import check_runs, diff_arguments, upstream_functions  # noqa: E402

from pytest_toolbench.benchmarks.familytool.extraction import extract  # noqa: E402
from pytest_toolbench.benchmarks.familytool.kg import KnowledgeGraph  # noqa: E402
from pytest_toolbench.benchmarks.familytool.retriever import RelationRetriever  # noqa: E402
from pytest_toolbench.benchmarks.familytool.schema import FamilyToolRecord, load_records  # noqa: E402
from pytest_toolbench.benchmarks.familytool.scoring import extraction_values  # noqa: E402
from pytest_toolbench.environments import DEFAULT_EMBEDDER  # noqa: E402
from pytest_toolbench.environments.retrieval import Embedders  # noqa: E402

SPLITS = ("b", "e")
UPSTREAM_TYPE = {"gs": "exact", "rr": "relation_retrieval"}
VALUES = ("em", "f1", "coverage", "format_error", "clean")
QUOTES = [('"', '"'), ("'", "'"), ("“", "”"), ("‘", "’"), ("`", "`"), ("", "")]
SPACES = ["", " ", "  ", "\t", "\u00a0", "\u3000"]
POST_FUNCTIONS = {"metric_KG_extraction", "cleanrelation", "extractpath", "cleankgsearch", "merge_with_previous", "examinekg_output",
                  "extractkgsearch", "filter_longest_lists", "KG_search", "search_similar_relations",
                  "generate_fakerelationdict", "generate_true_paths", "extractpath_relationretrieval",
                  "calculate_f1em_score_single_sample", "get_entitys", "changelink2label"}
UTILS_FUNCTIONS = {"KnowledgeGraph", "clean_links", "extract_links_func", "create_faiss_index"}


class MiniLMHandler:
    """Upstream's ``EmbModelHandlerV2`` interface over the sentence-transformers model the
    harness's own retriever uses (one load of the weights serves both sides)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def get_batch_embeddings(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        return np.vstack([
            self.model.encode(texts[i:i + batch_size], batch_size=batch_size, convert_to_tensor=True,
                              normalize_embeddings=True).cpu().numpy()
            for i in range(0, len(texts), batch_size)
        ])  # fmt: skip


class Upstream:
    """Upstream's extraction and metric functions, read from the checkout."""

    def __init__(self, checkout: Path, data: Path, embedding_model: Any | None):
        """``embedding_model``: the sentence-transformers model Relation Retrieval embeds with
        (None: Greedy Search only)."""
        ns: dict[str, Any] = {"re": re, "json": json, "np": np, "faiss": faiss, "itertools": itertools,
                              "defaultdict": defaultdict, "tqdm": lambda items, **_: items,
                              "relation_mappingdict": {}, "embedding_model_name": "jinaai/jina-embeddings-v3"}
        upstream_functions(checkout / "pipeline" / "utils.py", UTILS_FUNCTIONS, ns)
        upstream_functions(checkout / "pipeline" / "KG_extraction_post_process_make_intermediate_json.py",
                           POST_FUNCTIONS, ns)
        self.ns, self.data = ns, data
        self.handler = None if embedding_model is None else MiniLMHandler(embedding_model)
        ns["EmbModelHandlerV2"] = lambda _name: self.handler  # metric_KG_extraction makes its own
        sys.modules.setdefault("ipdb", types.ModuleType("ipdb"))  # it imports ipdb on a miss

    def run_ratios(self, split: str, replies: list[str], raw_records: list[Any], method: str) -> list[float]:
        """``metric_KG_extraction``'s ratios for one split: EM, F1, No-Hallucination, Coverage,
        Format Error."""
        with contextlib.redirect_stdout(io.StringIO()):
            (_, _, ratios), _, _ = self.ns["metric_KG_extraction"](
                [{"response": reply} for reply in replies], raw_records, UPSTREAM_TYPE[method],
                str(self.data / f"familykg-{split}.txt"))
        return [float(r) for r in ratios]

    def extraction(self, split: str, reply: str, method: str) -> dict[str, Any]:
        """``KG_search``'s string, which builds the KG from its file for every reply, as upstream."""
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # upstream prints its retrievals
                return {"text": self.ns["KG_search"](reply, UPSTREAM_TYPE[method],
                                                     str(self.data / f"familykg-{split}.txt"), self.handler)}
        except Exception as exc:  # noqa: BLE001 - a crash of upstream's is a difference to show
            return {"raise": f"{type(exc).__name__}: {exc}"}

    def values(self, raw_record: list[dict[str, Any]], text: str) -> dict[str, Any]:
        """``metric_KG_extraction``'s per-sample values for one extraction string."""
        gold_response = str(raw_record[-1]["content"])
        gold_kg = re.search(r"\(.*?\)", raw_record[2]["content"]).group(0)  # type: ignore[union-attr]
        try:
            y_true, y_pred, coverage = self.ns["changelink2label"](
                self.ns["extract_links_func"](gold_kg), self.ns["extract_links_func"](text), gold_response)
            f1, em = self.ns["calculate_f1em_score_single_sample"](y_true, y_pred)
        except Exception as exc:  # noqa: BLE001 - upstream's metric crashes (a link of 2 parts)
            return {"raise": f"{type(exc).__name__}: {exc}"}
        return {"em": float(em), "f1": float(f1), "coverage": float(coverage),
                "format_error": 1.0 if text == "" else 0.0,
                "clean": 1.0 if text != "" and "bad_extract" not in text else 0.0}


class ReplyMaker:
    """Replies to a record's extraction prompt, built from its golden path and bent at random."""

    def __init__(self, rng: random.Random, kg: KnowledgeGraph):
        self.rng = rng
        self.relations = sorted(kg.relation_set)
        self.entities = sorted(kg.entities)

    def relation(self, relation: str) -> str:
        roll, rng = self.rng.random(), self.rng
        bent = [(0.3, relation), (0.4, rng.choice(self.relations)), (0.5, relation.replace("_", " ")),
                (0.6, relation + "s"), (0.65, relation.upper()), (0.7, relation + "全部"), (0.75, "全部"),
                (0.8, rng.choice(["mom", "dad", "spouse", "husband's", "favourite", "prefer", ""])),
                (0.85, relation[: max(1, len(relation) - 2)]), (0.9, f"<relationship>{relation}</relationship>")]
        return next((value for limit, value in bent if roll < limit),
                    rng.choice(SPACES) + relation + rng.choice(SPACES))

    def start(self, start: str) -> str:
        roll, rng = self.rng.random(), self.rng
        bent = [(0.55, start), (0.65, rng.choice(self.entities)), (0.7, start.lower()), (0.75, "Mr. " + start),
                (0.8, start + rng.choice(SPACES)), (0.85, ""), (0.9, f"{start},{start}")]
        return next((value for limit, value in bent if roll < limit),
                    rng.choice(["Unknown", "me", "I", "user", f"<entity>{start}</entity>"]))

    def call(self, record: FamilyToolRecord) -> str:
        rng = self.rng
        links = record.golden_links
        relations = [link[1] for link in links] or ["mother"]
        if rng.random() < 0.3:
            relations = relations[: rng.randint(1, len(relations))]
            relations += [rng.choice(self.relations)] if rng.random() < 0.3 else []
        opening, closing = rng.choice(QUOTES)
        tag = "<relationship>" if rng.random() < 0.6 else ""
        items = rng.choice([",", ", ", "，", " , "]).join(
            f"{opening}{tag}{self.relation(r)}{closing}" for r in relations)
        left, right = ("【", "】") if rng.random() < 0.05 else ("[", "]")
        start_quote = rng.choice(QUOTES)
        start = f"start={start_quote[0]}{self.start(links[0][0] if links else 'Bob')}{start_quote[1]}"
        path = f"path={left}{items}{right}"
        roll = rng.random()
        path = ("path=[]" if roll < 0.05 else "relations=" + path[5:] if roll < 0.1
                else "Path=" + path[5:] if roll < 0.13 else path.replace("[", "[\n") if roll < 0.16 else path)
        arguments = [start, path][:: -1 if rng.random() < 0.1 else 1]
        arguments = [path] if rng.random() < 0.05 else [start] if rng.random() < 0.05 else arguments
        head = rng.choice(["KG.search (", "kg.search(", "KGxsearch("]) if rng.random() < 0.1 else "KG.search("
        tail = rng.choice(["))", ""]) if rng.random() < 0.1 else ")"
        return head + rng.choice([", ", ",", " , "]).join(arguments) + tail

    def reply(self, record: FamilyToolRecord) -> str:
        rng = self.rng
        return "".join(rng.choice(["", "```python\n", "I will search.\n", "\n"]) + self.call(record)
                       + rng.choice(["", "\n```", "\n", " and "]) for _ in range(rng.choice([1, 1, 1, 2, 3])))


RUN_METRICS = ("em", "f1", "no_hallucination", "coverage", "format_error")
REPO = Path(__file__).resolve().parents[2]


def whole_run(upstream: Upstream, makers: dict[str, ReplyMaker], records: dict[str, list[FamilyToolRecord]],
              raw: dict[str, list[Any]], methods: list[str], data_dir: Path, folder: Path) -> list[str]:
    """One generated run scored by upstream's metric_KG_extraction and by the suite."""
    replies = {s: [makers[s].reply(record) for record in records[s]] for s in SPLITS}
    replay = folder / "replies.jsonl"
    replay.write_text("".join(
        json.dumps({"case_id": f"familytool-{s}-{record.index}-extraction",
                    "responses": [{"role": "assistant", "content": reply}]}, ensure_ascii=False) + "\n"
        for s in SPLITS for record, reply in zip(records[s], replies[s])), encoding="utf-8")
    report = folder / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/familytool", "-q", "-p", "no:randomly", "-n", "0",
         "--data-dir", str(data_dir), "--model", f"replay:{replay}", "--no-cache",
         "--scenario", ",".join(f"extract-{m}" for m in methods), "--runs-dir", str(folder / "runs"),
         "--toolbench-json", str(report)], cwd=REPO, capture_output=True, text=True, timeout=1800)
    if not report.exists():
        return [f"the suite wrote no report: {proc.stdout[-800:]}"]
    scenarios = {s["scenario"]: s for s in json.loads(report.read_text(encoding="utf-8"))["metrics"]["scenarios"]}
    differences = []
    for method in methods:
        by_split = {b["group"]: b["metrics"] for b in scenarios[f"extract-{method}"]["breakdown"]["split"]}
        for split in SPLITS:
            theirs = upstream.run_ratios(split, replies[split], raw[split], method)
            ours = [by_split[split][name]["value"] for name in RUN_METRICS]
            for name, a, b in zip(RUN_METRICS, theirs, ours):
                if b is None or abs(a - b) > 1e-12:
                    differences.append(f"{method} {split} {name}: upstream {a}, harness {b}")
    return differences


def main() -> int:
    parser = diff_arguments(__doc__, ("upstream", "a clone of yxzwang/FamilyTool at c3c5fc7"), ("--replies", 6000))
    parser.add_argument("--methods", default="gs", help="gs, rr or gs,rr (rr is slow: see the docstring)")
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[3] / "shared" / "datasets")
    parser.add_argument("--runs", type=int, default=0, help="whole generated runs to check (see the docstring)")
    args = parser.parse_args()
    methods = args.methods.split(",")
    data = args.data_dir / "familytool"
    records = {s: load_records(data / f"familytool-{s}.jsonl", s) for s in SPLITS}
    raw = {s: [json.loads(line) for line in (data / f"familytool-{s}.jsonl").read_text(encoding="utf-8").splitlines()
               if line.strip()] for s in SPLITS}
    kgs = {s: KnowledgeGraph.from_file(data / f"familykg-{s}.txt") for s in SPLITS}
    scratch = tempfile.TemporaryDirectory(prefix="toolbench-diff-")  # removed when main returns
    embedders = Embedders(Path(scratch.name))
    relation_retrieval = "rr" in methods
    upstream = Upstream(args.upstream, data, embedders.get(DEFAULT_EMBEDDER).model if relation_retrieval else None)
    top_k = ({s: RelationRetriever(kgs[s], embedders, DEFAULT_EMBEDDER).top_k for s in SPLITS}
             if relation_retrieval else {})
    rng = random.Random(args.seed)
    makers = {s: ReplyMaker(rng, kgs[s]) for s in SPLITS}
    outcomes: collections.Counter[tuple[str, ...]] = collections.Counter()
    differ = 0

    def show(kind: str, **details: Any) -> None:
        nonlocal differ
        differ += 1
        if differ <= args.show:
            print(json.dumps({"differs": kind, **details}, ensure_ascii=False))

    for _ in range(args.replies):
        split = rng.choice(SPLITS)
        index = rng.randrange(len(records[split]))
        reply = makers[split].reply(records[split][index])
        for method in methods:
            theirs = upstream.extraction(split, reply, method)
            ours = extract(reply, kgs[split], method, top_k.get(split), 3)  # type: ignore[arg-type]
            where = {"split": split, "index": index, "method": method, "reply": reply}
            if theirs.get("text") != ours.text:
                show("extraction", **where, upstream=theirs, harness=ours.text)
                continue
            their_values = upstream.values(raw[split][index], ours.text)
            values = extraction_values(records[split][index].golden_links, ours.text, records[split][index].golden_calls)
            our_values = {key: values[key] for key in VALUES}
            kind = "format error" if ours.text == "" else "bad_extract" if "bad_extract" in ours.text else "clean"
            outcomes[(method, kind, f"em {their_values.get('em')}", f"coverage {their_values.get('coverage')}")] += 1
            if their_values != our_values:
                show("values", **where, extraction=ours.text, upstream=their_values, harness=our_values)
    for key, count in sorted(outcomes.items()):
        print(" ".join(f"{part:14}" for part in key), count)
    print(f"{args.replies} replies x {methods} (seed {args.seed}): {differ} differ from upstream")
    runs_differ = check_runs(args.runs, args.show, lambda folder: whole_run(
        upstream, makers, records, raw, methods, args.data_dir, folder), "metric_KG_extraction")
    return 1 if differ or runs_differ else 0


if __name__ == "__main__":
    sys.exit(main())
