"""ToolBeHonest data and prompts: the loader takes the upstream schema unchanged (unknown keys
too), malformed records fail in one line naming file and index, and the six prompts per record
are byte-exact (hashes of the prompts built from the literals of
upstream ``utils/generation_prompt.py``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks.dataset_errors import DatasetError, DatasetWarning
from pytest_toolbench.benchmarks.toolbehonest.benchmark import TOOLBEHONEST
from pytest_toolbench.benchmarks.toolbehonest.prompts import (
    DETECTING_EN,
    DETECTING_ZH,
    DIAGNOSING_EN,
    DIAGNOSING_ZH,
    PLANNING_EN,
    PLANNING_ZH,
    build_prompt,
)
from pytest_toolbench.benchmarks.toolbehonest.schema import (
    REQUIRED_KEYS,
    SUBTASKS,
    group_by_subtask,
    load_toolbehonest_file,
    parse_tool_string,
)
from pytest_toolbench.benchmarks.toolbehonest.tooldb import build_tool_database

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "toolbehonest" / "sample_en.json"


@pytest.fixture(scope="module")
def raw() -> list[dict]:
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "test_en.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_sample_has_two_records_per_subtask_in_the_upstream_schema(raw):
    records = load_toolbehonest_file(SAMPLE)
    groups = group_by_subtask(records)
    assert list(groups) == list(SUBTASKS)  # first-appearance order = upstream's
    assert all(len(g) >= 2 for g in groups.values())
    for item in raw:
        assert tuple(item)[:7] == REQUIRED_KEYS
        assert isinstance(item["tools"], str) and isinstance(item["planning_tools"], list)
        assert item["task"] != item["unsolvable_task"] or item["tools"] != item["unsolvable_tools"]
        assert "UnsolvableQuery" in item["planning_tools_unsolvable"]
    assert records[-1].model_extra == {"id": "extra-key-kept"}  # unknown key tolerated


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("tools"), "missing keys ['tools']"),
        (lambda r: r.update(planning_tools="A\nB"), "planning_tools"),
        (lambda r: r.update(subtask="multi_step"), "unknown subtask 'multi_step'"),
        (lambda r: r.update(tools=["1. A: x"]), "tools"),
    ],
)
def test_malformed_record_is_a_one_line_error_with_file_and_index(tmp_path, raw, mutate, message):
    data = [dict(r) for r in raw[:3]]
    mutate(data[2])
    path = write(tmp_path, data)
    with pytest.raises(DatasetError) as info:
        load_toolbehonest_file(path)
    text = str(info.value)
    assert "\n" not in text and str(path) in text and "record #2" in text and message in text


def test_file_level_errors(tmp_path, raw):
    with pytest.raises(DatasetError, match=r"top level must be a JSON list"):
        load_toolbehonest_file(write(tmp_path, {"a": 1}))
    bad = tmp_path / "bad.json"
    bad.write_text("[{]", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"line 1 column 3"):
        load_toolbehonest_file(bad)


def test_identical_records_are_a_warning_and_keep_their_positions(tmp_path, raw):
    """Upstream runs such a file (``task_items.index`` hands the copy the first result), so it
    is a DatasetWarning, not an error; both copies keep their own position and cases."""
    path = write(tmp_path, [raw[0], raw[1], raw[0]])
    with pytest.warns(DatasetWarning, match=r"record #2: identical to record #0"):
        records = load_toolbehonest_file(path)
    assert records[0] == records[2] and len(group_by_subtask(records)["single_step"]) == 3


def test_record_upstream_would_crash_on_is_a_warning(tmp_path, raw):
    data = [dict(raw[0], planning_tools_unsolvable=["WeatherForecast", "Finish"])]
    with pytest.warns(DatasetWarning, match="no UnsolvableQuery"):
        load_toolbehonest_file(write(tmp_path, data))


def test_plan_of_only_finish_is_a_warning_not_a_file_error(tmp_path, raw):
    """Upstream loads it and crashes only when scoring that record's L2/L3 progress rate; the
    per-case scoring of such a record is in test_toolbehonest_scoring.py."""
    data = [dict(r) for r in raw[:3]]
    data[2]["planning_tools"] = ["Finish"]
    with pytest.warns(DatasetWarning, match=r"record #2: planning_tools is empty after dropping"):
        records = load_toolbehonest_file(write(tmp_path, data))
    assert len(records) == 3 and records[2].gold(True) == []


def test_tool_string_parsing_keeps_upstream_quirks():
    pairs = parse_tool_string("1. A: first\n2. B : spaced\n3.C：full-width colon\nno number: x")
    assert pairs == [("A", "first"), ("B ", "spaced"), ("C", "full-width colon")]


def test_tool_database_keeps_every_records_tools_with_duplicates():
    db = build_tool_database(load_toolbehonest_file(SAMPLE))
    single = db["single_step"]
    # records 0, 1 and the extra record (a copy of record 0's tools): 5 + 5 + 5 lines
    assert len(single.names) == 15
    assert single.names.count("WeatherForecast") == 2 and single.names.count("Finish") == 3


def test_data_sources_reports_the_bundled_file():
    (source,) = TOOLBEHONEST.data_sources(None)
    assert source.path.name == "sample_en.json" and source.bundled is True
    assert source.records == 15 and source.benchmark == "toolbehonest"
    assert source.sha256 == hashlib.sha256(SAMPLE.read_bytes()).hexdigest()


def test_real_file_name_is_preferred_and_selection_keeps_positions(tmp_path, raw):
    folder = tmp_path / "toolbehonest"
    folder.mkdir()
    (folder / "test_en.json").write_text(json.dumps(raw[2:6]), encoding="utf-8")
    cases = TOOLBEHONEST.load_cases(tmp_path, ("MNT",))
    assert [c.sample_id for c in cases[::6]] == [
        "multi_step_wo_rep-0", "multi_step_wo_rep-1", "multi_step_w_rep-0", "multi_step_w_rep-1"
    ]
    assert cases[1].id == "toolbehonest-multi_step_wo_rep-0-L1-unsolvable"
    assert cases[1].labels == {
        "level": 1, "subtask": "multi_step_wo_rep", "solvable": False, "variant": "unsolvable"
    }
    assert {c.scenario for c in cases} == {"MNT"}


# --------------------------------------------------------------------------- prompts


@pytest.mark.parametrize(
    ("prompt", "length", "sha"),
    [
        (DETECTING_EN, 588, "952d58a41e5994e8248297dfe443cbf0030c48ad1cc9dd31b096451a63da309b"),
        (PLANNING_EN, 1187, "76010e392fd35bf9a4051bd8024f19a3960df24c86b2099bc91c43e4b90f84fd"),
        (DIAGNOSING_EN, 1621, "7d722e9ed63876d51aab4994cbb215d02fdcd0d89d1e7892213160754725a5c0"),
    ],
)
def test_english_prompts_are_byte_exact(prompt, length, sha):
    assert len(prompt) == length
    assert hashlib.sha256(prompt.encode("utf-8")).hexdigest() == sha


@pytest.mark.parametrize(
    ("prompt", "length", "sha"),
    [
        (DETECTING_ZH, 281, "d203fd483c8405fb6460c7a6d159d0abcb123f435a532a6cd21d99e2d0bd502d"),
        (PLANNING_ZH, 535, "405380fcdf26a5c28ac6630676834da6c4b0b2bbcbd92b67f30978f1bc18f741"),
        (DIAGNOSING_ZH, 1005, "ef168d153dec4c2354a980d00e032a94226af4ce1e716c25735a29522afe6b75"),
    ],
)
def test_chinese_prompts_are_pinned_byte_exact(prompt, length, sha):
    """No Chinese text or hash is published beside the code. These pins are of the current constants, which an
    audit verified by a differential check against upstream ``utils/generation_prompt.py``
    (``_detecting_zh``, ``_planning_zh``, ``_diagnosing_zh``); any edit must be re-verified."""
    assert len(prompt) == length
    assert hashlib.sha256(prompt.encode("utf-8")).hexdigest() == sha


def test_chinese_sample_follows_the_upstream_schema():
    """data/toolbehonest/sample_zh.json: one record per scenario, full-width colons in the tool
    lines (upstream's regex accepts ``：``), the pseudo-tools keep their English names."""
    path = REPO / "data" / "toolbehonest" / "sample_zh.json"
    records = load_toolbehonest_file(path)
    assert {r.scenario for r in records} == {"MNT", "PT", "LFT"}
    for raw_record, record in zip(json.loads(path.read_text(encoding="utf-8")), records):
        assert tuple(raw_record) == REQUIRED_KEYS
        assert "：" in record.tools and not record.validation_warnings()
        provided = record.provided_tools()
        assert all(t in provided for t in record.planning_tools + record.planning_tools_unsolvable)
    assert records[0].provided_tools()["WeatherForecast"] == "返回指定城市和日期的逐小时天气预报。"


def test_prompt_quirks():
    assert "\\“\n\\”" in PLANNING_EN
    assert "UnsovlableQuery" in DIAGNOSING_EN and "<provided_tool>" in DIAGNOSING_EN
    assert ". \n If the task" in DETECTING_EN


def test_six_prompts_per_record(raw):
    record = load_toolbehonest_file(SAMPLE)[2]
    r = raw[2]
    assert build_prompt(record, 1, True) == (
        f"{DETECTING_EN}\n\n<task>\n{r['task']}\n</task>\n<provided_tools>\n{r['tools']}\n</provided_tools>"
    )
    # the L1 unsolvable prompt alone has a blank line before <provided_tools>
    assert build_prompt(record, 1, False) == (
        f"{DETECTING_EN}\n\n<task>\n{r['unsolvable_task']}\n</task>\n\n<provided_tools>\n"
        f"{r['unsolvable_tools']}\n</provided_tools>"
    )
    for level, p in ((2, PLANNING_EN), (3, DIAGNOSING_EN)):
        assert build_prompt(record, level, True) == (
            f"{p}\n\n<task>\n{r['task']}\n</task>\n<provided_tools>\n{r['tools']}\n</provided_tools>"
        )
        assert build_prompt(record, level, False) == (
            f"{p}\n\n<task>\n{r['unsolvable_task']}\n</task>\n<provided_tools>\n"
            f"{r['unsolvable_tools']}\n</provided_tools>"
        )
    zh = build_prompt(record, 3, False, "zh")
    assert zh.startswith("请根据 <task> 中的任务描述") and "并使用对应不可解决的工具UnsolvableQuery" in zh
