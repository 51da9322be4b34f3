"""Runs one FamilyTool case: a KG-extraction case or a KG-augmented tool-use case.

Extraction (upstream ``pipeline/KG_extraction.py``): one model call with the byte-exact prompt (memoised per sample and
extraction model, see memo.py), then the parser and GS or RR. Tool use (UnifiedToolHub ``single_last``): one call in
``single_last`` mode with the golden, extracted or full KG in the ``(...)`` slot; parsed and
scored strictly. A :class:`ModelCallError` is an infrastructure ERROR; a context overflow is
scored as upstream scores a failed generation (empty reply: format error / no calls).

The extraction call is made under its own pseudo case id (``familytool-<split>-<index>-extraction``
plus the repeat suffix), not under whichever case first needed it: ``--record`` stores it as its
own line and ``--model replay:`` finds it whatever the case order (xdist) of either run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_toolbench.benchmarks.base import Case, repeat_suffix
from pytest_toolbench.benchmarks.result_builders import CallTally, base_fields, error_result, scored_result
from pytest_toolbench.benchmarks.familytool.extraction import Extraction, extract, substitute
from pytest_toolbench.benchmarks.familytool.kg import KnowledgeGraph
from pytest_toolbench.benchmarks.familytool.memo import ExtractionMemo, memo_key
from pytest_toolbench.benchmarks.familytool.options import FamilyToolOptions
from pytest_toolbench.benchmarks.familytool.oracle import familytool_oracle
from pytest_toolbench.benchmarks.familytool.prompts import (
    EXTRACTION_MAX_TOKENS,
    EXTRACTION_TEMPERATURE,
    extraction_messages,
)
from pytest_toolbench.benchmarks.familytool.retriever import RelationRetriever
from pytest_toolbench.benchmarks.familytool.schema import FamilyToolRecord
from pytest_toolbench.benchmarks.familytool.scoring import extraction_values, tooluse_values
from pytest_toolbench.benchmarks.familytool.tooluse import (
    DEEPSEEK_REASONER,
    build_request_parts,
    has_think_token,
    parse_reply,
    rendered_tools,
    text_parser_for,
    tool_sampling,
)
from pytest_toolbench.models.base import (
    CallContext,
    ChatModel,
    ChatRequest,
    ContextLengthExceeded,
    LostTurn,
    ModelCallError,
    Sampling,
    Usage,
)
from pytest_toolbench.models.model_families import detect_family
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.models.recording import RecordingModel

BENCHMARK = "familytool"
#: ``SamplingParams(repetition_penalty=1.05)`` of upstream's local extraction and of UnifiedToolHub's
#: Qwen_2_5 / Llama_3_1 formatters.
LOCAL_REPETITION_PENALTY = 1.05


def extraction_call_id(record: FamilyToolRecord, repeat: int | None) -> str:
    """The pseudo case id the extraction call is made, recorded and replayed under."""
    return f"familytool-{record.split}-{record.index}-extraction" + (repeat_suffix(repeat) if repeat else "")


def full_kg_group(kg: KnowledgeGraph) -> str:
    """The whole KG in the golden slot's own format: ``([h, r, t], [h, r, t], ...)``."""
    return "(" + ", ".join(f"[{h}, {r}, {t}]" for h, r, t in kg.triples) + ")"


class FamilyToolRunner:
    def __init__(
        self,
        options: FamilyToolOptions,
        kgs: Callable[[str], KnowledgeGraph],
        retriever: Callable[[str], RelationRetriever],
        memo: ExtractionMemo,
        *,
        backend: str,
        kg_model: ChatModel | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ):
        self.options = options
        self.kgs = kgs
        self.retriever = retriever
        self.memo = memo
        self.backend = backend
        self.kg_model = kg_model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._described: dict[str, dict[str, Any]] = {}

    # --- settings per step -----------------------------------------------------------------
    def tool_format(self, model_name: str) -> str:
        """APIRequester sends the model named ``deepseek-reasoner`` down DeepSeek_R1's plain-text
        path; the rest goes by backend (a served vLLM model is rendered by its chat template)."""
        if self.options.tool_format != "auto":
            return self.options.tool_format
        if model_name == DEEPSEEK_REASONER:
            return "deepseek_r1"
        return "vllm" if self.backend == "vllm" else "openai"

    def think_vocab(self, model: ChatModel) -> bool:
        if self.options.think_vocab != "auto":
            return self.options.think_vocab == "yes"
        info = self._info(model)
        return has_think_token(*[str(n) for n in (info.get("model_path"), model.name, info.get("model")) if n])

    def _repetition_penalty(self, to_vllm: bool) -> dict[str, Any]:
        """Upstream's local models sample with ``repetition_penalty=1.05``; vLLM reads it from the
        request body. Only sent where the endpoint is a vLLM server (an API would refuse it)."""
        return {"repetition_penalty": LOCAL_REPETITION_PENALTY} if to_vllm and not self.options.no_repetition_penalty else {}

    def extraction_extra_body(self, kg_model: ChatModel, layout: str, kg_backend: str) -> dict[str, Any] | None:
        """Local models: upstream's repetition penalty, and ``--no_think`` for Qwen3
        (``enable_thinking=False`` where upstream renders the chat template itself: the single-user
        layout); API models get neither."""
        to_vllm = kg_backend == "vllm" or (self.kg_model is None and self.options.tool_format == "vllm")
        body = self._repetition_penalty(to_vllm)
        if layout == "single_user" and self.family(kg_model) == "qwen3" and (
            self.options.no_think or "no_think" in kg_model.name.lower()
        ):
            body["chat_template_kwargs"] = {"enable_thinking": False}
        return body or None

    def extraction_layout(self, kg_backend: str) -> str:
        if self.options.kg_layout != "auto":
            return self.options.kg_layout
        return "single_user" if kg_backend == "vllm" else "system_user"

    def _sampling(self, temperature: float, max_tokens: int, top_p: float | None = None) -> Sampling:
        return Sampling(
            temperature=self.temperature if self.temperature is not None else temperature,
            max_tokens=self.max_tokens if self.max_tokens is not None else max_tokens,
            top_p=top_p,
        )

    async def aclose(self) -> None:
        """Close the second model (``--familytool-kg-model``); the model under test is the
        runtime's (CaseRuntime.close)."""
        if self.kg_model is not None:
            await self.kg_model.aclose()

    # --- extraction --------------------------------------------------------------------------
    async def extraction_reply(
        self, case: Case, record: FamilyToolRecord, model: ChatModel, turn: int
    ) -> tuple[dict[str, Any], bool]:
        """The raw extraction reply for this sample (memoised); ``(entry, called_here)``."""
        kg_model = self.kg_model or model
        kg_backend = "openai" if self.kg_model is not None else self.backend
        kg = self.kgs(record.split)
        relations = kg.relations(self.options.relation_order, self.options.relation_seed)
        layout = self.extraction_layout(kg_backend)
        request = ChatRequest(
            messages=extraction_messages(record.query, relations, layout),  # type: ignore[arg-type]
            sampling=self._sampling(EXTRACTION_TEMPERATURE, EXTRACTION_MAX_TOKENS),
            extra_body=self.extraction_extra_body(kg_model, layout, kg_backend),
        )
        # --repeats: each repeat extracts afresh (its own memo entry, cache key and recording).
        # The sample is part of the key: two records whose queries are the same (e-203 and e-408
        # of the real data) send the same prompt, and upstream asks the model once for each (at
        # temperature 0.7); a prompt-only key gave the second record the first one's reply, and
        # a replay or a recording never saw the second record's extraction at all.
        key = memo_key(record.split, record.index, kg_model.name, kg_model.describe().get("base_url"),
                       request.fingerprint(), case.repeat)
        call_id = extraction_call_id(record, case.repeat)

        async def make() -> dict[str, Any]:
            ctx = CallContext(case_id=call_id, turn=0, oracle=familytool_oracle(record), benchmark=BENCHMARK)
            try:
                response = await kg_model.complete(request, ctx)
            except (ContextLengthExceeded, LostTurn) as exc:
                # Upstream's extraction catches any failed call and keeps the empty response
                # (a format error); a lost turn only reaches here with --upstream-lost-turns.
                return {"text": "", "messages": request.messages, "stop_reason": exc.message,
                        "usage": Usage().model_dump(), "latency_s": 0.0, "cached": False}
            if isinstance(kg_model, RecordingModel):  # --record: its own line, under call_id
                kg_model.finish_case(call_id)
            content = response.content or ""
            # API models: choices[0].message.content.strip(); local models: the whole text.
            text = content.strip() if layout == "system_user" else content
            return {"text": text, "messages": request.messages, "model": kg_model.name,
                    "usage": response.usage.model_dump(), "latency_s": response.latency_s,
                    "cached": response.cached}

        return await self.memo.get_or_make(key, make)

    def _extract(self, record: FamilyToolRecord, text: str, method: str) -> Extraction:
        kg = self.kgs(record.split)
        def top_k(relation: str, k: int) -> list[str]:  # the index is built on first need
            return self.retriever(record.split).top_k(relation, k)

        return extract(text, kg, method, top_k, self.options.k)  # type: ignore[arg-type]

    # --- the case ------------------------------------------------------------------------------
    async def run(self, case: Case, model: ChatModel) -> CaseResult:
        record: FamilyToolRecord = case.sample
        step = case.labels["step"]
        transcript: list[dict[str, Any]] = []
        details: dict[str, Any] = {"deviations": self.option_deviations()}
        tally = CallTally()
        method = case.labels.get("extraction")
        try:
            extraction: Extraction | None = None
            if step == "extract" or case.labels.get("kg") == "extracted":
                entry, made = await self.extraction_reply(case, record, model, turn=0)
                if made and self.kg_model is None:
                    tally.add_usage(Usage(**entry["usage"]), entry["latency_s"], entry["cached"])
                extraction = self._extract(record, entry["text"], str(method))
                details["extraction"] = {
                    "prompt": entry["messages"],
                    "raw_output": entry["text"],
                    "model": entry.get("model", self.kg_model.name if self.kg_model else model.name),
                    "method": method,
                    "parsed_calls": [c.__dict__ for c in extraction.calls],
                    "paths": extraction.paths,
                    "extraction_string": extraction.text,
                    "called_in_this_case": made,
                }
                if entry.get("stop_reason"):
                    details["extraction"]["stop_reason"] = entry["stop_reason"]
                transcript.extend(entry["messages"])
                transcript.append({"role": "assistant", "content": entry["text"]})
            if step == "extract":
                assert extraction is not None
                values = extraction_values(record.golden_links, extraction.text, record.golden_calls)
                details["golden_links"] = [list(link) for link in record.golden_links]
                return self._result(case, model, values, details, transcript, tally)

            mode = case.labels["kg"]
            if mode == "golden":
                content = record.user
            elif mode == "full":
                content = substitute(record.user, full_kg_group(self.kgs(record.split)))
            else:
                assert extraction is not None
                content = substitute(record.user, extraction.text)
            fmt = self.tool_format(model.name)
            messages, tools, extra_body = build_request_parts(
                content, record.candidate_tools, fmt, self.options.date, model.name  # type: ignore[arg-type]
            )
            if fmt == "vllm":
                extra_body = {**(extra_body or {}), **self._repetition_penalty(True)}
            parser = text_parser_for(self.family(model))
            temperature, max_tokens, top_p = tool_sampling(fmt, parser)  # type: ignore[arg-type]
            sampling = self._sampling(temperature, max_tokens, top_p=top_p)
            tool_choice = self.options.tool_choice if fmt == "openai" else None
            # Fields left unset stay out of the body (an explicit tools=None is sent as null).
            request = ChatRequest(messages=messages, sampling=sampling, **{
                k: v for k, v in (("tools", tools), ("tool_choice", tool_choice), ("extra_body", extra_body))
                if v is not None})
            transcript = list(messages)
            # Turn 0: the extraction reply lives under its own id (extraction_call_id).
            ctx = CallContext(case_id=case.id, turn=0, oracle=familytool_oracle(record), benchmark=BENCHMARK)
            try:
                response = await model.complete(request, ctx)
                message = response.message
                # The text formats are read by this runner's own parser: a call the server's
                # parser left in the text is the reply format there, not a failure.
                tally.add(response, turn=0, counts_as_parse_failure=lambda reason: fmt == "openai"
                          or reason != "unextracted_tool_call")
            except (ContextLengthExceeded, LostTurn) as exc:
                # Scored as an empty reply: no calls (upstream's API path would crash on it).
                message = {"role": "assistant", "content": ""}
                details["stop_reason"] = exc.message
            transcript.append(message)
            think_vocab = fmt == "vllm" and parser == "hermes" and self.think_vocab(model)
            predicted = parse_reply(message, parser, fmt,  # type: ignore[arg-type]
                                    api_text_tool_calls=self.options.api_text_tool_calls,
                                    think_vocab=think_vocab)
            values = tooluse_values(record.golden_calls, predicted)
            details.update(
                {"tool_format": fmt, "text_parser": parser, "think_vocab": think_vocab,
                 "open_protocol": self.open_protocol(model),
                 "tools": rendered_tools(tools, extra_body), "golden_calls": record.golden_calls,
                 "predicted_calls": predicted, "raw_output": message.get("content"),
                 "tool_call_count": len(predicted)}
            )
            return self._result(case, model, values, details, transcript, tally)
        except ModelCallError as exc:
            # The tally keeps the extraction reply this case did get (kg=extracted): its tokens
            # were spent whether or not the tool-use call then failed.
            return error_result(base_fields(case, model, BENCHMARK), exc, details, transcript,
                                f"model call failed: {exc.kind}: {exc.message[:200]}", tally)

    def _info(self, model: ChatModel) -> dict[str, Any]:
        if model.name not in self._described:
            self._described[model.name] = model.describe()
        return self._described[model.name]

    def family(self, model: ChatModel) -> str:
        """The model's family: the open-protocol plan's (a managed server's), else by name."""
        return self._info(model).get("family") or detect_family(model.name)

    def open_protocol(self, model: ChatModel) -> str | None:
        """How replies reached this runner under --decoding open (None: not the open protocol)."""
        return (self._info(model).get("open_protocols") or {}).get(BENCHMARK)

    def option_deviations(self) -> list[dict[str, Any]]:
        o, out = self.options, []
        if o.k != 3:
            out.append({"kind": "k", "value": o.k, "note": "upstream hard-codes k=3"})
        if o.embedder != "jinaai/jina-embeddings-v3":
            out.append({"kind": "embedder", "value": o.embedder, "note": "upstream: jina-embeddings-v3"})
        if o.kg_file is not None:
            out.append({"kind": "kg_file", "value": str(o.kg_file)})
        if o.no_repetition_penalty and (o.tool_format == "vllm" or (o.tool_format == "auto" and self.backend == "vllm")):
            out.append({"kind": "repetition_penalty", "note": "upstream 1.05 is not sent"})
        if o.api_text_tool_calls:
            out.append({"kind": "api_text_tool_calls", "value": True,
                        "note": "upstream reads an API reply's tool_calls only"})
        return out

    def _result(
        self, case: Case, model: ChatModel, values: dict[str, float], details: dict[str, Any],
        transcript: list[dict[str, Any]], tally: CallTally,
    ) -> CaseResult:
        record: FamilyToolRecord = case.sample
        passed = values["em"] == 1.0
        failure = None
        if not passed:
            if case.labels["step"] == "extract":
                failure = (f"query: {record.query[:160]} | gold: {details.get('golden_links')} | "
                           f"extracted: {details['extraction']['extraction_string'][:200] or '<format error>'}")
            else:
                failure = (f"gold: {record.golden_calls} | predicted: {str(details['predicted_calls'])[:200]}")
        return scored_result(base_fields(case, model, BENCHMARK), passed, values, details, failure,
                             transcript, tally)
