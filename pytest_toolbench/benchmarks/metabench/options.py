"""Meta-Bench run options: each paper ambiguity is a named option (Meta-Tool paper, evaluation and Algorithm 1). Where one of the
paper's sentences fixes a definition (what an invocation is, P-Acc "in value", FMD as a success
rate, HR "within the retrieved tool set") the default follows the sentence and the other reading
is the alternative; elsewhere the default is this project's reading. Every field is a
``--metabench-<field>`` flag; a non-default value is recorded in each case's ``deviations``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from pytest_toolbench.benchmarks.declaration import Declaration
from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.environments import DEFAULT_EMBEDDER

#: The paper's retriever (README of qinshengqian/Meta-Tool); not downloadable here.
PAPER_EMBEDDER = "intfloat/multilingual-e5-large"


class MetaBenchOptions(DeferredModel):
    retriever: Literal["meta_tool", "keyword", "dialogue_history"] = Field(
        "meta_tool",
        description="meta_tool: Algorithm 1 (paper's method); keyword: ToolSearcher baseline "
        "(TOOLSEARCHER replaces META_TOOL); dialogue_history: history-embedding baseline (no LLM "
        "at meta_tool turns, FMD=100)",
    )
    embedder: str = Field(
        DEFAULT_EMBEDDER,
        description=f"sentence-transformers embedder; the paper used {PAPER_EMBEDDER} (give a "
        "local folder where the hub is unreachable)",
    )
    alpha: float = Field(0.5, ge=0.0, le=1.0, allow_inf_nan=False, description="Algorithm 1 weight of the tool-description similarity")
    top_k: int = Field(5, ge=1, description="tools returned per retriever call (paper: 5)")
    pool_size: int = Field(1000, ge=1, description="tools in each dialogue's retrieval pool (paper: 1000)")
    pool_seed: int = Field(0, description="seed of the per-dialogue pool sampling [inferred]")
    distractors: Path | None = Field(
        None,
        description="JSON list of extra tools that fill pools when the benchmark's own tools are "
        "too few (default: the bundled data/metabench/library/distractor_tools.json)",
    )
    prefix: Literal["auto", "none", "query", "passage"] = Field(
        "auto",
        description="E5 input prefixes: query='query: ' on both sides (model-card rule for "
        "symmetric similarity), passage='passage: ' on the pool side, auto=query for e5 "
        "embedders and none otherwise",
    )
    empty_params: Literal["fallback", "zero"] = Field(
        "fallback",
        description="Algorithm 1 when S_p is undefined: fallback=score S_t if both sides have no "
        "parameters, S_p=0 if one side has none; zero=S_p=0 whenever undefined",
    )
    embed_names: Literal["no", "yes"] = Field(
        "no",
        description="Algorithm 1 pool side: no=the tool description alone (spec: names are not "
        "embedded); yes='<name>: <description>'",
    )
    param_fallback: Literal["name", "skip"] = Field(
        "name",
        description="a required parameter without a description: name=embed its name "
        "(default); skip=leave it out of S_p",
    )
    ties: Literal["pool_order", "name"] = Field(
        "pool_order",
        description="equal retrieval scores: pool_order=the earlier pool tool first "
        "(default; pools are shuffled per dialogue); name=alphabetical by tool name",
    )
    keyword_text: str = Field(
        "{name}: {description}",
        description="keyword baseline: how a pool tool's 'concatenated string of name and "
        "description' is formed (separator unstated; fields {name} and {description})",
    )
    p_acc: Literal["value", "strict", "lenient"] = Field(
        "value",
        description="P-Acc (paper: parameters \"precisely match ... in value\"): value=numbers "
        "by value (72 == 72.0), booleans only to booleans, strings exactly, lists/objects "
        "recursively; strict=argument dicts equal after JSON canonicalisation (types too: "
        "72.0 != 72); lenient=type coercion, case/whitespace, defaults and extra optional "
        "params ignored",
    )
    call_reading: Literal["invocation", "any_json"] = Field(
        "invocation",
        description="what in a reply is a tool call (IRR: \"the invocation of any tool\"; all "
        "turns): invocation=structured tool_calls or a family's call syntax (bare call JSON as "
        "the whole reply, after <|python_tag|> or [TOOL_CALLS], in <tool_call> blocks), never "
        "JSON inside prose or code fences; any_json=any JSON object with a name anywhere",
    )
    extra_calls: Literal["ignore", "penalise"] = Field(
        "ignore",
        description="T/P-Acc when the reply has more calls than the gold turn: ignore=not "
        "penalised (the paper's wording; counted apart as extra_calls); penalise=the turn's "
        "gold calls all count as misses",
    )
    irr_meta_tool: Literal["invocation", "abstain"] = Field(
        "invocation", description="IRR: whether a meta_tool call in a chat turn is a tool invocation"
    )
    fmd_unit: Literal["turn", "gold_tool"] = Field(
        "turn",
        description="FMD (paper: \"the success rate of this meta-tool function calling\"): "
        "turn=per meta_tool turn, met by any well-formed retriever call; gold_tool=per gold "
        "missing tool, min(#retriever calls, #gold) per turn",
    )
    hr_matching: Literal["retrieved_set", "bipartite"] = Field(
        "retrieved_set",
        description="HR@k per gold missing tool (paper: \"hit rate of the ground truth tool "
        "within the retrieved tool set\"): retrieved_set=a hit if it is in the union of the "
        "turn's retriever calls' top-k; bipartite=each retriever call hits at most one gold "
        "tool (maximum matching)",
    )
    history_query: Literal["full", "last_user"] = Field(
        "full",
        description="dialogue-history baseline query: full history (user/assistant/tool, newest "
        "last, embedder-truncated) or the last user message",
    )
    history_format: Literal["text", "tool_calls"] = Field(
        "text",
        description="how past calls are sent: text=assistant content holds the JSON call list, "
        "tool turns are role 'tool' text (Llama/vLLM, the paper's setting); tool_calls=OpenAI "
        "tool_calls + tool_call_id (for APIs that require them)",
    )
    list_get_user_input: bool = Field(
        False, description="list get_user_input in the instruction (Table 5 ablation; paper: not listed)"
    )
    tool_indent: int = Field(2, ge=0, description="JSON indent of the instruction's tool list")

    @field_validator("keyword_text")
    @classmethod
    def _keyword_fields(cls, value: str) -> str:
        """A template with other fields would fail at the first retrieval; fail at startup."""
        try:
            value.format(name="n", description="d")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"keyword_text {value!r} must use only the fields {{name}} and {{description}} ({exc!r})"
            ) from None
        return value


#: What pytest reads of Meta-Bench in every command (benchmarks/declaration.py); the benchmark
#: class takes these attributes from here.
DECLARATION = Declaration(
    name="metabench", title="Meta-Bench", options_model=MetaBenchOptions,
    label_markers={"category": "name", "difficulty": "name", "world": "name"},
)
