"""A tool-using benchmark from outside the package: arithmetic questions answered with tools.

What it shows (pytest_toolbench/benchmarks/README.md): its tools run in the harness's sandbox
from its own module (``sandbox_modules = ("toolbox_tools",)``; the runner calls
``env.sandbox.arun("toolbox_tools:call", ...)``, a ``SandboxRunner``), and under
``--decoding open`` its replies are read by its own parser (``open_parser``), whose format is
not ToolHop's: ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}]`` (Mistral's). Its calls carry
``CallContext(benchmark="toolbox")``, so a run with ToolHop reads each benchmark's replies with
its own parser. Call ids start with ``tbx_``: a transcript shows which parser made them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from pytest_toolbench.benchmarks.base import BenchmarkEnv, Case
from pytest_toolbench.benchmarks.result_builders import CallTally, base_fields, error_result, scored_result
from pytest_toolbench.models.base import CallContext, ChatModel, ChatRequest, ModelCallError, Sampling, content_text
from pytest_toolbench.results.metrics import MetricSpec

if TYPE_CHECKING:
    from pytest_toolbench.sandbox.interface import SandboxRunner

DATA_DIR = Path(__file__).parent / "data"
BENCHMARK = "toolbox"
#: The sandbox job that runs one tool call (a function of this benchmark's declared module).
TOOL_JOB = "toolbox_tools:call"
TOOL_CALLS = "[TOOL_CALLS]"

TOOLS = [
    {"type": "function", "function": {
        "name": name, "description": f"{name} two numbers",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                       "required": ["a", "b"]}}}
    for name in ("add", "multiply")
]


class ToolboxOptions(BaseModel):
    #: Becomes --toolbox-max-turns.
    max_turns: int = Field(4, description="model turns per question")


class ToolboxOpenParser:
    """This benchmark's ``OpenReplyParser``: one series, no stop ids of its own."""

    def series_for(self, family: str) -> str | None:
        return "toolbox-json"

    def stop_token_ids(self, family: str, series: str) -> tuple[int, ...] | None:
        return None

    def parse(self, series: str, text: str, call_seed: str) -> dict[str, Any]:
        """``text`` up to ``[TOOL_CALLS]`` is the content; after it, a JSON list of calls. A list
        that does not parse leaves the whole text as content, with no calls."""
        head, tag, tail = text.partition(TOOL_CALLS)
        if not tag:
            return {"role": "assistant", "content": text.strip(), "tool_calls": None}
        try:
            calls = json.loads(tail)
            calls = calls if isinstance(calls, list) else [calls]
            tool_calls = [
                {"id": "tbx_" + hashlib.sha256(f"{call_seed}|{i}".encode()).hexdigest()[:12], "type": "function",
                 "function": {"name": str(c["name"]), "arguments": json.dumps(c.get("arguments", {}))}}
                for i, c in enumerate(calls)
            ]
        except (ValueError, TypeError, KeyError):
            return {"role": "assistant", "content": text.strip(), "tool_calls": None}
        return {"role": "assistant", "content": head.strip() or None, "tool_calls": tool_calls}


TOOLBOX_PARSER = ToolboxOpenParser()


def oracle_policy(record: dict[str, Any]):
    """``--model oracle``: the gold calls one per turn, then the answer."""

    def policy(request: ChatRequest) -> dict[str, Any]:
        done = sum(1 for m in request.messages if m["role"] == "tool")
        if done < len(record["calls"]):
            gold = record["calls"][done]
            call = {"id": f"tbx_oracle_{done}", "type": "function",
                    "function": {"name": gold["name"], "arguments": json.dumps(gold["arguments"])}}
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"role": "assistant", "content": record["answer"]}

    return policy


class ToolboxRunner:
    def __init__(self, sandbox: SandboxRunner, options: ToolboxOptions):
        self.sandbox = sandbox
        self.options = options
        self.sampling = Sampling(temperature=0.0, max_tokens=128)

    async def run(self, case: Case, model: ChatModel):
        record = case.sample
        messages: list[dict[str, Any]] = [{"role": "user", "content": record["question"]}]
        base = base_fields(case, model, BENCHMARK)
        tally = CallTally()
        tool_runs: list[dict[str, Any]] = []
        raw: list[str] = []
        reply = ""
        try:
            for turn in range(self.options.max_turns):
                request = ChatRequest(messages=list(messages), tools=TOOLS, sampling=self.sampling)
                ctx = CallContext(case_id=case.id, turn=turn, oracle=oracle_policy(record), benchmark=BENCHMARK)
                response = await model.complete(request, ctx)
                tally.add(response, turn=turn)
                raw.append(getattr(response, "raw_text", ""))
                message = {k: response.message.get(k) for k in ("role", "content", "tool_calls")}
                messages.append(message)
                if not message.get("tool_calls"):
                    reply = content_text(message.get("content")).strip()
                    break
                for call in message["tool_calls"]:
                    payload = {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}
                    outcome = await self.sandbox.arun(TOOL_JOB, payload, timeout_s=10.0)
                    if outcome.status == "unavailable":
                        raise ModelCallError("sandbox_failed", outcome.detail)
                    content = outcome.value["content"] if outcome.status == "ok" else f"error: {outcome.detail}"
                    tool_runs.append({"name": payload["name"], "status": outcome.status, "content": content,
                                      "where": (outcome.value or {}).get("where")})
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        except ModelCallError as exc:
            return error_result(base, exc, {"tool_runs": tool_runs}, messages, str(exc), tally)
        correct = reply == record["answer"]
        details = {"reply": reply, "tool_runs": tool_runs, "raw_outputs": raw}
        return scored_result(base, correct, {"correct": float(correct), "tool_calls": float(len(tool_runs))},
                             details, f"said {reply!r}", messages, tally)


class ToolboxBenchmark:
    name = BENCHMARK
    title = "Toolbox"
    options_model = ToolboxOptions
    scenarios: tuple[str, ...] = ("tools",)
    metrics: tuple[MetricSpec, ...] = (
        MetricSpec(name="accuracy", value="correct", description="final answers equal to the gold one"),
    )
    breakdown_labels: tuple[str, ...] = ()
    label_markers: dict[str, str] = {}
    #: --decoding open: tools in the template, raw text read by this benchmark's own parser.
    open_protocol = "parsed"
    open_parser = TOOLBOX_PARSER
    #: The module whose functions run as this benchmark's sandbox jobs.
    sandbox_modules: tuple[str, ...] = ("toolbox_tools",)

    def load_cases(self, data_dir: Path | None, scenarios: tuple[str, ...], options: Any = None) -> list[Case]:
        folder = Path(data_dir) / "toolbox" if data_dir and (Path(data_dir) / "toolbox").is_dir() else DATA_DIR / "toolbox"
        records = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
        return [Case(id=f"toolbox-{r['id']}-{scenario}", benchmark=self.name, scenario=scenario,
                     sample_id=r["id"], stored_sample=r)
                for scenario in scenarios for r in records]

    def make_runner(self, env: BenchmarkEnv) -> ToolboxRunner:
        return ToolboxRunner(env.sandbox, env.options(self))


TOOLBOX = ToolboxBenchmark()
