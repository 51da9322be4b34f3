"""Every reply shape of the paper's Figures 17-19 and the model families' call syntaxes parse into
{"name", "parameters"} calls; JSON shown in prose or code fences is no call (the invocation reading)."""

from __future__ import annotations

from pytest_toolbench.benchmarks.metabench.parsing import calls_in_message, calls_in_text, uncounted_json

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


# A glaive-style chat answer (the paper's "writing example code" cases, A.2): it shows JSON.
CODE_EXAMPLE = ('Here is a small example:\n\n```json\n{"name": "John", "age": 30}\n```\n\n'
                "Keys are strings in double quotes.")


def test_json_in_prose_or_fences_is_no_invocation_by_default():
    """The paper's IRR counts "the invocation of any tool": JSON shown in prose, in a code fence
    or shaped like data is not one. The earlier loose reading (any_json) took each of these
    for a call, and still does when asked."""
    fenced_call = '```json\n[{"name": "get_uv_index", "parameters": {"location": "Sydney"}}]\n```'
    prose_call = 'Let me look that up: {"name": "get_uv_index", "parameters": {"location": "Sydney"}}'
    for text, loose in ((CODE_EXAMPLE, [{"name": "John", "parameters": {}}]),
                        ('{"name": "John", "age": 30}', [{"name": "John", "parameters": {}}]),
                        (fenced_call, [UV]), (prose_call, [UV])):
        assert calls_in_text(text) == [], text
        assert calls_in_message({"role": "assistant", "content": text}) == [], text
        assert calls_in_text(text, "any_json") == loose, text
        assert uncounted_json(text) == loose, text


def test_family_call_syntaxes_are_invocations():
    """Hermes/Qwen <tool_call> blocks (prose outside them allowed), Mistral [TOOL_CALLS], and a
    later Llama message with its own reasoning before the python tag."""
    hermes = ('Checking both.\n<tool_call>\n{"name": "get_traffic_report", "arguments": {"location": "Miami, Florida"}}\n'
              '</tool_call>\n<tool_call>{"name": "get_uv_index", "arguments": "{\\"location\\": \\"Sydney\\"}"}</tool_call>')
    assert calls_in_text(hermes) == [TRAFFIC, UV]
    assert calls_in_text('[TOOL_CALLS][{"name": "get_uv_index", "arguments": {"location": "Sydney"}}]') == [UV]
    llama = ('Traffic first.<|python_tag|>{"name": "get_traffic_report", "parameters": {"location": "Miami, Florida"}}'
             '<|eom_id|><|start_header_id|>assistant<|end_header_id|>\n\nNow the UV index.'
             '<|python_tag|>{"name": "get_uv_index", "parameters": {"location": "Sydney"}}<|eom_id|>')
    assert calls_in_text(llama) == [TRAFFIC, UV] and uncounted_json(llama) == []
    # After the tag only call JSON may follow; trailing prose makes that message no call.
    assert calls_in_text('Sure.<|python_tag|>{"name": "get_uv_index", "parameters": {}} Done!') == []


def test_openai_tool_calls_and_arguments_strings():
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_uv_index", "arguments": '{"location": "Sydney"}'}}]}
    assert calls_in_message(message) == [UV]
    assert calls_in_text('{"name": "get_uv_index", "arguments": {"location": "Sydney"}}') == [UV]
    assert calls_in_text('{"name": "get_user_input"}') == [{"name": "get_user_input", "parameters": {}}]
