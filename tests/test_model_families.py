"""Model-family detection and the parser/template table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_toolbench.models.model_families import (
    TEMPLATES_DIR,
    UNKNOWN_FAMILY,
    detect_family,
    resolve_tool_config,
)
from pytest_toolbench.benchmarks.toolhop.open_parsers import open_series


def _folder(tmp_path: Path, name: str, config: dict) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5"),
        ("Qwen/Qwen2-1.5B-Instruct", "qwen2"),
        ("Qwen/Qwen3-8B", "qwen3"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3.1"),
        ("meta-llama/Llama-3.2-3B-Instruct", "llama3.2"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama3.3"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama3.1"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2"),
        ("some-org/tiny_random_llama", "tiny-random-llama"),
        ("gpt2", UNKNOWN_FAMILY),
        ("meta-llama/Llama-2-7b-chat-hf", UNKNOWN_FAMILY),
    ],
)
def test_family_from_name(name: str, family: str) -> None:
    assert detect_family(name) == family


def test_family_from_config_when_folder_name_says_nothing(tmp_path: Path) -> None:
    assert detect_family(_folder(tmp_path, "a", {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]})) == "qwen2"
    assert detect_family(_folder(tmp_path, "b", {"model_type": "qwen3"})) == "qwen3"
    assert detect_family(_folder(tmp_path, "c", {"model_type": "mistral"})) == "mistral"
    llama31 = {"model_type": "llama", "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    assert detect_family(_folder(tmp_path, "d", llama31)) == "llama3.1"
    # Llama 2 style config: no llama3 rope scaling, no telling name -> unknown
    assert detect_family(_folder(tmp_path, "e", {"model_type": "llama"})) == UNKNOWN_FAMILY


def test_name_in_config_beats_model_type(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "ckpt-1000", {"model_type": "llama", "_name_or_path": "HuggingFaceTB/SmolLM2-360M"})
    assert detect_family(folder) == "smollm2"
    declared = _folder(tmp_path, "x", {"model_type": "llama", "toolbench_family": "tiny-random-llama"})
    assert detect_family(declared) == "tiny-random-llama"


def test_folder_name_is_used(tmp_path: Path) -> None:
    assert detect_family(_folder(tmp_path, "Qwen2.5-0.5B-Instruct", {"model_type": "qwen2"})) == "qwen2.5"


def test_table_values() -> None:
    qwen = resolve_tool_config("Qwen/Qwen2.5-7B-Instruct")
    assert (qwen.family, qwen.tool_call_parser, qwen.chat_template) == ("qwen2.5", "hermes", None)
    assert resolve_tool_config("mistralai/Mistral-7B-Instruct-v0.3").tool_call_parser == "mistral"
    llama = resolve_tool_config("meta-llama/Llama-3.1-8B-Instruct")
    assert llama.tool_call_parser == "llama3_json"
    assert llama.chat_template is None or llama.chat_template.endswith("tool_chat_template_llama3.1_json.jinja")
    smol = resolve_tool_config("smollm2-135m", family="smollm2")
    assert smol.tool_call_parser == "hermes"
    assert smol.chat_template == str(TEMPLATES_DIR / "hermes_tools.jinja")
    assert Path(smol.chat_template).is_file()


def test_open_protocol_uses_the_checkpoints_own_template(monkeypatch: pytest.MonkeyPatch) -> None:
    """--decoding open renders like upstream's apply_chat_template: vLLM's Llama example template
    (a companion of vLLM's parser) is left out; SmolLM2 keeps ours (its own drops the tools)."""
    from pytest_toolbench.models import model_families

    monkeypatch.setattr(model_families, "_vllm_example_template", lambda name: f"/vllm/examples/{name}")
    for name in ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-3B-Instruct",
                 "meta-llama/Llama-3.3-70B-Instruct"):
        server_parser = resolve_tool_config(name)
        assert server_parser.chat_template == "/vllm/examples/tool_chat_template_llama3.1_json.jinja"
        own = resolve_tool_config(name, open_protocol=True)
        assert (own.tool_call_parser, own.chat_template) == ("llama3_json", None)
    smol = resolve_tool_config("smollm2-135m", family="smollm2", open_protocol=True)
    assert smol.chat_template == str(TEMPLATES_DIR / "hermes_tools.jinja")
    assert resolve_tool_config("Qwen/Qwen2.5-7B-Instruct", open_protocol=True).chat_template is None
    # the user's template wins under every decoding; "model" asks for the checkpoint's own
    assert resolve_tool_config(name, chat_template="/my.jinja", open_protocol=True).chat_template == "/my.jinja"
    assert resolve_tool_config(name, chat_template="model").chat_template is None
    assert resolve_tool_config("smollm2-135m", family="smollm2", chat_template="model").chat_template is None


def test_every_table_template_has_a_purpose() -> None:
    from pytest_toolbench.models.model_families import FAMILIES, TEMPLATE_PURPOSE, _table

    table = _table()
    with_template = {f for f in FAMILIES if table[f][1] is not None}
    assert with_template <= set(TEMPLATE_PURPOSE) <= set(FAMILIES)
    assert set(TEMPLATE_PURPOSE.values()) <= {"server_parser", "tools"}


def test_settings_override_the_table() -> None:
    cfg = resolve_tool_config("Qwen/Qwen3-8B", tool_call_parser="qwen3_xml", chat_template="/my.jinja")
    assert (cfg.family, cfg.tool_call_parser, cfg.chat_template) == ("qwen3", "qwen3_xml", "/my.jinja")
    assert resolve_tool_config("Qwen/Qwen3-8B", tool_call_parser="none").tool_call_parser is None


def test_unknown_family_falls_back_to_hermes_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    cfg = resolve_tool_config("gpt2")
    assert (cfg.family, cfg.tool_call_parser) == (UNKNOWN_FAMILY, "hermes")
    assert "not recognised" in caplog.text


def test_hermes_template_renders_tools_and_tool_turns() -> None:
    jinja2 = pytest.importorskip("jinja2")
    env = jinja2.Environment()
    env.policies["json.dumps_kwargs"] = {"sort_keys": False}
    template = env.from_string((TEMPLATES_DIR / "hermes_tools.jinja").read_text())
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]  # fmt: skip
    text = template.render(messages=messages, tools=[tool], add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools")
    assert '<tools>\n{"name": "get_weather", "parameters": {"type": "object"}}\n</tools>' in text
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>' in text
    assert "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    # without tools: plain ChatML with SmolLM2's default system prompt
    plain = template.render(messages=[{"role": "user", "content": "hi"}], tools=None, add_generation_prompt=False)
    assert plain == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n"
    )


@pytest.mark.parametrize(
    ("family", "series"),
    [
        ("qwen2.5", "qwen25"), ("qwen2", "qwen25"), ("qwen3", "qwen25"),
        ("llama3.1", "llama31"), ("llama3.2", "llama31"), ("llama3.3", "llama31"),
        ("smollm2", "qwen25"),  # our Hermes template makes it emit <tool_call> blocks
        ("tiny-random-llama", "qwen25"), (UNKNOWN_FAMILY, "qwen25"), ("not-a-family", "qwen25"),
        ("mistral", None),  # [TOOL_CALLS] fits neither upstream parser
    ],
)
def test_open_series_per_family(family: str, series: str | None) -> None:
    assert open_series(family) == series


def test_every_family_has_an_open_series_entry() -> None:
    from pytest_toolbench.benchmarks.toolhop.open_parsers import OPEN_SERIES
    from pytest_toolbench.models.model_families import FAMILIES

    assert set(OPEN_SERIES) == set(FAMILIES)
    # the families read with qwen25 are exactly those whose server parser is Hermes
    hermes = {f for f in FAMILIES if resolve_tool_config("m", family=f).tool_call_parser == "hermes"}
    assert {f for f, s in OPEN_SERIES.items() if s == "qwen25"} == hermes
