"""Issue 23, item 9: each reply's ``finish_reason`` reaches the case result (and a reply cut by
``length`` or ``content_filter`` is counted on the end-of-run screen), whichever way the reply came:
the endpoint, the response cache, a replayed recording; scoring is untouched."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from fake_openai_server import FakeOpenAIServer, reply
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import CallContext, ChatRequest, ChatResponse
from pytest_toolbench.models.cache import CachedModel
from pytest_toolbench.models.spec import BackendSpec
from pytest_toolbench.models.openai_backend import OpenAIBackend
from pytest_toolbench.models.replay import ReplayModel
from pytest_toolbench.report.terminal import error_lines
from pytest_toolbench.results.aggregate import aggregate
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.runtime.case_runtime import CaseRuntime
from pytest_toolbench.models.recording import RecordingModel

REQUEST = ChatRequest(messages=[{"role": "user", "content": "hi"}])


def complete(model, ctx: CallContext) -> ChatResponse:
    async def go():
        try:
            return await model.complete(REQUEST, ctx)
        finally:
            await model.aclose()

    return asyncio.run(go())


def test_the_backend_and_the_cache_keep_the_finish_reason(tmp_path: Path):
    with FakeOpenAIServer(reply("cut mid-sent", finish_reason="length")) as server:
        backend = OpenAIBackend(BackendSpec(model="m", base_url=server.base_url, api_key="sk", timeout_s=5.0, max_retries=0))
        first = complete(CachedModel(backend, tmp_path), CallContext(case_id="c"))
        again = complete(CachedModel(backend, tmp_path), CallContext(case_id="c"))
        assert len(server.requests) == 1
    assert first.finish_reason == "length"
    assert again.cached and again.finish_reason == "length"


def test_a_recording_replays_with_its_finish_reasons(tmp_path: Path):
    path = tmp_path / "rec.jsonl"

    class Cut:
        name = "cut"

        async def complete(self, request, ctx):
            reason = "length" if ctx.turn else "tool_calls"
            return ChatResponse(message={"role": "assistant", "content": f"t{ctx.turn}"},
                                finish_reason=reason)

        async def aclose(self):
            pass

    recorder = RecordingModel(Cut(), path)
    for turn in (0, 1):
        complete(recorder, CallContext(case_id="c", turn=turn))
    recorder.finish_case("c")
    replay = ReplayModel(path)
    assert [complete(replay, CallContext(case_id="c", turn=t)).finish_reason for t in (0, 1)] \
        == ["tool_calls", "length"]
    # A recording made before finish reasons were kept still replays (None).
    path.write_text(json.dumps({"case_id": "c", "responses": [{"role": "assistant", "content": "x"}]}) + "\n")
    assert complete(ReplayModel(path), CallContext(case_id="c")).finish_reason is None


def test_every_runner_s_result_records_the_finish_reasons_and_the_cut_replies():
    """Recorded in one shared place (the case runtime), whatever the runner keeps; the outcome is
    the runner's own; the overview counts the case cut short."""
    from pytest_toolbench.benchmarks.base import Case

    class Model:
        name = "m"

        async def complete(self, request, ctx):
            return ChatResponse(message={"role": "assistant", "content": "x"},
                                finish_reason="length" if ctx.turn == 1 else "stop")

        async def aclose(self):
            pass

    class Runner:
        async def run(self, case, model):
            for turn in (0, 1, 2):
                await model.complete(REQUEST, CallContext(case_id=case.id, turn=turn))
            return CaseResult(case_id=case.id, benchmark=case.benchmark, scenario=case.scenario,
                              outcome=Outcome.PASSED)

    case = Case(id="b-1", benchmark="b", scenario="s", sample_id="1")
    runtime = CaseRuntime(RunSettings(model="m", backend="openai", concurrency=1), Model())
    runtime.register_runner("b", Runner())
    try:
        result = runtime.result(case)
    finally:
        runtime.close()
    assert result.outcome == Outcome.PASSED
    assert result.details["finish_reasons"] == {"stop": 2, "length": 1}
    assert result.details["cut_replies"] == [{"turn": 1, "finish_reason": "length"}]

    metrics = aggregate([result], {"b": ()}, {"b": ()})
    assert metrics.scenarios[0].n_cases_cut_short == 1
    lines = " ".join(error_lines(metrics, 200))
    assert "replies cut short (finish_reason length or content_filter): 1 case (b / s 1)" in lines
