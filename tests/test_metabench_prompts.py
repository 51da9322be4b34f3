"""Figure 10 instruction and the special tools (Figures 4-6), checked against the paper's text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks.metabench.prompts import (
    FIGURE_10_AS_PRINTED,
    GET_USER_INPUT,
    META_TOOL,
    TOOLSEARCHER,
    fill_placeholders,
    instruction_tools,
    render_instruction,
)

PAPER = Path("/work/shared/papers/metatool.txt")


def _squash(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.skipif(not PAPER.exists(), reason="paper text not available")
def test_figure_10_appears_verbatim_in_the_paper():
    assert FIGURE_10_AS_PRINTED in PAPER.read_text(encoding="utf-8")


def test_instruction_matches_the_rendered_examples():
    text = render_instruction(instruction_tools([], open_world=False))
    assert text == (
        "You are a powerful and helpful chatbot.\n"
        "Given the following functions, please respond with a JSON for a function calling with its "
        "proper arguments that best answers the given prompt.\n\n```\n[ ]\n```\n\n"
        'Respond in the format {"name": function name, "parameters": dictionary of argument name '
        "and its value}. You SHOULD NOT include any other text in the response."
    )
    assert _squash(text.replace("```\n[ ]\n```", "{TOOLS}")) == _squash(FIGURE_10_AS_PRINTED)


def test_special_tools_verbatim():
    # Figure 4 (PDF wraps joined by single spaces); "required" sits beside "parameters".
    assert META_TOOL == json.loads("""{"name": "meta_tool",
      "description": "Use this tool when no suitable tool is available in the current list, and an external tool is required to provide an accurate response to the user.",
      "parameters": {"type": "object", "properties": {
        "tool_description": {"description": "A clear and concise description of the external tool you need to use.", "type": "string"},
        "param_description": {"type": "array", "description": "A list of descriptions for each parameter required by the external tool.", "items": {"type": "string"}}}},
      "required": ["tool_description", "param_description"]}""")
    assert list(META_TOOL) == ["name", "description", "parameters", "required"]
    assert TOOLSEARCHER == {
        "name": "ToolSearcher",
        "description": "Searches for relevant tools in library based on the keywords.",
        "input_parameters": {"keywords": {"type": "str", "description": "The keyword to search for."}},
        "output_parameters": {"best_matches": {"type": "Union[List[dict], dict]", "description": "The best match tool(s)."}},
    }
    assert GET_USER_INPUT == {
        "name": "get_user_input",
        "description": "Not invoke any additional functions.",
        "parameters": {"type": "object", "properties": {}},
    }


def test_tool_list_per_world_and_retriever():
    tool = {"name": "get_x", "description": "d", "parameters": {"type": "object", "properties": {}}}
    assert [t["name"] for t in instruction_tools([tool], open_world=True)] == ["meta_tool", "get_x"]
    assert [t["name"] for t in instruction_tools([tool], open_world=True, retriever="keyword")] == ["ToolSearcher", "get_x"]
    assert [t["name"] for t in instruction_tools([tool], open_world=False)] == ["get_x"]
    assert "get_user_input" not in render_instruction(instruction_tools([tool], open_world=True))
    text = render_instruction(instruction_tools([tool], open_world=True))
    listed = json.loads(re.search(r"```\n(.*)\n```", text, re.S).group(1))
    assert listed == [META_TOOL, tool]
    assert '\n  {\n    "name": "meta_tool"' in text  # 2-space indent, META_TOOL first


def test_placeholders_in_a_prerendered_system():
    filled = fill_placeholders("```\n[{META_TOOL}]\n```", retriever="keyword")
    assert json.loads(filled.strip("`\n")) == [TOOLSEARCHER]
