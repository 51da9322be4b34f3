"""The ToolHop turn loop (upstream ``code/evaluation_*.py``) with a scripted model and a fake sandbox; plus the benchmark."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_toolbench.benchmarks.base import Benchmark, Case, CaseRunner
from pytest_toolbench.benchmarks.dataset_errors import DatasetWarning
from pytest_toolbench.benchmarks.toolhop.benchmark import TOOLHOP
from pytest_toolbench.benchmarks.toolhop.decoding import toolhop_sampling
from pytest_toolbench.benchmarks.toolhop.options import ToolHopOptions
from pytest_toolbench.benchmarks.toolhop.prompts import MANDATORY_PROMPT, build_messages
from pytest_toolbench.benchmarks.toolhop.oracle import toolhop_oracle
from pytest_toolbench.benchmarks.toolhop.runner import EXECUTION_JOB, ToolHopRunner
from pytest_toolbench.benchmarks.toolhop.schema import load_toolhop_file, upstream_def_name
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import (
    CallContext,
    ChatRequest,
    ChatResponse,
    ModelCallError,
    ParseFailure,
    Sampling,
    Usage,
)
from pytest_toolbench.results.case_result import Outcome
from shared_data import BUNDLED_TOOLHOP as BUNDLED

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.filterwarnings(
    "ignore::pytest_toolbench.benchmarks.dataset_errors.DatasetWarning"
)


# --------------------------------------------------------------------------- fakes


@dataclass
class FakeOutcome:
    status: str
    value: Any = None
    detail: str = ""
    duration_s: float = 0.0


class FakeSandbox:
    """Executes the (trusted, bundled) tool sources in-process the way upstream does.

    Tracks concurrency so tests can prove calls run one at a time. ``force`` maps a tool name to
    a non-ok status ("timeout" / "crashed").
    """

    def __init__(self, force: dict[str, str] | None = None):
        self.payloads: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.force = force or {}

    async def arun(self, job: str, payload: dict, timeout_s: float) -> FakeOutcome:
        assert job == EXECUTION_JOB
        self.payloads.append({**payload, "timeout_s": timeout_s})
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.001)  # give a concurrent caller the chance to overlap
            name = payload["name"]
            if name in self.force:
                return FakeOutcome(status=self.force[name], detail=f"forced {self.force[name]}")
            return FakeOutcome(status="ok", value=self._call(payload))
        finally:
            self.in_flight -= 1

    @staticmethod
    def _call(payload: dict) -> dict:
        name = payload["name"]
        try:
            args = json.loads(payload["arguments"])
            namespace: dict = {}
            with contextlib.redirect_stdout(io.StringIO()):
                for src in payload["functions"]:
                    if upstream_def_name(src) == name:
                        exec(src, namespace)
                if name not in namespace:
                    raise NameError(f"name '{name}' is not defined")
                result = namespace[name](**args)
            content = json.dumps(result, ensure_ascii=False)
            return {"content": content, "raised": False, "exception_type": None}
        except Exception as e:  # noqa: BLE001 - upstream's except Exception
            return {
                "content": f"an error occured when call {name}: {e}",
                "raised": True,
                "exception_type": type(e).__name__,
            }


class ScriptedModel:
    """Replies from a script; each item is an assistant message dict, a ChatResponse or an error."""

    name = "scripted"

    def __init__(self, script: list[Any]):
        self.script = list(script)
        self.requests: list[ChatRequest] = []
        self.contexts: list[CallContext] = []

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        self.requests.append(request)
        self.contexts.append(ctx)
        item = self.script.pop(0) if self.script else {"role": "assistant", "content": "<answer>?</answer>"}
        if isinstance(item, Exception):
            raise item
        if isinstance(item, ChatResponse):
            return item
        return ChatResponse(message=item, usage=Usage(prompt_tokens=10, completion_tokens=2), latency_s=0.5)

    async def aclose(self) -> None:
        pass

    def describe(self) -> dict:
        return {"backend": "scripted"}


def tool_call(call_id: str, name: str, args: dict | str) -> dict:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def calls_msg(*calls: dict, content: str | None = None) -> dict:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def answer(text: str) -> dict:
    return {"role": "assistant", "content": text}


@pytest.fixture(scope="module")
def records():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        return {r.id: r for r in load_toolhop_file(BUNDLED)}


def case_for(record, scenario: str = "mandatory") -> Case:
    return TOOLHOP.make_case(record, scenario)


def run(runner: ToolHopRunner, case: Case, model: ScriptedModel):
    return asyncio.run(runner.run(case, model))


def make_runner(sandbox=None, **options) -> ToolHopRunner:
    return ToolHopRunner(sandbox or FakeSandbox(), ToolHopOptions(**options), Sampling(max_tokens=256))


# --------------------------------------------------------------------------- the loop


def test_perfect_agent_walks_the_chain(records):
    record = records[9004]  # 5 hops, gold "d"
    args = [
        {"title": "Don Quixote"},
        {"person": "Miguel de Cervantes"},
        {"country": "Spain"},
        {"input_string": "Madrid"},
        {"text": "dirdaM"},
    ]
    script = [calls_msg(tool_call(f"c{i}", name, a)) for i, (name, a) in enumerate(zip(record.tool_names, args))]
    script.append(answer("<answer>d</answer>"))
    model, sandbox = ScriptedModel(script), FakeSandbox()
    result = run(make_runner(sandbox), case_for(record), model)

    assert result.outcome is Outcome.PASSED
    assert result.values == {"answer_correct": 1.0, "query_error": 0.0, "error_calls": 0.0, "calls": 5.0}
    assert result.model_calls == 6 and result.details["turn"] == 5
    assert [c.turn for c in model.contexts] == [0, 1, 2, 3, 4, 5]
    assert all(c.case_id == "toolhop-9004-mandatory" for c in model.contexts)
    first = model.contexts[0].oracle(model.requests[0])  # the oracle: the first gold tool ...
    assert first["tool_calls"][0]["function"]["name"] == record.tool_names[0]
    assert model.contexts[-1].oracle(model.requests[-1]) == answer("<answer>d</answer>")  # ... the answer
    t = result.transcript
    assert t[0] == {"role": "user", "content": MANDATORY_PROMPT.replace("{question}", record.question)}
    assert [m["role"] for m in t] == ["user"] + ["assistant", "tool"] * 5 + ["assistant"]
    assert [m["content"] for m in t if m["role"] == "tool"] == [
        '"Miguel de Cervantes"', '"Spain"', '"Madrid"', '"dirdaM"', '"d"'
    ]
    assert t[2] == {"role": "tool", "content": '"Miguel de Cervantes"', "tool_call_id": "c0"}  # no name
    # each request is a snapshot of the conversation so far, tools in file order, no tool_choice
    assert [len(r.messages) for r in model.requests] == [1, 3, 5, 7, 9, 11]
    assert all(r.tool_choice is None for r in model.requests)
    assert [t["function"]["name"] for t in model.requests[0].tools] == record.tool_names
    assert model.requests[0].sampling == Sampling(max_tokens=256)
    # what the sandbox got
    assert sandbox.payloads[0] == {
        "functions": record.functions,
        "name": "book_author_identifier",
        "arguments": '{"title": "Don Quixote"}',
        "clean_namespace": False,
        "timeout_s": 10.0,
    }
    assert result.labels == {"hops": 5, "domain": "Literature", "answer_type": "letter"}
    assert result.usage == Usage(prompt_tokens=60, completion_tokens=12)
    assert result.latency_s == pytest.approx(3.0)
    assert result.details["prediction"] == "<answer>d</answer>"
    assert result.details["answer_status"] == "scored" and result.failure_message is None
    assert result.details["deviations"] == []


def test_turn_cap_is_nine_and_ends_on_tool_messages(records):
    record = records[9001]
    looping = calls_msg(tool_call("x", "letter_counter", {"text": "Steven"}))
    model = ScriptedModel([looping] * 20)
    result = run(make_runner(), case_for(record), model)
    assert result.model_calls == 9 and len(model.requests) == 9
    assert [c.turn for c in model.contexts] == list(range(9))
    assert result.details["turn"] == 8
    assert result.transcript[-1]["role"] == "tool"
    assert result.transcript[-1]["content"] == "6"  # the gold, yet no final answer -> not scored
    assert result.details["answer_status"] == "no_answer"
    assert result.values["answer_correct"] == 0.0
    assert result.outcome is Outcome.FAILED
    assert "no answer (ran out of turns" in result.failure_message


@pytest.mark.parametrize("scenario", ["mandatory", "direct"])
@pytest.mark.parametrize(
    "reply",
    [
        {"role": "assistant", "content": "", "tool_calls": None},
        {"role": "assistant", "content": None, "tool_calls": []},  # parse_qwen25's corner case
        {"role": "assistant"},  # no content key: upstream's scorer raises KeyError (ledger row 25)
    ],
)
def test_reply_without_content_or_calls_is_no_answer_as_upstream(records, reply, scenario):
    """Upstream: no calls end the loop; falsy content leaves answer_correct unset (/995: wrong)."""
    result = run(make_runner(), case_for(records[9001], scenario), ScriptedModel([reply]))
    assert result.model_calls == 1 and result.transcript[-1] == reply
    assert result.details["answer_status"] == "no_answer" and result.values["answer_correct"] == 0.0
    assert result.outcome is Outcome.FAILED and result.error is None
    message = result.failure_message
    assert "no answer (turn 0: the reply has neither content nor a tool call" in message
    assert "upstream ends the loop on it and sets no answer_correct" in message
    assert "counted wrong by its fixed /995 denominator" in message


def test_stopped_case_says_why_not_ran_out_of_turns(records):
    from pytest_toolbench.models.base import ContextLengthExceeded
    from pytest_toolbench.benchmarks.toolhop.open_parsers import OpenParseError

    first = calls_msg(tool_call("x", "letter_counter", {"text": "Steven"}))
    overflow = ContextLengthExceeded("maximum context length is 2048 tokens")
    result = run(make_runner(), case_for(records[9001]), ScriptedModel([first, overflow]))
    assert result.transcript[-1]["role"] == "tool"
    assert result.failure_message.split("model: ", 1)[1].startswith(
        "no answer (turn 1: context_length_exceeded")
    assert "ran out of turns" not in result.failure_message
    unparsable = OpenParseError("llama31", "[[", "RecursionError: too deep", "UnboundLocalError")
    result = run(make_runner(), case_for(records[9001]), ScriptedModel([unparsable]))
    assert result.details["stop_reason"].endswith("(upstream: UnboundLocalError)")
    assert "no answer (turn 0: unparsable_reply" in result.failure_message
    assert result.details["raw_outputs"] == [{"turn": 0, "text": "[["}]


def test_custom_max_turns_is_a_recorded_deviation(records):
    model = ScriptedModel([calls_msg(tool_call("x", "letter_counter", {"text": "a"}))] * 5)
    result = run(make_runner(max_turns=3), case_for(records[9001]), model)
    assert result.model_calls == 3
    assert {"kind": "max_turns", "value": 3} in result.details["deviations"]


def test_parallel_calls_run_sequentially_in_order(records):
    record = records[9005]
    batch = calls_msg(
        tool_call("a", "multiply_numbers", {"numbers": [6, 3]}),
        tool_call("b", "text_letter_count", {"text": ["Barcelona", "Kobe"]}),
        tool_call("c", "modulo_calculator", {"dividend": 18, "divisor": 9}),
    )
    model, sandbox = ScriptedModel([batch, answer("<answer>0</answer>")]), FakeSandbox()
    result = run(make_runner(sandbox), case_for(record), model)
    assert sandbox.max_in_flight == 1
    assert [p["name"] for p in sandbox.payloads] == ["multiply_numbers", "text_letter_count", "modulo_calculator"]
    tools = [m for m in result.transcript if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tools] == [("a", "18"), ("b", "[9, 4]"), ("c", "0")]
    assert result.values["calls"] == 3.0
    assert result.outcome is Outcome.PASSED


@pytest.mark.parametrize("reply", [answer("<answer>6</answer>"), {**answer("<answer>6</answer>"), "tool_calls": []}])
def test_stops_on_a_reply_without_tool_calls(records, reply):
    model = ScriptedModel([reply, answer("never asked")])
    result = run(make_runner(), case_for(records[9001]), model)
    assert result.model_calls == 1 and result.details["turn"] == 0
    assert result.transcript[-1] == reply  # appended as returned
    assert result.outcome is Outcome.PASSED
    assert result.values == {"answer_correct": 1.0, "query_error": 0.0, "error_calls": 0.0, "calls": 0.0}


def test_direct_is_one_call_without_tools(records):
    record = records[9002]
    model, sandbox = ScriptedModel([calls_msg(tool_call("z", "basic_arithmetic", {}))]), FakeSandbox()
    result = run(make_runner(sandbox), case_for(record, "direct"), model)
    assert len(model.requests) == 1 and model.requests[0].tools is None
    assert model.requests[0].messages == build_messages("direct", record.question)
    assert sandbox.payloads == []  # Direct never executes tools
    assert result.details["answer_status"] == "no_answer"  # content None
    assert result.values == {"answer_correct": 0.0}
    assert "invocation_errors" not in result.details


def test_free_has_invocation_details_but_no_metric_values(records):
    model = ScriptedModel([calls_msg(tool_call("a", "nope", {})), answer("<answer>260</answer>")])
    result = run(make_runner(), case_for(records[9002], "free"), model)
    assert set(result.values) == {"answer_correct"}
    assert result.details["invocation_errors"]["counts"]["tool_hallucination"] == 1


def test_model_call_error_ends_the_case_as_infrastructure_error(records):
    record = records[9001]
    script = [
        calls_msg(tool_call("a", "film_director_finder", {"film_title": "Jaws"})),
        calls_msg(tool_call("b", "extract_first_name", {"full_name": "Steven Spielberg"})),
        ModelCallError("http_500", "server exploded after 6 retries"),
    ]
    model = ScriptedModel(script)
    result = run(make_runner(), case_for(record), model)
    assert result.outcome is Outcome.ERROR and result.is_error
    assert result.error.kind == "http_500" and "exploded" in result.error.message
    assert result.values == {}  # excluded from every metric
    assert [m["role"] for m in result.transcript] == ["user", "assistant", "tool", "assistant", "tool"]
    assert result.model_calls == 2 and len(model.requests) == 3
    assert result.details["turn"] == 2
    assert result.details["deviations"][-1]["kind"] == "model_call_error"
    assert result.failure_message.startswith("model call failed at turn 2: http_500")


def test_parse_failures_are_recorded_with_their_turn(records):
    pf = ParseFailure(reason="unextracted_tool_call", raw_text="<tool_call>{bad", detail="json")
    script = [
        calls_msg(tool_call("a", "film_director_finder", {"film_title": "Jaws"})),
        ChatResponse(message=answer("<tool_call>{bad"), parse_failure=pf, cached=True,
                     usage=Usage(prompt_tokens=5, completion_tokens=5)),
    ]
    result = run(make_runner(), case_for(records[9001]), ScriptedModel(script))
    assert result.parse_failures == [
        {"turn": 1, "reason": "unextracted_tool_call", "raw_text": "<tool_call>{bad", "detail": "json"}
    ]
    assert result.cached_calls == 1 and result.model_calls == 2
    assert result.outcome is Outcome.FAILED  # scored as the benchmark scores it, not a crash
    assert result.details["answer_status"] == "scored"


def _error_script():
    return [
        calls_msg(
            tool_call("a", "film_director_finder", {"film_title": "Nope"}),  # returns {"error": ...}
            tool_call("b", "extract_first_name", {"name": "x"}),  # raises TypeError
        ),
        answer("<answer>6</answer>"),
    ]


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("off", ['{"error": "Film not found."}', None]),
        ("exceptions", ['{"error": "Film not found."}', "Failed!"]),
        ("exceptions+error_payloads", ["Failed!", "Failed!"]),
    ],
)
def test_minimal_feedback_ablation(records, mode, expected):
    result = run(
        make_runner(minimal_feedback=mode, error_mode="feedback"), case_for(records[9001]),
        ScriptedModel(_error_script()),
    )
    contents = [m["content"] for m in result.transcript if m["role"] == "tool"]
    assert contents[0] == expected[0]
    if expected[1] is None:
        assert contents[1] == (
            "an error occured when call extract_first_name: "
            "extract_first_name() got an unexpected keyword argument 'name'"
        )
    else:
        assert contents[1] == expected[1]
    # invocation errors are classified on the unmasked feedback, whatever the ablation
    inv = result.details["invocation_errors"]
    assert inv["mode"] == "feedback" and inv["counts"]["parameter_hallucination"] == 1
    assert result.values["error_calls"] == 1.0 and result.values["query_error"] == 1.0


@pytest.mark.parametrize("status, reason", [("timeout", "timed out after 10 seconds"),
                                            ("crashed", "tool execution crashed (forced crashed)")])
def test_sandbox_timeout_or_crash_is_fed_back_and_recorded(records, status, reason):
    sandbox = FakeSandbox(force={"letter_counter": status})
    script = [calls_msg(tool_call("a", "letter_counter", {"text": "Steven"})), answer("<answer>6</answer>")]
    result = run(make_runner(sandbox), case_for(records[9001]), ScriptedModel(script))
    tool_msg = result.transcript[2]
    assert tool_msg["content"] == f"an error occured when call letter_counter: {reason}"
    dev = result.details["deviations"]
    assert len(dev) == 1 and dev[0]["kind"] == f"tool_{status}" and dev[0]["name"] == "letter_counter"
    assert result.outcome is Outcome.PASSED  # the case still completes and is scored


def test_strict_scorer_option(records):
    script = [answer("The answer is 6")]
    strict = run(make_runner(scorer="strict"), case_for(records[9001]), ScriptedModel(script))
    upstream = run(make_runner(), case_for(records[9001]), ScriptedModel(script))
    assert upstream.outcome is Outcome.PASSED
    assert strict.outcome is Outcome.FAILED and strict.details["scorer"] == "strict"
    assert {"kind": "scorer", "value": "strict", "note": "not the upstream scorer"} in strict.details["deviations"]
    assert "gold: 6" in strict.failure_message and "The answer is 6" in strict.failure_message


def test_failure_message_is_short(records):
    long = "blah " * 500
    result = run(make_runner(), case_for(records[9003]), ScriptedModel([answer(long)]))
    assert result.outcome is Outcome.FAILED
    assert len(result.failure_message) < 600
    assert result.details["gold"] == "1755-02-26"


# --------------------------------------------------------------------------- benchmark


def test_benchmark_protocol_and_cases():
    assert isinstance(TOOLHOP, Benchmark)
    cases = TOOLHOP.load_cases(REPO / "data", ("mandatory", "direct"))
    assert len(cases) == 12
    assert [c.id for c in cases[:2]] == ["toolhop-9001-mandatory", "toolhop-9002-mandatory"]
    assert cases[6].id == "toolhop-9001-direct"  # scenario-major, then file order
    c = cases[0]
    assert (c.benchmark, c.scenario, c.sample_id) == ("toolhop", "mandatory", "9001")
    assert c.labels == {"hops": 3, "domain": "Film", "answer_type": "number"}
    assert c.sample.id == 9001
    assert [m.name for m in TOOLHOP.metrics] == ["accuracy", "query_error_rate", "instance_error_rate"]
    assert TOOLHOP.metrics[2].kind == "ratio" and TOOLHOP.metrics[2].denominator == "calls"
    assert not TOOLHOP.metrics[1].applies_to("free")
    assert TOOLHOP.label_markers == {"hops": "n", "domain": "name"}
    with pytest.raises(ValueError, match="unknown ToolHop scenario"):
        TOOLHOP.load_cases(REPO / "data", ("react",))


def test_make_runner_and_oracle_end_to_end():
    from pytest_toolbench.runtime.environment import RunEnvironment

    settings = RunSettings(model="oracle", benchmark_options={"toolhop": ToolHopOptions(max_turns=9)})
    sandbox = FakeSandbox()
    runner = TOOLHOP.make_runner(RunEnvironment(settings, sandbox=sandbox))
    assert isinstance(runner, CaseRunner) and runner.sandbox is sandbox
    assert runner.options.max_turns == 9
    assert runner.sampling == toolhop_sampling(settings)

    class OracleModel(ScriptedModel):
        async def complete(self, request, ctx):
            return ChatResponse(message=ctx.oracle(request))

    for case in TOOLHOP.load_cases(None, TOOLHOP.scenarios):
        assert toolhop_oracle(case.sample)(ChatRequest(messages=[])) == answer(f"<answer>{case.sample.answer}</answer>")
        result = asyncio.run(runner.run(case, OracleModel([])))
        assert result.outcome is Outcome.PASSED, case.id


def test_a_direct_only_process_starts_no_sandbox():
    """make_runner asks the environment for the sandbox only when a case of this process can
    call a tool: the direct scenario runs no tool code and needs no isolation layers."""
    from pytest_toolbench.benchmarks.toolhop.runner import NoToolSandbox
    from pytest_toolbench.runtime.environment import RunEnvironment

    class NoSandboxEnv(RunEnvironment):
        @property
        def sandbox(self):
            raise AssertionError("the sandbox was started")

    direct = [c for c in TOOLHOP.load_cases(None, ("direct",))]
    env = NoSandboxEnv(RunSettings(model="oracle"), cases=lambda name: direct)
    assert isinstance(TOOLHOP.make_runner(env).sandbox, NoToolSandbox)


def test_context_overflow_is_scored_as_no_answer_not_an_infrastructure_error():
    """Upstream: a failed call yields no answer and the sample counts wrong (the turn loop and
    scorer of code/evaluation_*.py)."""
    import asyncio

    from pytest_toolbench.benchmarks.toolhop.benchmark import TOOLHOP
    from pytest_toolbench.benchmarks.toolhop.options import ToolHopOptions
    from pytest_toolbench.benchmarks.toolhop.runner import ToolHopRunner
    from pytest_toolbench.models.base import ContextLengthExceeded, Sampling
    from pytest_toolbench.results.case_result import Outcome

    class Overflowing:
        name = "overflowing"

        async def complete(self, request, ctx):
            raise ContextLengthExceeded("maximum context length is 2048 tokens")

        async def aclose(self):
            pass

        def describe(self):
            return {}

    bundled = Path(__file__).resolve().parents[1] / "data"
    case = next(iter(TOOLHOP.load_cases(bundled, ("mandatory",))))
    runner = ToolHopRunner(sandbox=None, options=ToolHopOptions(), sampling=Sampling())
    result = asyncio.run(runner.run(case, Overflowing()))
    assert result.outcome is Outcome.FAILED and result.error is None
    assert result.values["answer_correct"] == 0.0
    assert result.details["answer_status"] == "no_answer"
    assert result.details["stop_reason"].startswith("context_length_exceeded")


def test_sandbox_failing_on_the_harness_side_is_an_infrastructure_error(records):
    """A zygote killed, stopped or unable to restart is not the tool's doing: the case is an
    error of kind sandbox_failed (excluded from the metrics), not a tool error fed to the model."""
    sandbox = FakeSandbox(force={"letter_counter": "unavailable"})
    script = [calls_msg(tool_call("a", "letter_counter", {"text": "Steven"})), answer("<answer>6</answer>")]
    result = run(make_runner(sandbox), case_for(records[9001]), ScriptedModel(script))
    assert result.outcome is Outcome.ERROR
    assert result.error is not None and result.error.kind == "sandbox_failed"
    assert "forced unavailable" in result.error.message
    assert not any(m.get("role") == "tool" for m in result.transcript)  # nothing fed back
