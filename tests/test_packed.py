"""Records kept out of Python objects until a case runs (as a byte range of their file, or
packed), and JSON arrays read a record at a time (benchmarks/packed.py): all must give back
exactly what ``json.loads`` gives."""

from __future__ import annotations

import contextlib
import json
import math
import warnings

import pytest
from pydantic import BaseModel

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.benchmarks.data_source import BUNDLED_DATA_DIR
from pytest_toolbench.benchmarks.dataset_errors import DatasetWarning
from pytest_toolbench.benchmarks.packed import (
    FileSpanRecord,
    NotAJsonArray,
    PackedRecord,
    iter_json_array,
)
from pytest_toolbench.benchmarks.toolhop.benchmark import TOOLHOP
from pytest_toolbench.benchmarks.toolhop.schema import ToolHopRecord, load_toolhop_entries
from shared_data import REAL_TOOLHOP

BUNDLED_TOOLHOP = BUNDLED_DATA_DIR / "toolhop" / "ToolHop.json"

VALID = [
    "[]",
    " \n[ \t]\r\n",
    '[1, "two", {"a": [1, 2]}, null, true]',
    '[\n  {"b": 1, "a": 2},\n  {"\\u00e9": "\\ud800"}\n]\n',
    "[NaN, -0.0, 1e400, -Infinity, 123456789012345678901234567890]",
]
MALFORMED = [
    "",
    "[",
    "[1,]",
    "[1 2]",
    "[1, 2",
    "[1] x",
    "[,1]",
    "[1,,2]",
    '[{"id": 1},\n {"id": 2,\n  "q" "x"}]',  # an error after a good record: same line and column
    "\ufeff[1]",
]


@pytest.mark.parametrize("text", VALID)
def test_items_are_what_json_loads_gives(text):
    pairs = list(iter_json_array(text))
    items = [item for item, _ in pairs]
    assert json.dumps(items) == json.dumps(json.loads(text))  # NaN-safe, key order included
    # Each item's source is its own text in the document, which parses back to the item.
    assert [json.dumps(json.loads(source)) for _, source in pairs] == [json.dumps(i) for i in items]
    assert all(source in text for _, source in pairs)


@pytest.mark.parametrize("text", MALFORMED)
def test_a_malformed_array_raises_json_loads_own_error(text):
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        list(iter_json_array(text))
    assert (got.value.msg, got.value.lineno, got.value.colno) == (
        expected.value.msg, expected.value.lineno, expected.value.colno
    )


@pytest.mark.parametrize(("text", "kind"), [('{"a": 1}', "dict"), ('"s"', "str"), ("3", "int")])
def test_valid_json_that_is_not_an_array_names_its_type(text, kind):
    with pytest.raises(NotAJsonArray, match=f"got {kind}$") as info:
        list(iter_json_array(text))
    assert info.value.found == kind


def test_items_are_parsed_one_at_a_time():
    items = iter_json_array('[1, 2, {"broken": ]')
    assert next(items) == (1, "1") and next(items) == (2, "2")
    with pytest.raises(json.JSONDecodeError):
        next(items)


class Flat(BaseModel):
    name: str
    schema_: dict[str, object]
    values: list[float]


def test_pack_round_trips_edge_values_exactly():
    raw = {"name": "\u00e9\ud800 \u4e2d", "schema_": {"z": 1, "a": 123456789012345678901234567890},
           "values": [math.nan, -0.0, math.inf, 0.1]}
    back = PackedRecord.of_value(Flat, raw).unpack()
    assert isinstance(back, Flat)
    assert back.name == raw["name"] and list(back.schema_) == ["z", "a"]
    assert back.schema_["a"] == 123456789012345678901234567890
    nan, zero, inf, tenth = back.values
    assert math.isnan(nan) and math.copysign(1, zero) == -1 and inf == math.inf and tenth == 0.1


def test_pack_refuses_a_model_with_nested_models():
    class Nested(BaseModel):
        inner: Flat | None

    with pytest.raises(TypeError, match="nested models"):
        PackedRecord.of_value(Nested, {"inner": None})


def test_real_toolhop_records_unpack_to_what_validation_gives():
    if not REAL_TOOLHOP.exists():
        pytest.skip("real ToolHop sample not available")
    text = REAL_TOOLHOP.read_text(encoding="utf-8")  # the upstream layout: indented
    pairs = list(iter_json_array(text))
    assert len(pairs) == len(json.loads(text)) == 80
    for raw, source in pairs:
        packed = PackedRecord.pack(ToolHopRecord, source)
        assert len(packed.blob) < len(source) / 3  # what the packing is for
        assert packed.unpack() == ToolHopRecord.model_validate(raw)
        assert json.dumps(packed.unpack().model_dump(), ensure_ascii=False) == json.dumps(
            raw, ensure_ascii=False
        )


def test_toolhop_cases_keep_the_record_as_its_file_holds_it_and_share_its_labels():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        cases = TOOLHOP.load_cases(None, TOOLHOP.scenarios)
    by_sample: dict[str, list[Case]] = {}
    for case in cases:
        by_sample.setdefault(case.sample_id, []).append(case)
    first = by_sample[cases[0].sample_id]
    assert [c.scenario for c in first] == list(TOOLHOP.scenarios)
    assert all(isinstance(c.stored_sample, FileSpanRecord) for c in first)
    assert all(c.labels is first[0].labels for c in first)
    record = first[0].sample
    assert isinstance(record, ToolHopRecord) and str(record.id) == first[0].sample_id
    assert first[0].labels == {"hops": record.hops, "domain": record.domain,
                               "answer_type": record.answer_type}
    assert first[1].sample == record and first[1].sample is not record  # rebuilt on each read


def test_a_record_given_as_it_is_makes_the_same_case():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        case = TOOLHOP.load_cases(None, ("direct",))[0]
    again = TOOLHOP.make_case(case.sample, "direct")
    assert (again.id, again.labels, again.sample) == (case.id, case.labels, case.sample)


def test_the_runtime_unpacks_on_the_submitting_thread_once_per_case_when_it_starts(monkeypatch):
    """The runtime unpacks a case's record once, when the case starts (not when it is queued: the
    first test queues twice --concurrency cases, and unpacking them all held back the first
    requests), on the caller's thread (the thread that also runs the case loop,
    runtime/scheduler.py)."""
    import threading

    from pytest_toolbench.results.case_result import CaseResult, Outcome

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        case = TOOLHOP.load_cases(None, ("direct",))[0]
    unpacked_on: list[str] = []
    real_unpack = FileSpanRecord.unpack

    def tracking_unpack(self):
        unpacked_on.append(threading.current_thread().name)
        return real_unpack(self)

    monkeypatch.setattr(FileSpanRecord, "unpack", tracking_unpack)
    seen: list[object] = []

    class Runner:
        async def run(self, c, model):
            seen.append(c.stored_sample)
            return CaseResult(case_id=c.id, benchmark=c.benchmark, scenario=c.scenario,
                              outcome=Outcome.PASSED)

    with toolhop_runtime(Runner(), concurrency=2) as runtime:
        first = runtime.submit(case)
        assert runtime.submit(case) is first  # resubmitted by the run-ahead window: no new work
        assert unpacked_on == []  # queued, not started
        runtime.result(case)
    assert unpacked_on == [threading.current_thread().name]
    assert len(seen) == 1 and isinstance(seen[0], ToolHopRecord) and seen[0] == case.sample
    assert isinstance(case.stored_sample, FileSpanRecord)  # the collected case stays kept


def test_the_runtime_reports_a_changed_data_file_as_a_data_error_not_a_score(tmp_path):
    """A case whose file changed since collection errors (kind ``data_error``, the file named):
    not an internal error with a traceback, and the runner never sees another record."""
    from pytest_toolbench.results.case_result import Outcome

    path = tmp_path / "data.json"
    path.write_text(BUNDLED_TOOLHOP.read_text(encoding="utf-8"), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        case = TOOLHOP.make_case(load_toolhop_entries(path)[0], "direct")
    path.write_text("[]", encoding="utf-8")
    ran: list[object] = []

    class Runner:
        async def run(self, c, model):  # pragma: no cover - must not run
            ran.append(c)

    with toolhop_runtime(Runner(), concurrency=1) as runtime:
        result = runtime.result(case)
    assert ran == []
    assert result.outcome == Outcome.ERROR and result.error is not None
    assert result.error.kind == "data_error" and str(path) in result.error.message
    assert "changed since the run parsed it" in result.error.message


@contextlib.contextmanager
def toolhop_runtime(runner, concurrency: int):
    """A case runtime whose ToolHop cases go to ``runner`` (no model is called)."""
    from pytest_toolbench.config import RunSettings
    from pytest_toolbench.runtime.case_runtime import CaseRuntime

    class Model:
        name = "m"

        async def aclose(self):
            pass

    runtime = CaseRuntime(RunSettings(model="m", backend="openai", concurrency=concurrency), Model())
    runtime.register_runner("toolhop", runner)
    try:
        yield runtime
    finally:
        runtime.close()
