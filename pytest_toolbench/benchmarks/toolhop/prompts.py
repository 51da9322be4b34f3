"""The upstream ToolHop prompts (``code/evaluation_open.py`` / ``evaluation_closed.py``), byte-exact,
and the tool list sent with them.

Fidelity matters more than polish here: the "final nswer" typo is upstream's and stays. Each
scenario sends exactly one user message, no system prompt, and no tool_choice.
"""

from __future__ import annotations

from typing import Any

from pytest_toolbench.benchmarks.toolhop.schema import ToolHopRecord

SCENARIOS = ("direct", "mandatory", "free")

# fmt: off
DIRECT_PROMPT = "You will be asked a question, and should provide a short answer.\nIf the answer is a date, format is as follows: YYYY-MM-DD (ISO standard)\nIf the answer is a name, format it as follows: Firstname Lastname\nIf the answer contains any number, format it as a number, not a word, and only output that number. Do not include leading 0s.\n\nPlease provide the answer in the following format: <answer>your answer here</answer>\nAnswer as short as possible.\nQuestion: {question}"
MANDATORY_PROMPT = "You will be asked a question with some tools, and should provide a short final answer.\nPlease note that you must call the tool at every step, you must not use your own knowledge. Your final answer must also be returned from the tool.\nIf the final answer is a date, format is as follows: YYYY-MM-DD (ISO standard)\nIf the final nswer is a name, format it as follows: Firstname Lastname\nIf the final answer contains any number, format it as a number, not a word, and only output that number. Do not include leading 0s.\n\nPlease provide the final answer in the following format: <answer>final answer here</answer>\nAnswer as short as possible.\nQuestion: {question}"
FREE_PROMPT = "You will be asked a question with some tools, and should provide a short final answer.\nIf the final answer is a date, format is as follows: YYYY-MM-DD (ISO standard)\nIf the final nswer is a name, format it as follows: Firstname Lastname\nIf the final answer contains any number, format it as a number, not a word, and only output that number. Do not include leading 0s.\n\nPlease provide the final answer in the following format: <answer>final answer here</answer>\nAnswer as short as possible.\nQuestion: {question}"
# fmt: on

PROMPTS: dict[str, str] = {
    "direct": DIRECT_PROMPT,
    "mandatory": MANDATORY_PROMPT,
    "free": FREE_PROMPT,
}


def _check_scenario(scenario: str) -> str:
    if scenario not in PROMPTS:
        raise ValueError(f"unknown ToolHop scenario {scenario!r}; expected one of {SCENARIOS}")
    return scenario


def build_messages(scenario: str, question: str) -> list[dict[str, Any]]:
    """The opening conversation: one user message with the scenario's prompt."""
    # str.replace, not str.format: a question containing braces must not break the prompt.
    content = PROMPTS[_check_scenario(scenario)].replace("{question}", question)
    return [{"role": "user", "content": content}]


def build_tools(record: ToolHopRecord, scenario: str = "mandatory") -> list[dict[str, Any]] | None:
    """OpenAI function tools from tools.values() in file order; None in Direct (no tools)."""
    if _check_scenario(scenario) == "direct":
        return None
    return [{"type": "function", "function": dict(doc)} for doc in record.tools.values()]
