"""ReplayModel and append_recording: saved replies come back in order; mismatches are errors."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from pathlib import Path

import pytest

from pytest_toolbench.models.base import CallContext, ChatRequest, ModelCallError
from pytest_toolbench.models.replay import ReplayFormatError, ReplayModel, append_recording

REQUEST = ChatRequest(messages=[{"role": "user", "content": "q"}])
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
FIRST = {"role": "assistant", "content": None, "tool_calls": [CALL]}
SECOND = {"role": "assistant", "content": "The answer is 42."}


def ask(model: ReplayModel, case_id: str, turn: int):
    return asyncio.run(model.complete(REQUEST, CallContext(case_id=case_id, turn=turn)))


def test_record_then_replay_in_order(tmp_path):
    path = tmp_path / "rec" / "run.jsonl"
    append_recording(path, "case-a", [FIRST, SECOND])
    append_recording(path, "case-b", [SECOND])
    model = ReplayModel(path)
    assert ask(model, "case-a", 0).message == FIRST
    assert ask(model, "case-a", 1).message == SECOND
    assert ask(model, "case-b", 0).content == "The answer is 42."
    assert ask(model, "case-a", 0).parse_failure is None
    assert model.describe()["replay_cases"] == 2


def test_replay_flags_parse_failures_like_a_live_backend(tmp_path):
    path = tmp_path / "run.jsonl"
    append_recording(path, "c", [{"role": "assistant",
                                  "content": '[TOOL_CALLS] [{"name": "f", "arguments": {}}]'}])
    assert ask(ReplayModel(path), "c", 0).parse_failure.reason == "unextracted_tool_call"


def test_missing_case_and_exhausted_replies_are_errors(tmp_path):
    path = tmp_path / "run.jsonl"
    append_recording(path, "case-a", [FIRST])
    model = ReplayModel(path)
    with pytest.raises(ModelCallError) as missing:
        ask(model, "case-zzz", 0)
    assert missing.value.kind == "replay_missing_case"
    with pytest.raises(ModelCallError) as exhausted:
        ask(model, "case-a", 1)
    assert exhausted.value.kind == "replay_exhausted"


def test_latest_recording_of_a_case_wins(tmp_path):
    path = tmp_path / "run.jsonl"
    append_recording(path, "c", [FIRST])
    append_recording(path, "c", [SECOND])
    assert ask(ReplayModel(path), "c", 0).message == SECOND


@pytest.mark.parametrize(
    "bad_line,needle",
    [
        ('{"case_id": "b", "responses": [', "invalid replay record"),
        ('{"case_id": "b"}', "responses"),
        ('{"case_id": "b", "responses": ["not a message"]}', "responses.0"),
        ('["b", []]', "invalid replay record"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, bad_line, needle):
    path = tmp_path / "broken.jsonl"
    good = json.dumps({"case_id": "a", "responses": [SECOND]})
    path.write_text(f"{good}\n\n{bad_line}\n")
    with pytest.raises(ReplayFormatError) as info:
        ReplayModel(path)
    assert f"{path}:3:" in str(info.value)
    assert needle in str(info.value)


def test_a_file_that_is_not_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "binary.jsonl"
    good = json.dumps({"case_id": "a", "responses": [SECOND]}).encode()
    path.write_bytes(good + b"\n" + good + b"\n\xff\xfe{}\n")
    with pytest.raises(ReplayFormatError) as info:
        ReplayModel(path)
    assert str(info.value).startswith(f"{path}:3: not UTF-8 text (byte {2 * len(good) + 2}: ")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ReplayFormatError, match="cannot read replay file"):
        ReplayModel(tmp_path / "nope.jsonl")


def _record_many(path: str, worker: int) -> None:
    big = {"role": "assistant", "content": "y" * 50_000}
    for i in range(30):
        append_recording(Path(path), f"w{worker}-{i}", [big, SECOND])


def test_concurrent_recorders_write_whole_lines(tmp_path):
    path = tmp_path / "run.jsonl"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_record_many, args=(str(path), w)) for w in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    model = ReplayModel(path)
    assert model.describe()["replay_cases"] == 90
    assert ask(model, "w2-29", 1).message == SECOND
