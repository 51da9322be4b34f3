#!/usr/bin/env python3
"""ToolHop's open-model parsers against upstream's own, on generated raw completions.

    python tests/upstream_diff/toolhop_open_parsers.py UPSTREAM/code/evaluation_open.py \\
        [--texts 40000] [--seed 1]

``UPSTREAM`` is a clone of ``MananDesai54/llm-benchmarking`` (``evaluation_open.py`` is the same
in every commit). Each text is made of random pieces a Qwen2.5 or Llama-3.1 completion may hold:
``<tool_call>`` blocks, ``<|python_tag|>``, call objects whose ``name`` or ``arguments`` /
``parameters`` is missing, not a string, a JSON string, single-quoted, cut short or unbalanced,
Python literals, prose and code fences, and now and then a value nested about as deep as
upstream's ``json.loads`` (CPython 3.11) or json_repair's own parser reads, broken or not. Each goes through upstream's ``parse_qwen25`` /
``parse_llama31`` (json_repair as this environment pins it, at upstream's stack depth) and through
the harness's :func:`parse_open_reply`, and the two must give the same assistant message (call
ids aside, which upstream draws from the clock) or fail alike. Prints the first differences,
then counts of what upstream made of the texts; exit status 1 on any difference.

This is the generator behind ``../shared/fidelity/toolhop-open-parsers.jsonl``'s kind of check,
run on as many texts as asked; the replay of that file is ``tests/test_fidelity_toolhop_open_parsers.py``.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import io
import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from hashlib import sha256
from pathlib import Path
from typing import Any

import json_repair

sys.path.insert(0, str(Path(__file__).resolve().parent))
from upstream_source import diff_arguments, upstream_functions  # noqa: E402

from pytest_toolbench.benchmarks.toolhop.open_parsers import (  # noqa: E402
    OpenParseError,
    deterministic_ids,
    parse_open_reply,
)

SERIES = ("qwen25", "llama31")
NAMES = ["get_weather", "search", "f", "", "名字", "a b", 'x"y']
VALUES = ['"Paris"', "1", "1.50", "-0", "true", "True", "None", "null", "[1,2]", '{"a": 1}', "'single'",
          '"unterminated', "NaN", "1e400", '"\\u00e9"', '"é"', "{}", "[]", '"a,b"', "0x10"]
#: Nestings around where upstream's json.loads (CPython 3.11: 985 levels under the parser) and
#: json_repair's own parser (about 490 levels) stop.
DEEP_LEVELS = [*range(480, 500), *range(978, 992), 1200]
#: What the deepest level holds: a value, or a syntax error of each kind the scanner raises.
DEEP_BOTTOMS = ["1", '"x"', "[]", "1 2", "1,", '"\\q"', "x", '"open', '{"a" 1}', '{"a": 1,}', "{[", "1.]"]
FILLERS = ["", " ", "\n", "\n\n", "Sure.", "I'll call the tool.\n", "<answer>Paris</answer>", "```json\n",
           "\n```", "<tool_call>", "</tool_call>", "<|python_tag|>", "tool_call", "<", ">", "{", "}", "[",
           "]", "\t"]


def normalised(message: dict[str, Any]) -> dict[str, Any]:
    """A JSON copy of ``message`` with every call id ``"ID"`` (upstream's are clock hashes)."""
    copy = json.loads(json.dumps(message))
    for call in copy.get("tool_calls") or []:
        call["id"] = "ID"
    return copy


class Upstream:
    """Upstream's two parsers, each called as deep in a worker thread's stack as upstream calls
    it (``sample_process`` -> ``sample_process_<scenario>`` -> ``test_open`` -> parser): json_repair
    recurses, so the depth decides where a deeply nested text stops parsing."""

    def __init__(self, source: Path):
        ns = upstream_functions(source, {"parse_qwen25", "parse_llama31"},
                                {"json": json, "json_repair": json_repair, "sha256": sha256, "datetime": datetime})
        self.parsers = {"qwen25": ns["parse_qwen25"], "llama31": ns["parse_llama31"]}
        self.pool = ThreadPoolExecutor(1)

    def __call__(self, series: str, text: str) -> dict[str, Any]:
        parser = self.parsers[series]

        def test_open() -> dict[str, Any]:
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # upstream prints what it drops
                    return {"ok": normalised(parser(text))}
            except BaseException as exc:  # noqa: BLE001 - upstream's test_open catches it
                return {"raise": type(exc).__name__}

        def sample_process_scenario() -> dict[str, Any]:
            return test_open()

        def sample_process() -> dict[str, Any]:
            return sample_process_scenario()

        return self.pool.submit(sample_process).result()


def harness(series: str, text: str) -> dict[str, Any]:
    """The harness's parse of ``text`` in the same notation."""
    try:
        return {"ok": normalised(parse_open_reply(series, text, deterministic_ids("diff")))}
    except OpenParseError as exc:
        return {"raise": exc.upstream_exception}


def deep_value(rng: random.Random) -> str:
    """A value nested near a parser's limit, its levels arrays or objects, its bottom perhaps broken,
    its closers perhaps one short."""
    levels = [rng.choice(["[", '{"a": ']) for _ in range(rng.choice(DEEP_LEVELS))]
    closers = "".join("]" if level == "[" else "}" for level in reversed(levels))
    if rng.random() < 0.2:
        closers = closers[:-1]
    return "".join(levels) + rng.choice(DEEP_BOTTOMS) + closers


def json_value(rng: random.Random, depth: int = 0) -> str:
    if depth == 0 and rng.random() < 0.03:
        return deep_value(rng)
    roll = rng.random()
    if depth > 2 or roll < 0.4:
        return rng.choice(VALUES)
    if roll < 0.7:
        items = [f'"{rng.choice(["a", "b", "city", "q", ""])}": {json_value(rng, depth + 1)}'
                 for _ in range(rng.randint(0, 3))]
        return "{" + rng.choice([", ", ",", " ,\n"]).join(items) + rng.choice(["}", "}", "", ",}"])
    return "[" + ", ".join(json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))) + rng.choice(["]", "]", ""])


def call_object(rng: random.Random, arguments_key: str) -> str:
    parts = []
    if rng.random() < 0.9:
        parts.append(f'"name": "{rng.choice(NAMES)}"' if rng.random() < 0.9 else f'"name": {rng.choice(VALUES)}')
    if rng.random() < 0.9:
        value = json_value(rng)
        parts.append(f'"{arguments_key}": {json.dumps(value) if rng.random() < 0.3 else value}')
    if rng.random() < 0.2:
        parts.append(f'"{rng.choice(["type", "id", "arguments", "parameters"])}": {json_value(rng)}')
    rng.shuffle(parts)
    text = "{" + ", ".join(parts) + rng.choice(["}", "}", "}", "", "}}", "},"])
    if rng.random() < 0.1:
        text = text.replace('"', "'")
    if rng.random() < 0.05:
        text = text[: rng.randint(0, len(text))]
    return text


def completion(rng: random.Random, series: str) -> str:
    pieces = []
    for _ in range(rng.randint(1, 5)):
        roll = rng.random()
        if roll < 0.35:
            pieces.append(rng.choice(FILLERS))
        elif series == "qwen25" or roll < 0.5:
            pieces.append("<tool_call>" * rng.choice([1, 1, 1, 2]) + rng.choice(["", "\n", " "])
                          + call_object(rng, "arguments") + rng.choice(["", "\n"])
                          + rng.choice(["</tool_call>", "</tool_call>", "", "</tool_call>\n"]))
        else:
            body = call_object(rng, "parameters")
            if rng.random() < 0.3:
                body = "[" + ", ".join(call_object(rng, "parameters") for _ in range(rng.randint(0, 3))) \
                    + rng.choice(["]", ""])
            pieces.append(rng.choice(["", "<|python_tag|>", "<|python_tag|>", " <|python_tag|> "]) + body)
    return "".join(pieces)


def outcome(result: dict[str, Any]) -> str:
    if "raise" in result:
        return f"raises {result['raise']}"
    calls = result["ok"]["tool_calls"]
    return "calls" if calls else ("tool_calls []" if calls == [] else "no call")


def main() -> int:
    parser = diff_arguments(__doc__, ("evaluation_open", "upstream's code/evaluation_open.py"), ("--texts", 40000))
    args = parser.parse_args()
    upstream = Upstream(args.evaluation_open)
    rng = random.Random(args.seed)
    outcomes: collections.Counter[tuple[str, str]] = collections.Counter()
    differ = 0
    for _ in range(args.texts):
        series = rng.choice(SERIES)
        text = completion(rng, series)
        theirs, ours = upstream(series, text), harness(series, text)
        outcomes[(series, outcome(theirs))] += 1
        if theirs != ours:
            differ += 1
            if differ <= args.show:
                print(json.dumps({"series": series, "text": text, "upstream": theirs, "harness": ours},
                                 ensure_ascii=False))
    for (series, what), count in sorted(outcomes.items()):
        print(f"{series:8} {what:18} {count}")
    print(f"{args.texts} texts (seed {args.seed}): {differ} differ from upstream")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
