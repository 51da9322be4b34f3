#!/usr/bin/env python3
"""Whole ToolHop runs, upstream's ``evaluation_closed.py`` and the harness, against one scripted model.

    pip install --target DEPS func_timeout   # upstream's dependency
    PYTHONPATH=DEPS python tests/upstream_diff/toolhop_closed_runs.py UPSTREAM/code/evaluation_closed.py \\
        [--runs 3] [--scenarios Direct,Mandatory,Free] [--data ../shared/datasets/toolhop/ToolHop.sample80.json]

``UPSTREAM`` is a clone of ``MananDesai54/llm-benchmarking`` at ``61da069``. This script serves an
OpenAI-compatible chat endpoint on 127.0.0.1 whose reply is a function of the request's
conversation and tools alone (a seeded choice among the ways models answer: the next hop's gold
call, a bent call, several calls at once, a call to a tool that is not there, arguments that are
not JSON, the answer, a wrong one, one with thousands commas, the tool's last result, empty or
``None`` content, extra message keys such as ``refusal``; some conversations never stop calling
tools). Upstream's script runs unchanged against it (its own process, ``main()``, 8 workers), then
``pytest suites/toolhop --base-url`` does. Identical requests get identical replies, so where the two
send the same conversations they end the same, and every difference shows:

* the requests: each one upstream sent, as JSON (messages, tools, model, temperature,
  max_tokens), must be one the harness sent, and the other way round;
* per sample and scenario: the conversation (upstream's ``messages``, the harness's transcript),
  ``answer_correct`` (absent upstream where the harness says ``answer_status: no_answer``),
  upstream's ``turn``, and whether upstream wrote the sample at all;
* upstream's printed ``Result`` (``round(100 * sum / 995, 2)``, ledger row 11) against the same
  figure from the harness's cases.

With ``--flaky P`` the endpoint answers a share P of the requests with an error the first time each
side sends them (``--failure json``: a 500 with an API error body; ``html``: a proxy's 502 page),
and the harness runs with ``--upstream-lost-turns``: the turns each side loses must be the same, and a
sample upstream drops (its last turn lost) must be one the harness scores as no answer. With
``html`` they differ, as the ToolHop ledger's row 10 says: upstream retries a body that is not JSON.

Upstream's tools run in its own process, unconfined, as upstream runs them (only data you trust:
the real records are benign); the harness's in its sandbox. Both hash strings with seed 0 (ledger
row 24). A tool call past upstream's 10 s limit stops upstream's run (ledger row 12): such a run
is reported as not compared, not as a difference.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import operator
import os
import random
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_endpoint import ScriptedEndpoint, completion, request_differences, request_key  # noqa: E402
from toolhop_tool_feedback import DEFAULT_DATA  # noqa: E402
from upstream_source import check_runs, diff_arguments  # noqa: E402

from pytest_toolbench.benchmarks.toolhop.gold_chain import GoldCall, gold_chain  # noqa: E402
from pytest_toolbench.benchmarks.toolhop.schema import ToolHopRecord, load_toolhop_file  # noqa: E402
from pytest_toolbench.benchmarks.toolhop.scoring import upstream_answer_correct  # noqa: E402
from pytest_toolbench.results.case_store import read_cases  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODEL = "scripted"
#: upstream's --max_turns default, which the harness's --toolhop-max-turns keeps
MAX_TURNS = 9
#: upstream's scenario names and the harness's
SCENARIOS = {"Direct": "direct", "Mandatory": "mandatory", "Free": "free"}
#: extra keys real endpoints put on the assistant message, which both sides must carry back as
#: they came (the ToolHop README: "exactly as the endpoint returned it")
EXTRA_KEYS: list[dict[str, Any]] = [{"refusal": None}, {"refusal": None, "annotations": []},
                                    {"reasoning_content": "Let me think."}, {"function_call": None}]


class ScriptedModel:
    """Replies chosen by a generator seeded with the run's seed and the request's key."""

    def __init__(self, records: list[ToolHopRecord], seed: int, flaky: float = 0.0, failure: str = "json"):
        self.records = {r.question: r for r in records}
        self.chains: dict[int, list[GoldCall]] = {}
        self.seed = seed
        self.flaky, self.failure = flaky, failure
        self.failed: set[tuple[str, str]] = set()  # (side, request key) answered with an error once
        self.lock = threading.Lock()

    def chain(self, record: ToolHopRecord) -> list[GoldCall]:
        with self.lock:
            if record.id not in self.chains:
                self.chains[record.id] = gold_chain(record)
            return self.chains[record.id]

    def failure_for(self, side: str, body: dict[str, Any]) -> tuple[int, str, bytes] | None:
        """With ``--flaky P``: an error reply (status, content type, body) the first time a side
        sends a request, for a share P of the requests, the same ones for both sides."""
        key = request_key(body)
        if random.Random(f"{self.seed}:fail:{key}").random() >= self.flaky:
            return None
        with self.lock:
            if (side, key) in self.failed:
                return None
            self.failed.add((side, key))
        kind = self.failure if self.failure != "both" else random.Random(f"{self.seed}:kind:{key}").choice(["json", "html"])
        if kind == "json":  # an API error: upstream's ['choices'] fails on it, the turn is lost
            return 500, "application/json", b'{"error": {"message": "scripted failure", "type": "server_error"}}'
        return 502, "text/html", b"<html><body>502 Bad Gateway</body></html>"  # a proxy's page

    def conversation(self, body: dict[str, Any], key: str) -> tuple[random.Random, ToolHopRecord, list[dict[str, Any]], bool]:
        """The reply's generator (seeded by ``key``), the record asked about, the messages, and
        whether this conversation is one of the one in ten that call tools until the turns run out."""
        messages = body["messages"]
        question = messages[0]["content"].rsplit("\nQuestion: ", 1)[-1]
        stubborn = random.Random(f"{self.seed}:{messages[0]['content']}").random() < 0.1
        return random.Random(f"{self.seed}:{key}"), self.records[question], messages, stubborn

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        key = request_key(body)
        rng, record, messages, stubborn = self.conversation(body, key)
        message = self.message(rng, record, messages, body.get("tools"), stubborn)
        if rng.random() < 0.3:
            message.update(rng.choice(EXTRA_KEYS))
        return completion(message, key, MODEL)

    def message(self, rng: random.Random, record: ToolHopRecord, messages: list[dict[str, Any]],
                tools: list[dict[str, Any]] | None, stubborn: bool) -> dict[str, Any]:
        done = sum(m.get("role") == "tool" for m in messages)
        chain = self.chain(record)
        if tools and (stubborn or (done < len(chain) + 2 and rng.random() < 0.7)):
            calls = [self.call(rng, record, chain, done + i, tools) for i in range(rng.choice([1, 1, 1, 1, 2, 3]))]
            message: dict[str, Any] = {"role": "assistant", "content": None}
            if rng.random() < 0.15:
                message["content"] = rng.choice(["Let me call the tool.", "", "<answer>maybe</answer>"])
            message["tool_calls"] = [{"id": f"call_{hashlib.sha256(f'{rng.random()}'.encode()).hexdigest()[:24]}",
                                      "type": "function", "function": call} for call in calls]
            if message["content"] is None and rng.random() < 0.1:
                del message["content"]  # some servers leave it out beside calls
            return message
        return self.answer(rng, record, messages)

    def call(self, rng: random.Random, record: ToolHopRecord, chain: list[GoldCall], hop: int,
             tools: list[dict[str, Any]]) -> dict[str, str]:
        """The hop's gold call, or a bent one."""
        if hop < len(chain) and rng.random() < 0.7:
            name, arguments = chain[hop].name, dict(chain[hop].arguments)
        else:
            function = rng.choice(tools)["function"]
            name = function["name"]
            properties = (function.get("parameters") or {}).get("properties") or {}
            arguments = {p: rng.choice(["Paris", "1994", 3, 2.5, True, None, [1, 2]]) for p in properties}
        roll = rng.random()
        if roll < 0.05 and arguments:
            arguments.pop(rng.choice(sorted(arguments)))  # a required parameter missing
        elif roll < 0.1:
            arguments["extra"] = "x"  # a parameter the tool does not have
        elif roll < 0.13:
            name = rng.choice(["search", "calculator", name.upper(), ""])  # not in the toolset
        text = json.dumps(arguments, ensure_ascii=rng.random() < 0.5)
        roll = rng.random()
        if roll < 0.03:
            text = text[:-1]  # not JSON
        elif roll < 0.05:
            text = json.dumps(rng.choice([[1], "text", 3, None]))  # JSON, not an object
        return {"name": name, "arguments": text}

    def answer(self, rng: random.Random, record: ToolHopRecord, messages: list[dict[str, Any]]) -> dict[str, Any]:
        gold = record.answer
        last_tool = next((m["content"] for m in reversed(messages) if m.get("role") == "tool"), None)
        choices = [f"<answer>{gold}</answer>", f"<answer>{gold.upper()}</answer>", f"The answer is {gold}.",
                   "<answer>unknown</answer>", f"<answer>{gold}1</answer>", f"<answer>{gold[:-1]}</answer>",
                   "", None, f"<answer>{last_tool}</answer>" if last_tool else "<answer>none</answer>",
                   "<answer>See the tool's result.</answer>", "Done."]  # the tool-result fallback's cases
        if re.fullmatch(r"\d{4,}", gold):
            choices.append(f"<answer>{int(gold):,}</answer>")  # commas only the prediction loses
        content = rng.choice(choices)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if rng.random() < 0.1:
            message["tool_calls"] = []  # a reply without calls, said as an empty list
        return message


def run_upstream(script: Path, data: Path, scenario: str, url: str, out: Path) -> tuple[str | None, str]:
    """Upstream's script as its README runs it; (why it did not finish or None, its printed Result)."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        [sys.executable, str(script.resolve()), "--scenario", scenario, "--model", MODEL, "--base_url", url,
         "--api_key", "upstream", "--input_file", str(data.resolve()), "--output_file", str(out),
         "--max_workers", "8"], cwd=out.parent, env=env, capture_output=True, text=True, timeout=3600)
    result = re.search(r"^Result: (.*)$", proc.stdout, flags=re.M)
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return f"upstream exited {proc.returncode}: {last}", ""
    return None, result.group(1) if result else ""


def run_harness(data_dir: Path, scenario: str, url: str, folder: Path, extra: list[str],
                model: str = MODEL) -> tuple[list[Any], str]:
    runs = folder / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly", "-n=0", "--concurrency", "8",
         "--data-dir", str(data_dir), "--model", model, "--base-url", url, "--api-key", "harness", "--no-cache",
         "--scenario", scenario, "--runs-dir", str(runs), "--no-progress", *extra],
        cwd=REPO, capture_output=True, text=True, timeout=3600)
    found = sorted(runs.iterdir()) if runs.exists() else []
    if not found:
        return [], f"the suite wrote no run folder: {proc.stdout[-800:]}{proc.stderr[-800:]}"
    return read_cases(found[-1]), ""


class NoHarnessRun(Exception):
    """The suite's run wrote no run folder: nothing of the harness's to compare."""


def scenario_runs(args: Any, seed: int, folder: Path, endpoint: ScriptedEndpoint,
                  upstream: Callable[[Path, Path, str, str, Path], tuple[str | None, str | None]], script: Path,
                  extra: list[str], before_harness: Callable[[], None] = lambda: None,
                  model: str = MODEL) -> Iterator[tuple[str, Path, str | None, list[Any]]]:
    """For each of ``args.scenarios``: upstream's side (``upstream(script, data, scenario, url,
    out)``), then the suite's run of ``model`` with ``extra``, both against ``endpoint`` (its request log
    cleared first); yields (scenario, upstream's output file, its Result, the harness's cases).
    A scenario upstream did not finish is said and skipped; a suite run that wrote nothing raises
    :class:`NoHarnessRun`."""
    data_dir = folder / "data"
    (data_dir / "toolhop").mkdir(parents=True)
    (data_dir / "toolhop" / "ToolHop.json").symlink_to(args.data.resolve())
    for scenario in args.scenarios.split(","):
        endpoint.requests.clear()
        out = folder / f"upstream-{scenario}.jsonl"
        stopped, result = upstream(script, args.data, scenario, f"{endpoint.base_url}/chat/completions", out)
        if stopped:
            print(f"seed {seed} {scenario}: not compared, {stopped}")
            continue
        before_harness()
        cases, failed = run_harness(data_dir, SCENARIOS[scenario], endpoint.base_url, folder / scenario, extra,
                                    model)
        if failed:
            raise NoHarnessRun(failed)
        yield scenario, out, result, cases


def one_run(args: Any, seed: int, folder: Path) -> list[str]:
    model = ScriptedModel(load_toolhop_file(args.data), seed, args.flaky, args.failure)
    # Upstream loses a turn to an error reply (ToolHop ledger row 10): so must the harness.
    extra = (["--upstream-lost-turns"] if args.flaky else []) + args.harness_arg
    found: list[str] = []
    with ScriptedEndpoint(model.respond, model.failure_for) as endpoint:
        try:
            for scenario, out, result, cases in scenario_runs(
                    args, seed, folder, endpoint, run_upstream, args.evaluation_closed, extra,
                    before_harness=model.failed.clear):
                found += request_differences(scenario, endpoint.requests["upstream"], endpoint.requests["harness"])
                found += compare(scenario, out, cases, result, OUTCOMES)
        except NoHarnessRun as exc:
            return [str(exc)]
    return found


#: what the generated conversations reached, over every run (so a reader sees the cases covered)
OUTCOMES: collections.Counter[str] = collections.Counter()


def compare(scenario: str, out: Path, cases: list[Any], result: str | None, outcomes: collections.Counter[str], *,
            same: Callable[[Any, Any], bool] = operator.eq) -> list[str]:
    """Each sample's conversation (``same``: alike), score, turn and presence, and the /995
    Result (None: upstream's tally raised before it printed one, so there is none to compare)."""
    found: list[str] = []
    upstream = {s["id"]: s for s in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    harness = {c.case_id.split("-")[1]: c for c in cases}
    if len(harness) != len(cases):
        found.append(f"{scenario}: case ids repeat")
    total = 0
    for key, case in sorted(harness.items(), key=lambda kv: int(kv[0])):
        sample = upstream.get(int(key))
        ours_correct = None if case.details.get("answer_status") == "no_answer" else case.values.get("answer_correct")
        total += int(case.values.get("answer_correct") or 0)
        outcomes[f"{scenario} {case.details.get('answer_status')} correct={ours_correct}"] += 1
        count_reached(scenario, case.transcript, str(case.details.get("gold")), outcomes)
        lost = case.details.get("lost_turns") or []
        if lost:
            outcomes[f"{scenario} cases with lost turns"] += 1
        # Upstream writes no sample whose last turn was lost (its loop ends without returning);
        # the harness scores it as no answer, which the /995 tally counts alike.
        replies = sum(m.get("role") == "assistant" for m in case.transcript)
        last_lost = bool(lost) and lost[-1].get("turn") == replies and \
            replies + len(lost) == (1 if scenario == "Direct" else MAX_TURNS)
        if last_lost:
            outcomes[f"{scenario} last turn lost"] += 1
        dropped = sample is None
        if dropped or last_lost:
            if not (dropped and last_lost and ours_correct is None):
                found.append(f"{scenario} {key}: upstream wrote {'a' if sample else 'no'} sample; the harness: "
                             f"{case.outcome} {ours_correct}, lost turns {lost}")
            continue
        if not same(sample["messages"], case.transcript):
            at = next((i for i, (a, b) in enumerate(zip(sample["messages"], case.transcript)) if a != b),
                      min(len(sample["messages"]), len(case.transcript)))
            found.append(f"{scenario} {key}: conversations differ at message {at}: upstream "
                         f"{json.dumps(sample['messages'][at:at + 1])[:400]} harness "
                         f"{json.dumps(case.transcript[at:at + 1])[:400]}")
        if sample.get("answer_correct") != (None if ours_correct is None else int(ours_correct)):
            found.append(f"{scenario} {key}: answer_correct upstream {sample.get('answer_correct')} harness {ours_correct}")
        if scenario != "Direct" and sample.get("turn") != case.details.get("turn"):
            found.append(f"{scenario} {key}: turn upstream {sample.get('turn')} harness {case.details.get('turn')}")
    for key in sorted(set(upstream) - {int(k) for k in harness}):
        found.append(f"{scenario} {key}: the harness has no case for upstream's sample")
    ours_result = f"{round(100 * total / 995, 2)}"
    if result is not None and result != ours_result:
        found.append(f"{scenario}: upstream's Result {result}, the harness's cases give {ours_result}")
    outcomes[f"{scenario} cases"] += len(cases)
    return found


def count_reached(scenario: str, transcript: list[dict[str, Any]], gold: str,
                  outcomes: collections.Counter[str]) -> None:
    """What a conversation went through, so the counts show the generator reached each rule."""
    last = transcript[-1]
    if last.get("role") == "tool":
        outcomes[f"{scenario} turns ran out"] += 1
    elif len(transcript) > 1 and transcript[-2].get("role") == "tool":
        outcomes[f"{scenario} answer after a tool result"] += 1
        # right with the messages[-2] tool result, wrong on the final message alone
        if upstream_answer_correct(transcript, gold) and not upstream_answer_correct([last], gold):
            outcomes[f"{scenario} correct by the tool-result fallback"] += 1
    for message in transcript:
        calls = message.get("tool_calls")
        if calls is not None and len(calls) > 1:
            outcomes[f"{scenario} messages with several calls"] += 1
        if calls == []:
            outcomes[f"{scenario} tool_calls == []"] += 1
        if message.get("role") == "assistant" and "content" not in message:
            outcomes[f"{scenario} messages without content"] += 1
        if message.get("role") == "assistant" and set(message) - {"role", "content", "tool_calls"}:
            outcomes[f"{scenario} messages with extra keys"] += 1
        if message.get("role") == "tool" and str(message.get("content")).startswith("an error occured"):
            outcomes[f"{scenario} tool error messages"] += 1


def run_arguments(doc: str, script: str) -> argparse.ArgumentParser:
    """The options of a whole-run differential against upstream's ``code/<script>.py``."""
    parser = diff_arguments(doc, (script, f"upstream's code/{script}.py"), ("--runs", 3))
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--scenarios", default="Direct,Mandatory,Free")
    parser.add_argument("--harness-arg", action="append", default=[], metavar="ARG",
                        help="one more option for the suite's pytest run (repeatable), e.g. -n=2, "
                             "--sdk-process=inline, --http-transport=httpx: none may change a request")
    return parser


def run_seeds(args: Any, one: Callable[[Any, int, Path], list[str]], against: str,
              outcomes: collections.Counter[str]) -> int:
    """``args.runs`` runs of ``one`` from ``args.seed`` on, then what they reached; the exit status."""
    seeds = iter(range(args.seed, args.seed + args.runs))
    differing = check_runs(args.runs, args.show, lambda folder: one(args, next(seeds), folder), against)
    for what, count in sorted(outcomes.items()):
        print(f"{what:40} {count}")
    return 1 if differing else 0


def main() -> int:
    parser = run_arguments(__doc__, "evaluation_closed")
    parser.add_argument("--flaky", type=float, default=0.0,
                        help="answer this share of requests with an error the first time (then "
                             "the harness runs with --upstream-lost-turns)")
    parser.add_argument("--failure", choices=["json", "html", "both"], default="json",
                        help="the error: a 500 with a JSON body, a 502 with an HTML page, or either")
    return run_seeds(parser.parse_args(), one_run, "evaluation_closed.py", OUTCOMES)


if __name__ == "__main__":
    sys.exit(main())
