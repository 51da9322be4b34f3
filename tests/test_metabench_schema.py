"""The Meta-Bench loader: the bundled sample, derived turn kinds and gold retrieval, both raw
shapes (fields.py), and one-line errors naming file and line/record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks.dataset_errors import DatasetError
from pytest_toolbench.benchmarks.metabench.benchmark import METABENCH, SCENARIOS
from pytest_toolbench.benchmarks.metabench.schema import load_dialogues

REPO = Path(__file__).resolve().parents[1]


def test_bundled_sample_covers_every_scenario_of_the_paper():
    dialogues = METABENCH.load_dialogues(None)
    present = {d.scenario for d in dialogues}
    assert present == set(SCENARIOS) and len(SCENARIOS) == 10  # the paper's "ten scenarios"
    cases = METABENCH.load_cases(None, SCENARIOS)
    assert len({c.id for c in cases}) == len(cases) == 45
    fm = next(d for d in dialogues if d.id == "hard/open-world/function_missing/0001")
    assert [m.turn_kind for m in fm.messages if m.role == "assistant"] == ["meta_tool", "call", "chat", "meta_tool", "call", "chat"]
    assert fm.judged_turns == [1, 3, 7, 9]  # final prose replies are not judged outside chat
    assert fm.gold_tools(1) == ["get_air_quality_index", "get_uv_index"]
    assert fm.gold_tools(7) == ["get_pollen_count"]
    case = next(c for c in cases if c.sample_id == fm.id)
    assert case.labels == {"category": "function_missing", "difficulty": "hard", "world": "open", "turn_kind": "meta_tool"}


def write(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / "metabench"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_sharegpt_record_is_normalised_and_axes_come_from_the_path(tmp_path):
    record = {
        "system": "Given the following functions\n```\n[\n{META_TOOL}\n]\n```\n",
        "conversations": [
            {"from": "human", "value": "Traffic in Miami?"},
            {"from": "gpt", "value": 'Need a tool.<|python_tag|>[{"name": "meta_tool", "parameters": {"tool_description": "traffic", "param_description": ["city"]}}]'},
            {"from": "observation", "value": json.dumps([{"name": "meta_tool", "function_id": 0, "results": {"name": "get_traffic_report", "description": "Get the current traffic report", "parameters": {"type": "object", "properties": {}, "required": []}}}])},
            {"from": "gpt", "value": '[{"name": "get_traffic_report", "parameters": {"location": "Miami"}}]'},
        ],
        "id": "0007",
    }
    folder = tmp_path / "metabench" / "simple" / "open-world"
    folder.mkdir(parents=True)
    (folder / "function_missing.json").write_text(json.dumps([record]))
    [d] = load_dialogues(tmp_path / "metabench")
    assert (d.difficulty, d.openness, d.category) == ("simple", "open-world", "function_missing")
    assert [m.turn_kind for m in d.messages if m.role == "assistant"] == ["meta_tool", "call"]
    assert d.messages[1].content == "Need a tool."
    assert d.gold_tools(1) == ["get_traffic_report"]
    assert d.tools == []


def test_gold_chat_answer_showing_json_stays_a_chat_turn(tmp_path):
    """glaive's chat answers include code examples (paper A.2). Read from text, such a gold
    answer is a chat turn: only a real invocation (bare call JSON, a python tag) makes a call
    turn. The loose reading made it a call turn expecting a call to "John"."""
    example = 'Here you go:\n```json\n{"name": "John", "age": 30}\n```'
    record = {"id": "0001", "conversations": [
        {"from": "human", "value": "Show me a JSON object for a person."},
        {"from": "gpt", "value": example},
        {"from": "human", "value": "And the weather in Lisbon?"},
        {"from": "gpt", "value": '[{"name": "get_weather_forecast", "parameters": {"city": "Lisbon"}}]'}]}
    folder = tmp_path / "metabench" / "simple" / "open-world"
    folder.mkdir(parents=True)
    (folder / "function_existing.json").write_text(json.dumps([record]))
    [d] = load_dialogues(tmp_path / "metabench")
    assert [(m.turn_kind, m.content) for m in d.messages if m.role == "assistant"] == [("chat", example), ("call", None)]
    bundled = next(d for d in METABENCH.load_dialogues(None) if d.id == "simple/open-world/chat/0003")
    assert [m.turn_kind for m in bundled.messages if m.role == "assistant"] == ["chat"]
    assert '{"name": "John", "age": 30}' in bundled.messages[1].content


def test_bad_jsonl_line_names_file_and_line(tmp_path):
    folder = write(tmp_path, "x.jsonl", '{"id": "a"\n')
    with pytest.raises(DatasetError) as err:
        load_dialogues(folder)
    assert str(err.value).startswith(f"{folder / 'x.jsonl'} line 1 column")
    assert "\n" not in str(err.value)


def test_invalid_record_names_line_and_id(tmp_path):
    good = json.dumps({"id": "ok", "difficulty": "simple", "openness": "open-world", "category": "chat",
                       "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    bad = json.dumps({"id": "bad", "difficulty": "simple", "openness": "closed-world", "category": "function_missing",
                      "messages": [{"role": "user", "content": "hi"}]})
    folder = write(tmp_path, "x.jsonl", good + "\n" + bad + "\n")
    with pytest.raises(DatasetError) as err:
        load_dialogues(folder)
    msg = str(err.value)
    assert msg.startswith(f"{folder / 'x.jsonl'} (id=bad) line 2: ")
    assert "function_missing" in msg and "\n" not in msg


def test_json_list_record_index_and_meta_tool_without_gold(tmp_path):
    rec = {"id": "m", "difficulty": "hard", "openness": "open-world", "category": "function_missing",
           "messages": [{"role": "user", "content": "q"},
                        {"role": "assistant", "tool_calls": [{"name": "meta_tool", "parameters": {"tool_description": "t", "param_description": []}}]}]}
    folder = write(tmp_path, "x.json", json.dumps([rec]))
    with pytest.raises(DatasetError, match=r"x\.json record #0 \(id=m\): .*meta_tool turn 1 has no gold retrieved tool"):
        load_dialogues(folder)


def _record(**extra):
    rec = {"id": "r", "difficulty": "simple", "openness": "open-world", "category": "function_missing",
           "messages": [{"role": "user", "content": "q"},
                        {"role": "assistant", "tool_calls": [{"name": "meta_tool", "parameters": {"tool_description": "t", "param_description": []}}]},
                        {"role": "tool", "content": [{"name": "meta_tool", "function_id": 0, "results": {"name": "gold", "description": "g"}}]}]}
    rec.update(extra)
    return rec


def test_message_style_system_role_is_lifted_into_system(tmp_path):
    rec = _record()
    rec["messages"].insert(0, {"role": "system", "content": "Given the following functions\n```\n[{META_TOOL}]\n```"})
    [d] = load_dialogues(write(tmp_path, "x.jsonl", json.dumps(rec) + "\n"))
    assert d.system.startswith("Given the following functions")
    assert [m.role for m in d.messages] == ["user", "assistant", "tool"]
    assert d.gold_tools(1) == ["gold"]


def test_tool_pool_naming_an_unknown_tool_fails_at_load_time(tmp_path):
    other = _record(id="o", tools=[{"name": "defined_elsewhere", "description": "d"}])
    ok = _record(id="ok", tool_pool=["gold", "defined_elsewhere", {"name": "inline", "description": "i"}])
    bad = _record(id="bad", tool_pool=["gold", "no_such_tool"])
    folder = write(tmp_path, "x.jsonl", "\n".join(json.dumps(r) for r in (other, ok, bad)) + "\n")
    with pytest.raises(DatasetError) as err:
        load_dialogues(folder)
    msg = str(err.value)
    assert msg.startswith(f"{folder / 'x.jsonl'} (id=bad) line 3: ") and "'no_such_tool'" in msg and "\n" not in msg
    folder = write(tmp_path, "x.jsonl", "\n".join(json.dumps(r) for r in (other, ok)) + "\n")
    assert [d.id for d in load_dialogues(folder)] == ["o", "ok"]
    lacking = _record(id="lacking", tool_pool=["defined_elsewhere"])
    folder = write(tmp_path, "x.jsonl", "\n".join(json.dumps(r) for r in (other, lacking)) + "\n")
    with pytest.raises(DatasetError, match=r"\(id=lacking\) line 2: tool_pool lacks invoked tool 'gold'"):
        load_dialogues(folder)


def test_closed_world_call_category_follows_difficulty(tmp_path):
    rec = {"id": "c", "difficulty": "simple", "openness": "closed-world", "category": "multi_tool_call",
           "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [{"name": "f", "parameters": {}}]}]}
    with pytest.raises(DatasetError, match=r"'multi_tool_call' does not exist in simple .*'single_tool_call'"):
        load_dialogues(write(tmp_path, "x.json", json.dumps([rec])))


def test_tool_turn_keys_live_in_fields():
    from pytest_toolbench.benchmarks.metabench import conversation, schema
    from pytest_toolbench.benchmarks.metabench.fields import retrieved_tools, tool_result_entry

    entry = tool_result_entry("meta_tool", 1, [{"name": "a"}, {"name": "b"}])
    assert entry == {"name": "meta_tool", "function_id": 1, "results": [{"name": "a"}, {"name": "b"}]}
    assert [t["name"] for t in retrieved_tools([entry, {"name": "x", "results": {"name": "c"}}])] == ["a", "b", "c"]
    for module in (schema, conversation):  # the raw keys are spelled only in fields.py
        source = Path(module.__file__).read_text(encoding="utf-8")
        assert '"results"' not in source and '"function_id"' not in source
