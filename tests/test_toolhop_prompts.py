"""Prompts are byte-exact copies of upstream's ``code/evaluation_*.py`` prompts (typo included), and the tool list."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks.dataset_errors import DatasetWarning
from pytest_toolbench.benchmarks.toolhop.prompts import (
    DIRECT_PROMPT,
    FREE_PROMPT,
    MANDATORY_PROMPT,
    build_messages,
    build_tools,
)
from pytest_toolbench.benchmarks.toolhop.schema import load_toolhop_file

from shared_data import BUNDLED_TOOLHOP as BUNDLED, REAL_TOOLHOP as REAL80

# Copied by hand from upstream code/evaluation_*.py, not imported: the test must fail if the module drifts.
SPEC_DIRECT = "You will be asked a question, and should provide a short answer.\nIf the answer is a date, format is as follows: YYYY-MM-DD (ISO standard)\nIf the answer is a name, format it as follows: Firstname Lastname\nIf the answer contains any number, format it as a number, not a word, and only output that number. Do not include leading 0s.\n\nPlease provide the answer in the following format: <answer>your answer here</answer>\nAnswer as short as possible.\nQuestion: {question}"
SPEC_MANDATORY = "You will be asked a question with some tools, and should provide a short final answer.\nPlease note that you must call the tool at every step, you must not use your own knowledge. Your final answer must also be returned from the tool.\nIf the final answer is a date, format is as follows: YYYY-MM-DD (ISO standard)\nIf the final nswer is a name, format it as follows: Firstname Lastname\nIf the final answer contains any number, format it as a number, not a word, and only output that number. Do not include leading 0s.\n\nPlease provide the final answer in the following format: <answer>final answer here</answer>\nAnswer as short as possible.\nQuestion: {question}"
SPEC_FREE = "You will be asked a question with some tools, and should provide a short final answer.\nIf the final answer is a date, format is as follows: YYYY-MM-DD (ISO standard)\nIf the final nswer is a name, format it as follows: Firstname Lastname\nIf the final answer contains any number, format it as a number, not a word, and only output that number. Do not include leading 0s.\n\nPlease provide the final answer in the following format: <answer>final answer here</answer>\nAnswer as short as possible.\nQuestion: {question}"


def test_prompts_are_byte_exact():
    assert DIRECT_PROMPT == SPEC_DIRECT
    assert MANDATORY_PROMPT == SPEC_MANDATORY
    assert FREE_PROMPT == SPEC_FREE
    for prompt in (MANDATORY_PROMPT, FREE_PROMPT):
        assert "If the final nswer is a name" in prompt  # upstream typo kept
    assert len(DIRECT_PROMPT.encode()) == 465
    assert len(MANDATORY_PROMPT.encode()) == 658
    assert len(FREE_PROMPT.encode()) == 511


def test_mandatory_and_free_differ_only_in_the_second_sentence():
    m = MANDATORY_PROMPT.split("\n")
    f = FREE_PROMPT.split("\n")
    assert m[0] == f[0] and m[2:] == f[1:]
    assert m[1].startswith("Please note that you must call the tool at every step")


@pytest.mark.parametrize(
    "scenario, prompt", [("direct", SPEC_DIRECT), ("mandatory", SPEC_MANDATORY), ("free", SPEC_FREE)]
)
def test_one_user_message_no_system_prompt(scenario, prompt):
    question = "What is {the} year? {question}"  # braces must survive untouched
    messages = build_messages(scenario, question)
    assert messages == [{"role": "user", "content": prompt.format(question=question)}]
    assert messages[0]["content"].endswith("\nQuestion: What is {the} year? {question}")


def test_unknown_scenario_is_rejected():
    with pytest.raises(ValueError, match="unknown ToolHop scenario 'react'"):
        build_messages("react", "q")


def _records(path: Path):
    if not path.exists():
        pytest.skip(f"{path} not available")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        return load_toolhop_file(path)


def test_tools_follow_file_order_and_pass_schemas_verbatim():
    raw = {r["id"]: r for r in json.loads(REAL80.read_text())} if REAL80.exists() else {}
    for record in _records(REAL80):
        tools = build_tools(record, "mandatory")
        assert tools == [{"type": "function", "function": doc} for doc in raw[record.id]["tools"].values()]
        assert [t["function"]["name"] for t in tools] == record.tool_names
        assert build_tools(record, "free") == tools
        assert build_tools(record, "direct") is None
        # a shallow copy: mutating the request's doc must not touch the record
        tools[0]["function"]["name"] = "changed"
        assert record.tool_docs[0]["name"] != "changed"


def test_tools_keep_union_types_and_duplicates():
    record = next(r for r in _records(BUNDLED) if r.id == 9006)
    names = [t["function"]["name"] for t in build_tools(record)]
    assert names.count("element_property_lookup") == 2  # sent twice, as upstream does
    r9001 = next(r for r in _records(BUNDLED) if r.id == 9001)
    union = build_tools(r9001)[1]["function"]["parameters"]["properties"]["full_name"]
    assert union["type"] == ["string", "array"]
