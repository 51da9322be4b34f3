"""A tiny random-weight Llama that real vLLM can serve on the CPU in about a minute.

It answers nonsense, but it exercises the real server: startup, the OpenAI wire format, guided
decoding and the tool-call parser. Shapes follow what the CPU kernels accept (head_dim 64; 16 is
rejected). Import the ``tiny_model_path`` fixture into a test module to share one build per session.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

#: Added (not special) tokens: special tokens would be stripped from the decoded text.
CHATML_TOKENS = ["<|im_start|>", "<|im_end|>"]
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
MARKER = ".tiny-model-complete"

_WORDS = (
    "the a weather city temperature get set call function tool name arguments value result "
    "paris london tokyo user assistant system what is of in for to and answer query number "
    "true false null id type object string integer properties required description"
).split()


def _corpus(rng: random.Random, n_lines: int = 3000) -> list[str]:
    """Text mixing words, JSON tool calls and chat markup, so common pieces become tokens."""
    syllables = ["ka", "lo", "mi", "ter", "zan", "qu", "ox", "pre", "vil", "dra", "nu", "es", "ght"]
    pseudo = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(1500)]
    vocab = list(_WORDS) + pseudo
    lines = []
    for _ in range(n_lines):
        words = " ".join(rng.choice(vocab) for _ in range(rng.randint(3, 12)))
        call = json.dumps({"name": rng.choice(_WORDS), "arguments": {rng.choice(_WORDS): rng.randint(0, 999)}})
        lines.append(f"<|im_start|>user\n{words}<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{call}\n</tool_call><|im_end|>")
    return lines


def build_tiny_model(dest: Path, *, seed: int = 0, vocab_size: int = 2000) -> Path:
    """Build (or reuse) the tiny model folder at ``dest``; returns ``dest``."""
    dest = Path(dest)
    if (dest / MARKER).is_file():
        return dest
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from pytest_toolbench.models.model_families import TEMPLATES_DIR

    rng = random.Random(seed)
    torch.manual_seed(seed)

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<unk>", "<s>", "</s>", *CHATML_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(rng), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="<|im_end|>", unk_token="<unk>", pad_token="</s>"
    )
    tokenizer.add_tokens(TOOL_TOKENS)  # normal added tokens: kept in decoded text, like Qwen's
    # The Hermes-style template the embedded model uses: a real template that renders `tools`.
    tokenizer.chat_template = (TEMPLATES_DIR / "hermes_tools.jinja").read_text(encoding="utf-8")

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,  # head_dim 64: the CPU attention kernels reject 16
        num_key_value_heads=4,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.config.toolbench_family = "tiny-random-llama"  # read by model_families.detect_family

    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    (dest / MARKER).write_text("ok\n")
    return dest


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers", reason="the tiny model needs transformers (pip install '.[local]')")
    pytest.importorskip("tokenizers", reason="the tiny model needs tokenizers (pip install '.[local]')")
    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-random-llama")
