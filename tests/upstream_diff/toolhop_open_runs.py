#!/usr/bin/env python3
"""Whole ToolHop runs under the open protocol, upstream's ``evaluation_open.py`` and the harness's
``--decoding open``, against one scripted generator.

    pip install --target DEPS func_timeout   # upstream's dependency
    PYTHONPATH=DEPS python tests/upstream_diff/toolhop_open_runs.py UPSTREAM/code/evaluation_open.py \\
        [--runs 3] [--series qwen25|llama31] [--scored-only] [--scenarios Direct,Mandatory,Free]

``UPSTREAM`` is a clone of ``MananDesai54/llm-benchmarking`` (``evaluation_open.py`` is the same in
every commit). Upstream generates in process with a Hugging Face model; here its own functions run
(``main`` and everything it calls, taken from the file by name, in a process of their own with 8
workers), with one thing replaced: ``load_model`` gives a tokenizer whose chat template is the
JSON of the messages and tools, and a model whose ``generate`` asks this script's endpoint for the
raw completion of that conversation. The harness runs ``pytest suites/toolhop --decoding open
--base-url`` against the same endpoint, which answers its chat completion with the same raw text
as content. The text is a function of the conversation and tools alone (call ids aside: upstream
draws them from the clock), a seeded choice among what a completion of the ``--series`` may hold:
the next hop's gold call or a bent one (Qwen2.5: several ``<tool_call>`` blocks; Llama 3.1: one
call object or a list, after ``<|python_tag|>`` or bare), with prose before the calls, cut short,
arguments as a JSON string or missing, the answer, a wrong one, one with thousands commas, the
last tool result, empty text; some conversations never stop calling tools, and a Direct reply
may call a tool it was never given.

Both sides parse the same text with upstream's ``parse_qwen25`` / ``parse_llama31`` (the harness
with its equivalent, chosen by the model family it runs), feed the calls to the tools and decide when to stop, so where they agree they send the same
conversations and end the same. Compared, call ids aside:

* the requests: the messages and tools of each generation upstream ran must be a request the
  harness sent, and the other way round; each harness request is checked for the open protocol's
  body (``tool_choice: "none"``, ``max_tokens: 1024``, temperature 0);
* per sample and scenario: the conversation, ``answer_correct`` (absent upstream where the harness
  says ``answer_status: no_answer``), upstream's ``turn``, and whether upstream wrote the sample;
* upstream's printed ``Result`` (/995), when it prints one: the open script's tally raises
  ``KeyError`` on a sample it wrote without a score (ToolHop ledger row 11), which is then counted
  as "tally raised" (no Result to compare) and the per-sample scores are still compared.

Upstream's tools run in its own process, unconfined, as upstream runs them (only data you trust:
the real records are benign); the harness's in its sandbox. Both hash strings with seed 0 (ledger
row 24). Not covered: the prompt a real chat template renders from these messages (ledger rows
1-2: vLLM renders it, and echoes earlier calls' arguments as objects) and the generation itself
(row 3).
"""

from __future__ import annotations

import argparse
import collections
import functools
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_endpoint import ScriptedEndpoint, completion, request_differences  # noqa: E402
from toolhop_closed_runs import (MAX_TURNS, NoHarnessRun, ScriptedModel, compare, run_arguments,  # noqa: E402
                                 run_seeds, scenario_runs)
from upstream_source import upstream_functions  # noqa: E402

from pytest_toolbench.benchmarks.toolhop.gold_chain import GoldCall  # noqa: E402
from pytest_toolbench.benchmarks.toolhop.schema import ToolHopRecord, load_toolhop_file  # noqa: E402

#: the model name the harness runs for each upstream series: the family picks its parser
#: ("scripted" is no known family, read with parse_qwen25)
SERIES_MODEL = {"qwen25": "scripted", "llama31": "llama-3.1-scripted"}
#: what the open protocol's request must say (evaluation_open.py: greedy, 1024 new tokens, the
#: tools rendered but the text returned raw)
OPEN_BODY = {"tool_choice": "none", "max_tokens": 1024, "temperature": 0.0}


def without_ids(messages: Any) -> Any:
    """A JSON copy of ``messages`` with every call id and ``tool_call_id`` ``"ID"``."""
    copy = json.loads(json.dumps(messages))
    for message in copy or []:
        for call in message.get("tool_calls") or []:
            call["id"] = "ID"
        if "tool_call_id" in message:
            message["tool_call_id"] = "ID"
    return copy


def model_view(body: dict[str, Any]) -> str:
    """What the model is given: the messages (call ids aside) and the tools, as one JSON text."""
    return json.dumps({"messages": without_ids(body.get("messages")), "tools": body.get("tools")},
                      sort_keys=True, ensure_ascii=False)


class ScriptedGenerator(ScriptedModel):
    """Raw completions in the format of ``series`` (Qwen2.5 or Llama 3.1), chosen by a generator
    seeded with the run's seed and the conversation (call ids aside). ``scored_only``: every
    conversation ends in a reply with text (no endless calls, no empty or unreadable final text),
    so upstream's tally prints a Result."""

    def __init__(self, records: list[ToolHopRecord], seed: int, series: str = "qwen25",
                 scored_only: bool = False):
        super().__init__(records, seed)
        self.series, self.scored_only = series, scored_only

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        view = model_view(body)
        rng, record, messages, stubborn = self.conversation(body, view)
        text = self.text(rng, record, messages, body.get("tools"), stubborn and not self.scored_only)
        return completion({"role": "assistant", "content": text}, hashlib.sha256(view.encode()).hexdigest(),
                          SERIES_MODEL[self.series])

    def text(self, rng: random.Random, record: ToolHopRecord, messages: list[dict[str, Any]],
             tools: list[dict[str, Any]] | None, stubborn: bool) -> str:
        done = sum(m.get("role") == "tool" for m in messages)
        chain = self.chain(record)
        calls_left = MAX_TURNS - 1 - sum(m.get("role") == "assistant" for m in messages[1:])
        if not tools and rng.random() < 0.1:  # Direct: a call to a tool it was never given
            tools = [{"type": "function", "function": doc} for doc in record.tools.values()]
            stubborn = True
        if tools and (stubborn or (done < len(chain) + 2 and rng.random() < 0.7)) \
                and (calls_left > 0 or not self.scored_only):
            calls = [self.payload(rng, record, chain, done + i, tools)
                     for i in range(rng.choice([1, 1, 1, 1, 2, 3]))]
            prose = rng.choice(["", "", "", "Let me call the tool.\n", "<answer>maybe</answer>\n"])
            if self.scored_only and not prose:  # calls that all fail to parse leave no text
                prose = "Calling it.\n"
            text = prose + (self.qwen_calls(rng, calls) if self.series == "qwen25"
                            else self.llama_calls(rng, calls, tagged=self.scored_only))
            if rng.random() < 0.03 and not self.scored_only:
                text = text[: rng.randint(len(prose), len(text))]  # cut short
            return text
        answer = self.answer(rng, record, messages)["content"]
        while self.scored_only and not (answer or "").strip():
            answer = self.answer(rng, record, messages)["content"]
        return "" if answer is None else answer

    def payload(self, rng: random.Random, record: ToolHopRecord, chain: list[GoldCall], hop: int,
                tools: list[dict[str, Any]]) -> dict[str, Any]:
        """One call object: the hop's gold call or a bent one, its arguments an object or a JSON
        string, sometimes missing (upstream skips such a call). Under ``arguments`` (Qwen2.5) or
        ``parameters`` (Llama 3.1)."""
        call = self.call(rng, record, chain, hop, tools)
        try:
            arguments: Any = json.loads(call["arguments"])
        except json.JSONDecodeError:
            arguments = call["arguments"]  # not JSON: json_repair reads what it can
        if rng.random() < 0.2:
            arguments = json.dumps(arguments, ensure_ascii=False)
        key = "arguments" if self.series == "qwen25" else "parameters"
        payload: dict[str, Any] = {"name": call["name"], key: arguments}
        if rng.random() < 0.03 and not self.scored_only:
            del payload[key]  # upstream skips the call; alone, the reply has no text
        return payload

    @staticmethod
    def qwen_calls(rng: random.Random, calls: list[dict[str, Any]]) -> str:
        """Each call in its ``<tool_call>`` block."""
        return "\n".join(f"<tool_call>\n{json.dumps(c, ensure_ascii=rng.random() < 0.5)}\n</tool_call>"
                         for c in calls)

    @staticmethod
    def llama_calls(rng: random.Random, calls: list[dict[str, Any]], tagged: bool) -> str:
        """After ``<|python_tag|>`` or bare (not when ``tagged``: a bare call read from the whole
        text leaves the message without content), one object or a list (upstream keeps the first
        call it can read)."""
        body = json.dumps(calls if len(calls) > 1 or rng.random() < 0.1 else calls[0],
                          ensure_ascii=rng.random() < 0.5)
        tags = ["<|python_tag|>", " <|python_tag|> "] if tagged else ["<|python_tag|>", "<|python_tag|>", "",
                                                                     " <|python_tag|> "]
        return rng.choice(tags) + body


# --------------------------------------------------------------------------- upstream's side
class _Inputs(dict):
    """``tokenizer(texts, return_tensors="pt")``: the prompt travels to ``generate`` whole."""

    input_ids: list[list[str]] = [[]]

    def to(self, device: str) -> _Inputs:
        return self


class _Tokenizer:
    pad_token_id = eos_token_id = 0

    def apply_chat_template(self, messages: Any, tools: Any = None, **kwargs: Any) -> str:
        return json.dumps({"messages": messages, "tools": tools}, ensure_ascii=False)

    def __call__(self, texts: str, **kwargs: Any) -> _Inputs:
        return _Inputs(prompt=texts)

    def batch_decode(self, ids: list[list[str]], skip_special_tokens: bool = True) -> list[str]:
        return ["".join(row) for row in ids]


class _Model:
    """``generate`` asks the endpoint for the completion of the prompt's conversation."""

    def __init__(self, url: str):
        self.url = url

    def generate(self, prompt: str, **params: Any) -> list[list[str]]:
        request = urllib.request.Request(
            self.url, data=prompt.encode(), method="POST",
            headers={"Content-Type": "application/json", "Authorization": "Bearer upstream"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            return [[json.load(reply)["choices"][0]["message"]["content"]]]


def upstream_side(argv: list[str]) -> None:
    """Upstream's ``main`` with its own functions, ``load_model`` replaced (in this process)."""
    import datetime
    from concurrent.futures import ThreadPoolExecutor, as_completed
    from hashlib import sha256

    import json_repair
    from func_timeout import func_set_timeout
    from tqdm import tqdm

    source, url, *upstream_argv = argv
    names = {"test_open", "get_feedback", "sample_process_direct", "sample_process_mandatory",
             "sample_process_free", "sample_process", "parse_qwen25", "parse_llama31", "get_params",
             "get_parse_output", "parse_arguments", "main"}
    namespace: dict[str, Any] = {
        "argparse": argparse, "json": json, "os": os, "sha256": sha256, "datetime": datetime,
        "tqdm": tqdm, "func_set_timeout": func_set_timeout, "ThreadPoolExecutor": ThreadPoolExecutor,
        "as_completed": as_completed, "json_repair": json_repair,
        "load_model": lambda args: (_Model(url), _Tokenizer()),
        "__name__": "__main__"}  # as upstream runs it: a tool's error names "__main__.f()"
    upstream_functions(Path(source), names, namespace)
    sys.argv = ["evaluation_open.py", *upstream_argv]
    namespace["main"]()


def run_upstream(script: Path, data: Path, scenario: str, url: str, out: Path, *,
                 series: str = "qwen25") -> tuple[str | None, str | None]:
    """Upstream's side in its own process; (why it did not finish or None, its printed Result or
    None where its tally raised)."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--upstream-side", str(script.resolve()), url,
         "--scenario", scenario, "--series", series, "--model_path", SERIES_MODEL[series], "--input_file",
         str(data.resolve()), "--output_file", str(out), "--max_workers", "8", "--device", "cpu"],
        cwd=out.parent, env=env, capture_output=True, text=True, timeout=3600)
    result = re.search(r"^Result: (.*)$", proc.stdout, flags=re.M)
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        if not out.exists() or "KeyError: 'answer_correct'" not in proc.stderr:
            return f"upstream exited {proc.returncode}: {last}", ""
        return None, None  # ledger row 11: its tally raised on a sample written without a score
    return None, result.group(1) if result else ""


def harness_body_differences(scenario: str, bodies: list[str]) -> list[str]:
    found = []
    for text in bodies:
        body = json.loads(text)
        # without tools (Direct) there is nothing to keep the server from parsing
        wanted = OPEN_BODY if body.get("tools") else {k: v for k, v in OPEN_BODY.items() if k != "tool_choice"}
        wrong = {k: body.get(k) for k, v in wanted.items() if body.get(k) != v}
        if scenario != "Direct" and not body.get("tools"):
            wrong["tools"] = body.get("tools")
        if wrong:
            found.append(f"{scenario}: a harness request says {wrong}, the open protocol {OPEN_BODY}")
            break
    return found


def one_run(args: Any, seed: int, folder: Path) -> list[str]:
    model = ScriptedGenerator(load_toolhop_file(args.data), seed, args.series, args.scored_only)
    found: list[str] = []
    with ScriptedEndpoint(model.respond) as endpoint:
        try:
            for scenario, out, result, cases in scenario_runs(
                    args, seed, folder, endpoint, functools.partial(run_upstream, series=args.series),
                    args.evaluation_open, ["--decoding", "open", *args.harness_arg],
                    model=SERIES_MODEL[args.series]):
                harness = endpoint.requests["harness"]
                found += harness_body_differences(scenario, harness)
                found += request_differences(
                    scenario, [model_view(json.loads(b)) for b in endpoint.requests["upstream"]],
                    [model_view(json.loads(b)) for b in harness])
                OUTCOMES[f"{scenario} upstream's tally raised (row 11)" if result is None
                         else f"{scenario} upstream's Result compared"] += 1
                found += compare(scenario, out, cases, result, OUTCOMES,
                                 same=lambda a, b: without_ids(a) == without_ids(b))
        except NoHarnessRun as exc:
            return [str(exc)]
    return found


#: what the generated conversations reached, over every run (so a reader sees the cases covered)
OUTCOMES: collections.Counter[str] = collections.Counter()


def main() -> int:
    if sys.argv[1:2] == ["--upstream-side"]:
        upstream_side(sys.argv[2:])
        return 0
    parser = run_arguments(__doc__, "evaluation_open")
    parser.add_argument("--series", choices=sorted(SERIES_MODEL), default="qwen25",
                        help="upstream's --series: its parser and the completions' format (the "
                             "harness runs a model of that family)")
    parser.add_argument("--scored-only", action="store_true",
                        help="no conversation ends without a scored reply, so upstream's tally "
                             "prints its Result (/995) to compare")
    return run_seeds(parser.parse_args(), one_run, "evaluation_open.py", OUTCOMES)

if __name__ == "__main__":
    sys.exit(main())
