"""Every reply shape of the paper's Figures 17-19 parses into {"name", "parameters"} calls."""

from __future__ import annotations

from pytest_toolbench.benchmarks.metabench.parsing import calls_in_message, calls_in_text

TRAFFIC = {"name": "get_traffic_report", "parameters": {"location": "Miami, Florida"}}
UV = {"name": "get_uv_index", "parameters": {"location": "Sydney"}}


def test_single_object_and_list():
    assert calls_in_text('{"name": "get_traffic_report", "parameters": {"location": "Miami, Florida"}}') == [TRAFFIC]
    assert calls_in_text('[{"name": "get_traffic_report", "parameters": {"location": "Miami, Florida"}}, '
                         '{"name": "get_uv_index", "parameters": {"location": "Sydney"}}]') == [TRAFFIC, UV]


def test_objects_on_separate_lines_with_extra_keys():
    text = ('{"type": "function", "name": "get_traffic_report", "parameters": {"location": "Miami, Florida"}}\n'
            '{"type": "function", "name": "get_uv_index", "parameters": {"location": "Sydney"}}')
    assert calls_in_text(text) == [TRAFFIC, UV]


def test_reasoning_then_python_tag_and_llama_separators():
    text = ('I will call the traffic tool.<|python_tag|>[{"name": "get_traffic_report", "parameters": '
            '{"location": "Miami, Florida"}}]<|eom_id|><|start_header_id|>assistant<|end_header_id|>\n\n'
            '<python_tag>{"name": "get_uv_index", "parameters": {"location": "Sydney"}}')
    assert calls_in_text(text) == [TRAFFIC, UV]


def test_prose_is_no_call():
    assert calls_in_text("Photosynthesis turns light into chemical energy {like this}.") == []
    assert calls_in_text('The JSON {"a": 1} holds no call.') == []
    assert calls_in_text("") == []


def test_openai_tool_calls_and_arguments_strings():
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_uv_index", "arguments": '{"location": "Sydney"}'}}]}
    assert calls_in_message(message) == [UV]
    assert calls_in_text('{"name": "get_uv_index", "arguments": {"location": "Sydney"}}') == [UV]
    assert calls_in_text('{"name": "get_user_input"}') == [{"name": "get_user_input", "parameters": {}}]
