"""The ToolBeHonest runner: one user message, no system prompt, T=0 and upstream max_tokens;
the language option picks the prompts and the data file; failures are scored or errored as
upstream scores them (``utils/generation_func.py`` turns a failed call into an empty
reply)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pytest_toolbench.benchmarks.toolbehonest.benchmark import TOOLBEHONEST, ToolBeHonestBenchmark
from pytest_toolbench.benchmarks.toolbehonest.options import ToolBeHonestOptions
from pytest_toolbench.benchmarks.toolbehonest.prompts import DETECTING_ZH
from pytest_toolbench.benchmarks.toolbehonest.runner import ToolBeHonestRunner, upstream_sampling
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import (
    ChatResponse,
    ContextLengthExceeded,
    LostTurn,
    ModelCallError,
    Sampling,
)
from pytest_toolbench.models.oracle import OracleModel
from pytest_toolbench.results.case_result import Outcome

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "toolbehonest" / "sample_en.json"


class Recorder:
    """A ChatModel that records requests and answers with a fixed reply or raises."""

    name = "recorder"

    def __init__(self, reply=None, exc=None):
        self.reply, self.exc, self.requests = reply, exc, []

    async def complete(self, request, ctx):
        self.requests.append(request)
        if self.exc:
            raise self.exc
        return ChatResponse(message={"role": "assistant", "content": self.reply})


def run(runner, case, model):
    return asyncio.run(runner.run(case, model))


def test_upstream_sampling_per_backend():
    opts = ToolBeHonestOptions()
    assert upstream_sampling("vllm", opts) == Sampling(temperature=0.0, max_tokens=1024, top_p=0.95)
    assert upstream_sampling("openai", opts) == Sampling(temperature=0.0, max_tokens=2048, top_p=None)
    assert upstream_sampling("openai", ToolBeHonestOptions(max_tokens=64)).max_tokens == 64
    settings = RunSettings(model="gpt-4o", backend="openai", api_key="x", max_tokens=300)
    assert TOOLBEHONEST.runner(settings, None).sampling.max_tokens == 300


def test_one_user_message_and_the_oracle_scores_full_marks():
    case = TOOLBEHONEST.load_cases(None, ("MNT",))[5]  # single_step-0, L3 unsolvable
    model = Recorder(reply="<answer>Subgoal 1: x Planned tool: UnsolvableQuery</answer>")
    runner = ToolBeHonestRunner(ToolBeHonestOptions(), upstream_sampling("vllm", ToolBeHonestOptions()), None)
    missing = run(runner, case, model)  # MS needs a matcher: an error, never a silent zero
    assert missing.outcome is Outcome.ERROR and missing.error.kind == "scoring_error"
    (request,) = model.requests
    assert [m["role"] for m in request.messages] == ["user"] and request.tools is None
    assert request.sampling.temperature == 0.0
    l1 = TOOLBEHONEST.load_cases(None, ("MNT",))[1]
    result = run(runner, l1, OracleModel())
    assert result.outcome is Outcome.PASSED and result.values["l1_em"] == 1.0


def test_model_error_is_an_infrastructure_error_and_context_overflow_scores_empty():
    case = TOOLBEHONEST.load_cases(None, ("PT",))[3]  # os-0, L2 unsolvable
    runner = ToolBeHonestRunner(ToolBeHonestOptions(), Sampling(), None)
    err = run(runner, case, Recorder(exc=ModelCallError("http_500", "boom")))
    assert err.outcome is Outcome.ERROR and err.error.kind == "http_500"
    over = run(runner, case, Recorder(exc=ContextLengthExceeded("too long")))
    assert over.outcome is Outcome.FAILED
    assert over.values["l2_pr"] == 0.0 and over.details["condition"] == "non_existent_tools"


def test_upstream_lost_turns_scores_a_failed_call_as_upstreams_empty_reply():
    case = TOOLBEHONEST.load_cases(None, ("PT",))[3]  # os-0, L2 unsolvable
    runner = ToolBeHonestRunner(ToolBeHonestOptions(), Sampling(), None)
    lost = run(runner, case, Recorder(exc=LostTurn("http_500", "boom")))
    assert lost.outcome is Outcome.FAILED and lost.error is None
    assert lost.values == {"l2_pr": 0.0, "overall_sum": 0.0, "overall_n": 1.0}
    assert lost.details["condition"] == "non_existent_tools"  # upstream's [""] plan
    assert lost.details["stop_reason"].startswith("http_500")


def test_lang_picks_the_prompts_and_the_data_file(tmp_path):
    folder = tmp_path / "toolbehonest"
    folder.mkdir()
    (folder / "test_zh.json").write_text(SAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    bench = ToolBeHonestBenchmark()
    zh = ToolBeHonestOptions(lang="zh")
    case = bench.load_cases(tmp_path, ("MNT",), zh)[0]
    model = Recorder(reply="<answer>solvable</answer>")
    runner = ToolBeHonestRunner(ToolBeHonestOptions(lang="zh"), Sampling(), None)
    result = run(runner, case, model)
    assert model.requests[0].messages[0]["content"].startswith(DETECTING_ZH + "\n\n<task>\n")
    assert result.values == {"l1_em_solvable": 1.0}
    assert bench.data_sources(tmp_path, zh)[0].bundled is False
