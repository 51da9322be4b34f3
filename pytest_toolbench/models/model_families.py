"""Which vLLM tool-call parser and chat template a model needs, by model family.

vLLM only returns structured ``tool_calls`` when it is started with the parser that matches the
format the model was trained to emit (and a chat template that shows the model its tools). Users
should not have to know this for common models, so we detect the family from the model folder's
``config.json`` (or the name) and look the pair up here; ``VLLMSettings.tool_call_parser`` /
``chat_template`` override it.

Chat template: the checkpoint's own unless the table says otherwise, for one of two reasons
(:data:`TEMPLATE_PURPOSE`). vLLM's example templates (Llama 3.x JSON) are vLLM's recommended
companion of its tool parser: they are used only where that parser extracts the calls (decodings
``closed`` and ``open-server-parser``). Under the open protocol (``--decoding open``) the harness
parses the raw text as upstream's ``evaluation_open.py``, which renders the checkpoint's own
template (``tokenizer.apply_chat_template``), so the server gets no ``--chat-template`` there. Our
Hermes template for SmolLM2 is used in every decoding: SmolLM2's own template ignores ``tools``.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
from pathlib import Path
from typing import Any

from pydantic import ConfigDict

from pytest_toolbench.deferred_model import DeferredModel

log = logging.getLogger(__name__)

TEMPLATES_DIR = Path(__file__).parent / "templates"

#: Family used when nothing matches: Hermes-style ``<tool_call>`` is the most common format among
#: open instruct models, and the choice is recorded in the run metadata, so a wrong guess shows.
UNKNOWN_FAMILY = "unknown"


class ToolConfig(DeferredModel):
    """The server flags one family needs. ``chat_template`` is a file path or None (model's own)."""

    model_config = ConfigDict(frozen=True)

    family: str
    tool_call_parser: str | None
    chat_template: str | None = None


def _vllm_example_template(file_name: str) -> str | None:
    """A template from the installed vLLM's ``examples/`` folder, if this build ships it.

    Wheels usually do not ship ``examples/``; then the model's own template is used (Llama 3.1+
    templates render tools themselves).
    """
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    pkg = Path(next(iter(spec.submodule_search_locations)))
    for candidate in (pkg / "examples" / file_name, pkg.parent / "examples" / file_name):
        if candidate.is_file():
            return str(candidate)
    return None


def _table() -> dict[str, tuple[str | None, str | None]]:
    """family -> (tool_call_parser, chat_template). Built lazily: it probes the vLLM install."""
    llama3_template = _vllm_example_template("tool_chat_template_llama3.1_json.jinja")
    return {
        "qwen2": ("hermes", None),
        "qwen2.5": ("hermes", None),
        "qwen3": ("hermes", None),
        "llama3.1": ("llama3_json", llama3_template),
        "llama3.2": ("llama3_json", llama3_template),
        "llama3.3": ("llama3_json", llama3_template),
        "mistral": ("mistral", None),
        # SmolLM2's own template ignores `tools`: ours lists them Hermes-style.
        "smollm2": ("hermes", str(TEMPLATES_DIR / "hermes_tools.jinja")),
        # Our random-weight test model: its tokenizer carries a Hermes-style template.
        "tiny-random-llama": ("hermes", None),
        UNKNOWN_FAMILY: ("hermes", None),
    }


#: Why a family's table template replaces the checkpoint's own, which decides where it is used.
#: ``server_parser``: vLLM's example template, recommended beside vLLM's ``llama3_json`` parser
#: (vLLM's docs: the official Llama 3.1 template "tweaked so that it works better with vLLM": its
#: own default system prompt, tool results wrapped as ``{"output": ...}``, content parts). The
#: parser reads the official template's JSON format too, so the harness's own parsing (the open
#: protocol) never needs it: only decodings where the server's parser extracts calls get it.
#: ``tools``: the checkpoint's own template drops ``tools``; every decoding gets ours.
TEMPLATE_PURPOSE: dict[str, str] = {
    "llama3.1": "server_parser",
    "llama3.2": "server_parser",
    "llama3.3": "server_parser",
    "smollm2": "tools",
}

#: ``--chat-template model``: the checkpoint's own template, whatever the table says.
OWN_TEMPLATE = "model"


FAMILIES: tuple[str, ...] = (
    "qwen2", "qwen2.5", "qwen3", "llama3.1", "llama3.2", "llama3.3", "mistral", "smollm2",
    "tiny-random-llama", UNKNOWN_FAMILY,
)  # fmt: skip

# Name patterns, most specific first; matched against lower-cased names with "_" -> "-".
_NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"tiny-random-llama", "tiny-random-llama"),
    (r"smollm2", "smollm2"),
    (r"qwen3", "qwen3"),
    (r"qwen2\.5", "qwen2.5"),
    (r"qwen2", "qwen2"),
    (r"llama-?3\.3", "llama3.3"),
    (r"llama-?3\.2", "llama3.2"),
    (r"llama-?3\.1", "llama3.1"),
    (r"mistral|mixtral", "mistral"),
)


def _match_name(name: str) -> str | None:
    norm = name.lower().replace("_", "-")
    for pattern, family in _NAME_PATTERNS:
        if re.search(pattern, norm):
            return family
    return None


def _read_config(model_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def detect_family(model: str | Path, config: dict[str, Any] | None = None) -> str:
    """The family of a model folder or name.

    Names are tried first (folder name, ``_name_or_path``, a ``toolbench_family`` key our own
    models write), because ``model_type`` alone cannot tell SmolLM2 or Llama 2 from Llama 3; then
    ``model_type``/``architectures`` and, for ``llama``, the rope scaling Llama 3.1+ introduced.
    """
    path = Path(model)
    if config is None:
        config = _read_config(path) if path.is_dir() else {}
    declared = config.get("toolbench_family")
    if isinstance(declared, str) and declared in FAMILIES:
        return declared
    names = [path.name, str(model), str(config.get("_name_or_path") or "")]
    for name in names:
        if name and (family := _match_name(name)):
            return family

    model_type = str(config.get("model_type") or "").lower()
    architectures = " ".join(config.get("architectures") or []).lower()
    if model_type == "qwen3" or "qwen3" in architectures:
        return "qwen3"
    if model_type == "qwen2" or "qwen2" in architectures:
        return "qwen2"
    if model_type in ("mistral", "mixtral") or "mistral" in architectures:
        return "mistral"
    if model_type == "llama":
        rope = config.get("rope_scaling") or config.get("rope_parameters") or {}
        if isinstance(rope, dict) and rope.get("rope_type") == "llama3":
            return "llama3.1"  # 3.1, 3.2 and 3.3 share parser and template
    return UNKNOWN_FAMILY


def resolve_tool_config(
    model: str | Path,
    *,
    family: str | None = None,
    tool_call_parser: str | None = None,
    chat_template: str | None = None,
    open_protocol: bool = False,
) -> ToolConfig:
    """Parser and template for ``model``; explicit arguments (user settings) win.

    ``tool_call_parser="none"`` turns tool parsing off (no ``--enable-auto-tool-choice``).
    ``chat_template="model"`` keeps the checkpoint's own template. ``open_protocol``: the run
    decodes with ``--decoding open`` (the harness parses raw text as upstream), so a table
    template that only serves vLLM's parser is left out (:data:`TEMPLATE_PURPOSE`).
    """
    family = family or detect_family(model)
    if family == UNKNOWN_FAMILY and tool_call_parser is None:
        log.warning(
            "model family of %s not recognised; assuming the Hermes tool-call format "
            "(set the vLLM tool_call_parser setting to override)",
            model,
        )
    table_parser, table_template = _table().get(family, _table()[UNKNOWN_FAMILY])
    if open_protocol and TEMPLATE_PURPOSE.get(family) == "server_parser":
        table_template = None  # upstream renders the checkpoint's own template
    parser = tool_call_parser if tool_call_parser is not None else table_parser
    if parser is not None and parser.lower() == "none":
        parser = None
    template = chat_template if chat_template is not None else table_template
    if template == OWN_TEMPLATE:
        template = None
    return ToolConfig(family=family, tool_call_parser=parser, chat_template=template)
