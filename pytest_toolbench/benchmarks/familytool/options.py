"""FamilyTool run options. Every default is upstream behaviour (or, where upstream has no fixed
value, a documented reproducible choice); each field is a ``--familytool-<field>`` flag."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from pytest_toolbench.benchmarks.declaration import Declaration
from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.environments import DEFAULT_EMBEDDER

Split = Literal["b", "e"]
KGMode = Literal["golden", "extracted", "full"]
Method = Literal["gs", "rr"]


class FamilyToolOptions(DeferredModel):
    split: list[Split] = Field(
        default_factory=list, description="splits to run (b, e; default both)",
        json_schema_extra={"repeatable": True},
    )
    kg_mode: list[KGMode] = Field(
        default_factory=list,
        description="tool-use KG inputs to run (golden, extracted, full; default all)",
        json_schema_extra={"repeatable": True},
    )
    extraction: list[Method] = Field(
        default_factory=list,
        description="extraction methods to run (gs = Greedy Search, rr = Relation Retrieval; "
        "default both)",
        json_schema_extra={"repeatable": True},
    )
    kg_file: Path | None = Field(
        None, description="KG file replacing familykg-<split>.txt for every split (inductive setting)"
    )
    kg_model: str | None = Field(
        None, description="model for the extraction step (cross-LLM, paper Table 10); default: "
        "the model under test"
    )
    kg_base_url: str | None = Field(None, description="OpenAI-compatible base URL of --familytool-kg-model")
    kg_layout: Literal["auto", "single_user", "system_user"] = Field(
        "auto",
        description="extraction messages: single_user (local vLLM models), system_user (API "
        "models); auto picks by backend",
    )
    tool_format: Literal["auto", "openai", "vllm", "deepseek_r1"] = Field(
        "auto", description="tool-use formatting: openai (APIRequester), vllm (chat template "
        "with the raw tool documents) or deepseek_r1 (tools as JSON lines in the prompt); auto: "
        "deepseek_r1 for a model named deepseek-reasoner (as upstream), else by backend",
    )
    api_text_tool_calls: bool = Field(
        False,
        description="variant: also read <tool_call> text in an API reply's content when it has "
        "no tool_calls (upstream reads tool_calls only)",
    )
    think_vocab: Literal["auto", "yes", "no"] = Field(
        "auto",
        description="whether the model's tokenizer has </think> (upstream then finds no call in a "
        "reply starting with <tool_call>); auto: from a local model folder, else the name "
        "(QwQ, Qwen3, DeepSeek-R1)",
    )
    no_repetition_penalty: bool = Field(
        False,
        description="leave out upstream's repetition_penalty 1.05, otherwise sent to vLLM-served "
        "models (extraction on a local model, vllm tool format), for a server that refuses it",
    )
    no_think: bool = Field(
        False,
        description="Qwen3 extraction with thinking off (upstream --no_think: enable_thinking="
        "False in the chat template; also on when the model name contains no_think)",
    )
    date: str = Field(
        "2025-05-26",
        description="'Current Date' in the tool-use system prompt (upstream: today; fixed here so "
        "prompts are reproducible)",
    )
    tool_choice: str = Field("auto", description="tool_choice for OpenAI-format tool use (upstream default auto)")
    relation_order: Literal["sorted", "file", "shuffled"] = Field(
        "sorted", description="relation order in the extraction prompt (upstream: set order, "
        "random per process)",
    )
    relation_seed: int = Field(0, description="seed for --familytool-relation-order shuffled")
    k: int = Field(3, ge=1, description="top-k relations for Relation Retrieval (upstream hard-codes 3)")
    embedder: str = Field(
        DEFAULT_EMBEDDER,
        description="relation-retrieval embedder: a name or local folder (upstream: "
        "jinaai/jina-embeddings-v3)",
    )


#: What pytest reads of FamilyTool in every command (benchmarks/declaration.py); the benchmark
#: class takes these attributes from here.
DECLARATION = Declaration(
    name="familytool", title="FamilyTool", options_model=FamilyToolOptions,
    label_markers={
        "split": "name", "hops": "n", "step": "name", "kg": "mode", "extraction": "method",
    },
)
