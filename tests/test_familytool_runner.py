"""The runner end to end without pytest collection: the inductive KG (a relation no record uses
shows in the prompt and is found by GS and RR with the real MiniLM embedder), and extraction
running once per sample and model across methods, cases and processes (the on-disk memo)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path


from pytest_toolbench.benchmarks.familytool.benchmark import FAMILYTOOL, DEFAULT_DATA_DIR, load_kg
from pytest_toolbench.benchmarks.familytool.memo import ExtractionMemo
from pytest_toolbench.benchmarks.familytool.options import FamilyToolOptions
from pytest_toolbench.benchmarks.familytool.retriever import RelationRetriever
from pytest_toolbench.benchmarks.familytool.runner import FamilyToolRunner
from pytest_toolbench.environments.retrieval import Embedders
from pytest_toolbench.models.base import ChatResponse
from pytest_toolbench.models.oracle import OracleModel

NEW = ("Alice", "prefer_tea", "tea_0000")
#: A new preference for the whole family (RR tests each hop against the start person too).
NEW_FOR_ALL = [NEW, ("Bob", "prefer_tea", "tea_0002"), ("Jack", "prefer_tea", "tea_0001")]


class Scripted:
    """A model that answers extraction with a fixed reply and tool use like the oracle; it keeps
    every request it saw."""

    name = "scripted"

    def __init__(self, reply: str):
        self.reply, self.requests, self.oracle = reply, [], OracleModel()

    async def complete(self, request, ctx):
        self.requests.append(request)
        if request.tools:
            return await self.oracle.complete(request, ctx)
        return ChatResponse(message={"role": "assistant", "content": self.reply})

    async def aclose(self):
        return None

    def describe(self):
        return {"backend": "scripted", "base_url": None}


def make_runner(tmp_path: Path, extra=(), embedders: Embedders | None = None, **options) -> FamilyToolRunner:
    opts = FamilyToolOptions(**options)
    kgs = {s: load_kg(None, s, opts, extra) for s in "be"}
    retrievers: dict[str, RelationRetriever] = {}

    def retriever(split):
        if split not in retrievers:
            retrievers[split] = RelationRetriever(kgs[split], embedders, opts.embedder)
        return retrievers[split]

    return FamilyToolRunner(opts, kgs.__getitem__, retriever, ExtractionMemo(tmp_path / "memo"), backend="openai")


def case(scenario: str, index: int = 0, split: str = "b"):
    return next(c for c in FAMILYTOOL.load_cases(None, (scenario,))
                if c.sample.index == index and c.labels["split"] == split)


def test_inductive_relation_in_prompt_and_found_by_gs_and_rr(tmp_path):
    embedders = Embedders(tmp_path / "embeddings")
    runner = make_runner(tmp_path, extra=NEW_FOR_ALL, embedders=embedders)
    # The record's gold does not use prefer_tea: what matters is the extracted string.
    model = Scripted('KG.search(start="Bob", path=["mother","favourite_tea"])')
    gs = asyncio.run(runner.run(case("extract-gs"), model))
    prompt = model.requests[0].messages[0]["content"]
    assert "- <relationship>prefer_tea   " in prompt
    # GS: favourite_tea is fake at Alice -> her whole neighbourhood, the new link included.
    assert "['Alice', 'prefer_tea', 'tea_0000']" in gs.details["extraction"]["extraction_string"]
    rr = asyncio.run(runner.run(case("extract-rr"), model))
    # RR: favourite_tea is not a KG relation -> its top-3 by MiniLM, prefer_tea first; every
    # candidate path reaching a distinct end is kept (sign always "").
    text = rr.details["extraction"]["extraction_string"]
    assert text.startswith("([['Bob', 'mother', 'Alice'], ['Alice', 'prefer_tea', 'tea_0000']])(")
    assert text.count("([['Bob', 'mother', 'Alice'], ") == 3 and "<bad_extract>" not in text
    assert len(model.requests) == 1  # RR reused the memoised reply
    # The relation embeddings were cached on disk, keyed by embedder and relation set.
    assert list((tmp_path / "embeddings").rglob("*.npy"))


def test_kg_file_option_replaces_the_kg(tmp_path):
    kg_file = tmp_path / "kg.txt"
    kg_file.write_text((DEFAULT_DATA_DIR / "familytool" / "familykg-b.txt").read_text() + repr(list(NEW)) + "\n")
    runner = make_runner(tmp_path, kg_file=kg_file)
    model = Scripted('KG.search(start="Alice", path=["prefer_tea"])')
    result = asyncio.run(runner.run(case("extract-gs", split="e", index=0), model))
    assert "prefer_tea" in model.requests[0].messages[0]["content"]
    assert result.details["extraction"]["extraction_string"] == "([['Alice', 'prefer_tea', 'tea_0000']])"


def test_extraction_runs_once_per_sample_and_model(tmp_path):
    runner = make_runner(tmp_path)
    model = Scripted('KG.search(start="Bob", path=["mother","prefer_dinnertime"])')

    async def all_cases():
        return await asyncio.gather(*(runner.run(case(s), model) for s in
                                      ("extract-gs", "extract-rr", "tooluse-gs", "tooluse-rr")))

    results = asyncio.run(all_cases())
    assert sum(1 for r in model.requests if not r.tools) == 1
    assert sum(1 for r in model.requests if r.tools) == 2
    assert [r.values["em"] for r in results] == [1.0, 1.0, 1.0, 1.0]
    assert sum(r.details["extraction"]["called_in_this_case"] for r in results) == 1


def test_two_records_with_the_same_query_each_get_their_own_extraction(tmp_path):
    """The real data's e-203 and e-408 share a query, so their extraction prompts are the same.
    Upstream asks the model once for each record (at temperature 0.7); the memo shares a reply
    only between one record's cases, and each record's call goes out under its own id (what
    --record writes and --model replay: reads)."""
    runner = make_runner(tmp_path)
    first = case("extract-gs", index=0)
    twin = dataclasses.replace(first, stored_sample=first.sample.model_copy(update={"index": 99}),
                               sample_id="b-99", id=first.id.replace("-b-0-", "-b-99-"))
    assert twin.sample.query == first.sample.query

    class PerCall(Scripted):
        async def complete(self, request, ctx):
            self.requests.append((request, ctx.case_id))
            return ChatResponse(message={"role": "assistant", "content": f"reply for {ctx.case_id}"})

    model = PerCall("")
    one, two = asyncio.run(runner.run(first, model)), asyncio.run(runner.run(twin, model))
    assert [call_id for _, call_id in model.requests] == [
        "familytool-b-0-extraction", "familytool-b-99-extraction"]
    assert model.requests[0][0].fingerprint() == model.requests[1][0].fingerprint()
    assert one.details["extraction"]["raw_output"] == "reply for familytool-b-0-extraction"
    assert two.details["extraction"]["raw_output"] == "reply for familytool-b-99-extraction"


def test_memo_is_shared_across_processes_style_instances(tmp_path):
    """Separate memo objects (as in separate xdist workers) on one folder make the value once."""
    calls = []

    async def make():
        calls.append(1)
        await asyncio.sleep(0.2)
        return {"text": "x"}

    def worker(out):
        out.append(asyncio.run(ExtractionMemo(tmp_path).get_or_make("k" * 64, make)))

    outs: list = []
    threads = [threading.Thread(target=worker, args=(outs,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert sorted(made for _, made in outs) == [False, False, True]
    assert all(value == {"text": "x"} for value, _ in outs)


def test_failed_extraction_is_an_infrastructure_error_and_not_memoised(tmp_path):
    from pytest_toolbench.models.base import ModelCallError

    class Failing(Scripted):
        async def complete(self, request, ctx):
            raise ModelCallError("http_500", "boom")

    runner = make_runner(tmp_path)
    result = asyncio.run(runner.run(case("tooluse-gs"), Failing("")))
    assert result.is_error and result.error.kind == "http_500"
    assert not list((tmp_path / "memo").rglob("*.json"))


def test_a_failed_tool_use_call_keeps_the_extraction_calls_tokens(tmp_path):
    """kg=extracted: the extraction reply was answered (and paid for) before the tool-use call
    failed; the error result still counts that call and its tokens."""
    from pytest_toolbench.models.base import ModelCallError, Usage

    class FailingToolUse(Scripted):
        async def complete(self, request, ctx):
            if request.tools:
                raise ModelCallError("http_500", "boom")
            return ChatResponse(message={"role": "assistant", "content": self.reply},
                                usage=Usage(prompt_tokens=700, completion_tokens=30))

    model = FailingToolUse('KG.search(start="Bob", path=["mother"])')
    result = asyncio.run(make_runner(tmp_path).run(case("tooluse-gs"), model))
    assert result.is_error and result.error.kind == "http_500"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (700, 30)
    assert result.model_calls == 1


class Recorder:
    """Answers like the oracle and keeps every request (any format)."""

    def __init__(self, name: str):
        self.name, self.requests, self.oracle = name, [], OracleModel()

    async def complete(self, request, ctx):
        self.requests.append(request)
        return await self.oracle.complete(request, ctx)

    async def aclose(self):
        return None

    def describe(self):
        return {"backend": "scripted", "base_url": None}


def test_deepseek_reasoner_takes_upstreams_plain_text_path(tmp_path):
    """APIRequester sends the model named deepseek-reasoner down DeepSeek_R1's prompt: no tools
    field, the documents as JSON lines; the oracle's JSON reply scores 100."""
    model = Recorder("deepseek-reasoner")
    result = asyncio.run(make_runner(tmp_path).run(case("tooluse-golden"), model))
    request = model.requests[0]
    assert request.tools is None and request.extra_body is None
    assert "You should give one or more tool calls after think" in request.messages[0]["content"]
    assert (request.sampling.temperature, request.sampling.max_tokens) == (0.7, 1024)
    assert result.details["tool_format"] == "deepseek_r1" and result.values["em"] == 1.0


def test_vllm_format_sends_raw_documents_and_scores_the_oracle(tmp_path):
    model = Recorder("Qwen2.5-7B-Instruct")
    result = asyncio.run(make_runner(tmp_path, tool_format="vllm").run(case("tooluse-golden"), model))
    request = model.requests[0]
    record = case("tooluse-golden").sample
    assert request.tools is None and request.extra_body == {"chat_template_kwargs": {"tools": record.candidate_tools},
                                                            "skip_special_tokens": False,
                                                            "repetition_penalty": 1.05}
    assert result.details["tools"] == record.candidate_tools and result.values["em"] == 1.0


def test_qwen3_no_think_extraction(tmp_path):
    """Upstream's --no_think renders Qwen3's template with enable_thinking=False (local models
    only); the option or a model name containing no_think turns it on. Local models also get
    upstream's repetition_penalty 1.05 in the body (vLLM reads it)."""
    def extraction_request(name: str, **options):
        model = Recorder(name)
        runner = make_runner(tmp_path / name / str(options), **options)
        runner.backend = "vllm"
        asyncio.run(runner.run(case("extract-gs"), model))
        return model.requests[0]

    local = {"repetition_penalty": 1.05}  # upstream's SamplingParams for local models
    off = {**local, "chat_template_kwargs": {"enable_thinking": False}}
    assert extraction_request("Qwen3-8B", no_think=True).extra_body == off
    assert extraction_request("Qwen3-8B-no_think").extra_body == off
    assert extraction_request("Qwen3-8B").extra_body == local  # thinking on: the template's default
    assert extraction_request("Qwen2.5-7B-Instruct", no_think=True).extra_body == local
    assert extraction_request("Qwen3-8B", no_think=True, kg_layout="system_user").extra_body == local
    assert extraction_request("Qwen3-8B", no_repetition_penalty=True).extra_body is None


def test_api_extraction_gets_no_vllm_fields_and_a_lost_turn_is_a_format_error(tmp_path):
    """An API endpoint never receives vLLM's fields. With --upstream-lost-turns a failed extraction
    call is upstream's empty response: a format error, scored, not an infrastructure error."""
    from pytest_toolbench.models.base import LostTurn

    class Failing(Recorder):
        async def complete(self, request, ctx):
            self.requests.append(request)
            raise LostTurn("http_500", "server error")

    model = Failing("gpt-4o")
    result = asyncio.run(make_runner(tmp_path).run(case("extract-gs"), model))
    assert model.requests[0].extra_body is None
    assert result.outcome.value == "failed" and result.values["format_error"] == 1.0
