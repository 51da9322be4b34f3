"""FamilyTool's tool-use requests equal upstream's, for every record of the real data.

* API format: the JSON body the harness sends (``OpenAIBackend._request_kwargs``, the body it
  posts) is compared, after JSON normalisation (sorted keys), with the body upstream's own
  APIRequester builds (``tests/data/familytool_upstream_requests.json``: digests per converted tool
  and per body, made by running upstream's unmodified code, see its ``_about``): gpt-4o with
  ``tool_choice`` auto, and deepseek-reasoner's plain-text prompt.
* vLLM format: the prompt the chat template renders from the harness's request (system message
  with the date, the raw documents as template ``tools``) equals what upstream renders
  (``apply_chat_template([user], tools=candidate_tools)`` then ``"Current Date: ..."`` inserted
  before ``"# Tools"``), through transformers' own ``apply_chat_template``, with the system/tools
  blocks of Qwen2.5's and Qwen3's templates. Its body carries ``skip_special_tokens: false``, as
  upstream's ``evaluate_model`` samples every local model (no API body carries it).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from shared_data import REAL_FAMILYTOOL

from pytest_toolbench.benchmarks.familytool.schema import FamilyToolRecord, load_records
from pytest_toolbench.benchmarks.familytool.tooluse import build_request_parts, tool_sampling
from pytest_toolbench.models.base import ChatRequest, Sampling
from pytest_toolbench.models.spec import BackendSpec
from pytest_toolbench.models.openai_backend import OpenAIBackend

UPSTREAM = Path(__file__).parent / "data" / "familytool_upstream_requests.json"
DATE = "2025-05-26"

pytestmark = pytest.mark.skipif(not REAL_FAMILYTOOL.is_dir(), reason="../shared FamilyTool data absent")


def digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@pytest.fixture(scope="module")
def upstream() -> dict[str, list[dict[str, Any]]]:
    return json.loads(UPSTREAM.read_text(encoding="utf-8"))["records"]


def body(record: FamilyToolRecord, fmt: str, model: str) -> dict[str, Any]:
    """The body the harness posts for this record's tool-use request."""
    messages, tools, extra = build_request_parts(record.user, record.candidate_tools, fmt, DATE, model)  # type: ignore[arg-type]
    temperature, max_tokens, top_p = tool_sampling(fmt, "hermes")  # type: ignore[arg-type]
    fields = {k: v for k, v in (("tools", tools), ("extra_body", extra)) if v is not None}
    if fmt == "openai":
        fields["tool_choice"] = "auto"
    request = ChatRequest(messages=messages, sampling=Sampling(temperature=temperature, max_tokens=max_tokens,
                                                               top_p=top_p), **fields)
    return OpenAIBackend(BackendSpec(model=model, base_url="http://127.0.0.1:9/v1", api_key="unused"))._request_kwargs(request)


@pytest.mark.parametrize("split", ["b", "e"])
def test_api_request_bodies_equal_upstreams(upstream, split):
    records = load_records(REAL_FAMILYTOOL / f"familytool-{split}.jsonl", split)
    assert len(records) == len(upstream[split])
    for record, expected in zip(records, upstream[split]):
        sent = body(record, "openai", "gpt-4o")
        for i, (tool, want) in enumerate(zip(sent["tools"], expected["tools"], strict=True)):
            assert digest(tool) == want, f"{split}-{record.index}: tool {i} ({tool['function']['name']}) " \
                                         f"differs from upstream's conversion: {json.dumps(tool)[:400]}"
        assert digest(sent) == expected["body"], f"{split}-{record.index}: body differs"


@pytest.mark.parametrize("split", ["b", "e"])
def test_vllm_bodies_carry_upstreams_skip_special_tokens(split):
    """``evaluate_model_for_single_round_tool_call`` builds every local model's SamplingParams with
    ``"skip_special_tokens": False``; APIRequester sends only model, messages, temperature,
    max_tokens (and tools, tool_choice), so API bodies never carry it (their digests above)."""
    records = load_records(REAL_FAMILYTOOL / f"familytool-{split}.jsonl", split)
    for record in records:
        for model in ("Qwen/Qwen2.5-7B-Instruct", "Meta-Llama-3.1-8B-Instruct"):
            sent = body(record, "vllm", model)
            assert sent["skip_special_tokens"] is False, f"{split}-{record.index} ({model})"
            assert sent["chat_template_kwargs"] == {"tools": record.candidate_tools}
            assert "tools" not in sent and "tool_choice" not in sent
        for fmt, model in (("openai", "gpt-4o"), ("deepseek_r1", "deepseek-reasoner")):
            assert "skip_special_tokens" not in body(record, fmt, model)


@pytest.mark.parametrize("split", ["b", "e"])
def test_deepseek_reasoner_bodies_equal_upstreams(upstream, split):
    records = load_records(REAL_FAMILYTOOL / f"familytool-{split}.jsonl", split)
    for record, expected in zip(records, upstream[split]):
        sent = body(record, "deepseek_r1", "deepseek-reasoner")
        assert "tools" not in sent
        assert digest(sent) == expected["r1_body"], f"{split}-{record.index}: deepseek-reasoner body differs"


# The system and tools blocks of Qwen2.5-Instruct's and Qwen3's chat templates (the rest of those
# templates renders the single user turn and the generation prompt the same way for both calls).
_TOOLS_AND_TURNS = (
    '{{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n'
    'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}'
    '{%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}'
    '{{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments '
    'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": '
    '<args-json-object>}\\n</tool_call><|im_end|>\\n" }}{%- endif %}'
    "{%- for message in messages %}{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
# Qwen2.5: the system text (or Qwen's default), then "\n\n# Tools". Qwen3: the system text and
# "\n\n" only when there is one; its tools text starts at "# Tools" (the shared text's first
# "\n\n" is then dropped below).
QWEN25_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}"
    "{%- else %}{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}{%- endif %}"
    + _TOOLS_AND_TURNS
)
QWEN3_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    + _TOOLS_AND_TURNS.replace('{{- "\\n\\n# Tools', '{{- "# Tools', 1)
)


def tokenizer(template: str):
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    vocab = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=vocab)
    tok.chat_template = template
    return tok


@pytest.mark.parametrize("model,template", [("Qwen/Qwen2.5-7B-Instruct", QWEN25_TEMPLATE), ("Qwen3-8B", QWEN3_TEMPLATE)])
def test_vllm_format_renders_upstreams_prompt(model, template):
    tok = tokenizer(template)
    marker = "# Tools\n\nYou may call one or more functions to assist with the user query."
    for split in "be":
        for record in load_records(REAL_FAMILYTOOL / f"familytool-{split}.jsonl", split):
            # Upstream: Qwen_2_5.get_prompt.
            prompt = tok.apply_chat_template([{"role": "user", "content": record.user}], tools=record.candidate_tools,
                                             tokenize=False, add_generation_prompt=True)
            expected = prompt.replace(marker, f"Current Date: {DATE}\n\n{marker}")
            # The harness: what vLLM hands the same template for its request.
            messages, tools, extra = build_request_parts(record.user, record.candidate_tools, "vllm", DATE, model)
            assert tools is None
            ours = tok.apply_chat_template(messages, tools=extra["chat_template_kwargs"]["tools"],
                                           tokenize=False, add_generation_prompt=True)
            assert ours == expected, f"{split}-{record.index}"
            assert '"response":' in ours or not any("response" in d for d in record.candidate_tools)
