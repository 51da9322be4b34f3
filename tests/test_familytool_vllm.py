"""FamilyTool's vLLM request format against a real vLLM server on the CPU.

The harness hands the chat template upstream's raw tool documents through
``chat_template_kwargs.tools`` (tooluse.py), relying on vLLM letting a request's template kwargs
replace the tools it derives from ``tools=``. If a vLLM release stopped doing so, every prompt would
silently lose its tools. This asks the server what it renders (``/tokenize`` then ``/detokenize``)
and requires it to be exactly transformers' ``apply_chat_template`` of the same messages with
``tools=<raw documents>`` (test_familytool_upstream_requests.py ties that rendering to upstream's),
``response`` fields included; the body's ``repetition_penalty`` and ``skip_special_tokens`` (upstream's
SamplingParams for local models) are accepted.
"""

from __future__ import annotations

import importlib.util

import httpx
import pytest

from tests.tiny_model import tiny_model_path  # noqa: F401 - session fixture
from pytest_toolbench.benchmarks.familytool.benchmark import FAMILYTOOL
from pytest_toolbench.benchmarks.familytool.tooluse import build_request_parts

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed"),
]


def served_prompt(root: str, body: dict) -> str:
    tokens = httpx.post(f"{root}/tokenize", json=body, timeout=120)
    assert tokens.status_code == 200, tokens.text[:2000]
    text = httpx.post(f"{root}/detokenize", json={"model": body["model"], "tokens": tokens.json()["tokens"]},
                      timeout=120)
    assert text.status_code == 200, text.text[:2000]
    return text.json()["prompt"]


def test_raw_tool_documents_reach_the_template(tiny_model_path, tmp_path):  # noqa: F811
    from transformers import AutoTokenizer

    from pytest_toolbench.servers.vllm_server import VLLMServer

    record = next(c.sample for c in FAMILYTOOL.load_cases(None, ("tooluse-golden",)) if c.sample.index == 0)
    docs = record.candidate_tools
    assert any("response" in d for d in docs)
    messages, tools, extra = build_request_parts(record.user, docs, "vllm", "2025-05-26", "tiny")
    assert tools is None
    expected = AutoTokenizer.from_pretrained(str(tiny_model_path)).apply_chat_template(
        messages, tools=docs, tokenize=False, add_generation_prompt=True)
    with VLLMServer(str(tiny_model_path), served_model_name="tiny", extra_args=["--enforce-eager"],
                    log_path=tmp_path / "vllm.log") as server:
        root = server.base_url.rsplit("/v1", 1)[0]
        rendered = served_prompt(root, {"model": "tiny", "messages": messages, **extra})
        reply = httpx.post(f"{server.base_url}/chat/completions", timeout=120, json={
            "model": "tiny", "messages": messages, **extra, "repetition_penalty": 1.05, "max_tokens": 2})
    assert rendered == expected
    assert '"response": {' in rendered
    assert reply.status_code == 200, reply.text[:2000]
