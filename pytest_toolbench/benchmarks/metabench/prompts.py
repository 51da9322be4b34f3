"""Meta-Bench's instruction (paper Figure 10) and its special tools (Figures 4-6), verbatim.

The paper's PDF wraps lines inside strings; they are joined with single spaces here (Meta-Tool paper, Figures 4-6 and 10).
``META_TOOL`` keeps ``"required"`` as a sibling of ``"parameters"`` exactly as printed. The tool
list is a fenced, 2-space-indented JSON list with the retriever tool first (Figures 14-19); the
exact whitespace of the original is unknown, so the serialisation is a parameter
(``tool_indent``) and :data:`FIGURE_10_AS_PRINTED` keeps the PDF text for reference.
"""

from __future__ import annotations

import json
from typing import Any

#: Figure 10 as the PDF prints it (line breaks and leading spaces kept).
FIGURE_10_AS_PRINTED = (
    "You are a powerful and helpful chatbot.\n"
    " Given the following functions, please respond with a JSON for a function calling with its "
    "proper arguments that best answers the given prompt.\n"
    " {TOOLS}\n"
    ' Respond in the format {"name": function name, "parameters": dictionary of argument name '
    'and its value}.\n'
    " You SHOULD NOT include any other text in the response."
)

#: Figure 10 as the rendered benchmark examples show it (Figs 14-19): the tool list between
#: blank lines and "Respond in the format ... response." on one line. ``{TOOLS}`` is replaced
#: with str.replace (tool JSON contains braces).
INSTRUCTION_TEMPLATE = (
    "You are a powerful and helpful chatbot.\n"
    "Given the following functions, please respond with a JSON for a function calling with its "
    "proper arguments that best answers the given prompt.\n"
    "\n"
    "{TOOLS}\n"
    "\n"
    'Respond in the format {"name": function name, "parameters": dictionary of argument name '
    'and its value}. You SHOULD NOT include any other text in the response.'
)

# Figure 4, verbatim (PDF line wraps joined with single spaces).
META_TOOL: dict[str, Any] = {
    "name": "meta_tool",
    "description": "Use this tool when no suitable tool is available in the current list, and an "
    "external tool is required to provide an accurate response to the user.",
    "parameters": {
        "type": "object",
        "properties": {
            "tool_description": {
                "description": "A clear and concise description of the external tool you need "
                "to use.",
                "type": "string",
            },
            "param_description": {
                "type": "array",
                "description": "A list of descriptions for each parameter required by the "
                "external tool.",
                "items": {"type": "string"},
            },
        },
    },
    "required": ["tool_description", "param_description"],
}

# Figure 5, verbatim (API-Bank style, not JSON schema).
TOOLSEARCHER: dict[str, Any] = {
    "name": "ToolSearcher",
    "description": "Searches for relevant tools in library based on the keywords.",
    "input_parameters": {
        "keywords": {"type": "str", "description": "The keyword to search for."}
    },
    "output_parameters": {
        "best_matches": {
            "type": "Union[List[dict], dict]",
            "description": "The best match tool(s).",
        }
    },
}

# Figure 6, verbatim.
GET_USER_INPUT: dict[str, Any] = {
    "name": "get_user_input",
    "description": "Not invoke any additional functions.",
    "parameters": {"type": "object", "properties": {}},
}

META_TOOL_NAME = META_TOOL["name"]
TOOLSEARCHER_NAME = TOOLSEARCHER["name"]
GET_USER_INPUT_NAME = GET_USER_INPUT["name"]
RETRIEVER_TOOL_NAMES = (META_TOOL_NAME, TOOLSEARCHER_NAME)

#: Placeholders a pre-rendered ``system`` string may hold (the loader's normalisation rules).
PLACEHOLDERS = {"{META_TOOL}": META_TOOL, "{TOOLSEARCHER}": TOOLSEARCHER, "{GET_USER_INPUT}": GET_USER_INPUT}


def retriever_tool(retriever: str) -> dict[str, Any]:
    """The open-world gateway tool: ToolSearcher for the keyword baseline, else META_TOOL."""
    return TOOLSEARCHER if retriever == "keyword" else META_TOOL


def render_tools(tools: list[dict[str, Any]], indent: int | None = 2) -> str:
    """The ``{TOOLS}`` block: a fenced JSON list (``[ ]`` when empty, as in Figure 19)."""
    body = json.dumps(tools, indent=indent, ensure_ascii=False) if tools else "[ ]"
    return f"```\n{body}\n```"


def instruction_tools(
    tools: list[dict[str, Any]],
    *,
    open_world: bool,
    retriever: str = "meta_tool",
    list_get_user_input: bool = False,
) -> list[dict[str, Any]]:
    """The tool list of the instruction: the retriever tool first in open-world (dropped in
    closed-world), then the dialogue's tools; get_user_input only for the Table 5 ablation."""
    out = [retriever_tool(retriever)] if open_world else []
    out.extend(tools)
    if list_get_user_input:
        out.append(GET_USER_INPUT)
    return out


def render_instruction(tools: list[dict[str, Any]], indent: int | None = 2) -> str:
    return INSTRUCTION_TEMPLATE.replace("{TOOLS}", render_tools(tools, indent))


def fill_placeholders(system: str, retriever: str = "meta_tool", indent: int | None = 2) -> str:
    """A pre-rendered instruction with ``{META_TOOL}``-style placeholders filled in; in the
    keyword baseline the META_TOOL slot holds ToolSearcher."""
    for placeholder, tool in PLACEHOLDERS.items():
        if placeholder == "{META_TOOL}":
            tool = retriever_tool(retriever)
        system = system.replace(placeholder, json.dumps(tool, indent=indent, ensure_ascii=False))
    return system
