"""ToolHop loader: the bundled sample, the real 80-record subset, and clear errors on bad files."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import warnings
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks.dataset_errors import DatasetError, DatasetWarning
from pytest_toolbench.benchmarks.toolhop.schema import (
    RECORD_KEYS,
    ToolHopRecord,
    check_upstream_integrity,
    load_toolhop_dir,
    load_toolhop_file,
    upstream_def_name,
)

from shared_data import BUNDLED_TOOLHOP as BUNDLED, REAL_TOOLHOP as REAL80


def load_quiet(path: Path) -> list[ToolHopRecord]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        return load_toolhop_file(path)


@pytest.fixture(scope="module")
def bundled_raw() -> list[dict]:
    return json.loads(BUNDLED.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- bundled sample


def test_bundled_sample_loads_with_expected_shape(bundled_raw):
    records = load_quiet(BUNDLED)
    assert [r.id for r in records] == [9001, 9002, 9003, 9004, 9005, 9006]
    assert [r.hops for r in records] == [3, 3, 4, 5, 6, 7]
    assert len({r.domain for r in records}) == 6
    assert {r.answer_type for r in records} >= {"number", "date", "letter", "string"}
    for raw in bundled_raw:
        assert tuple(raw) == RECORD_KEYS
        assert isinstance(raw["answer"], str)
        # The last intermediate answer is the final answer, as in the real data.
        assert list(raw["sub_task"].values())[-1] == raw["answer"]


def test_bundled_sample_exercises_the_quirks(bundled_raw):
    golds = [r["answer"] for r in bundled_raw]
    assert any(g.rstrip(".0") != g for g in golds)  # rstrip('.0') quirk
    props = [
        prop
        for r in bundled_raw
        for doc in r["tools"].values()
        for prop in doc["parameters"]["properties"].values()
    ]
    assert any(isinstance(p.get("type"), list) for p in props)  # union type
    assert any("enum" in p for p in props)
    assert any("default" in p for p in props)
    sources = [s for r in bundled_raw for s in r["functions"]]
    live_examples = [
        s for s in sources if "\n\n# Example usage" in s and "\nprint(" in s.split("# Example usage")[1]
    ]
    assert live_examples
    for s in sources:
        assert s.startswith("def ")
        head = s.split("\n\n# Example usage")[0]
        # stdlib only, imports inside bodies (so upstream's exec-in-a-function quirk cannot bite)
        assert not any(line.startswith(("import ", "from ")) for line in head.splitlines())


def test_a_duplicate_tool_name_is_a_warning_not_an_error(tmp_path):
    """The same bytes outside the bundled folder: a user's file with record 9006 warns."""
    copy = tmp_path / "ToolHop.json"
    copy.write_bytes(BUNDLED.read_bytes())
    with pytest.warns(DatasetWarning, match=r"id=9006: duplicate tool names \['element_property_lookup'\]"):
        records = load_toolhop_file(copy)
    assert records[-1].tool_names.count("element_property_lookup") == 2


def test_the_bundled_sample_loads_without_warnings():
    """Its duplicate tool name (9006) is there on purpose: no warning before every demo run."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        records = load_toolhop_file(BUNDLED)
    assert records[-1].tool_names.count("element_property_lookup") == 2


#: The arguments a perfect agent passes at each hop (ToolHop ships no gold call trace).
GOLD_CALLS = {
    9001: [
        {"film_title": "Jaws"},
        {"full_name": "Steven Spielberg"},
        {"text": "Steven"},
    ],
    9002: [
        {"landmark": "Eiffel Tower"},
        {"number": 1889},
        {"a": 26, "b": 10, "operation": "multiply"},
    ],
    9003: [
        {"opera_title": "The Magic Flute"},
        {"person_name": "Wolfgang Amadeus Mozart"},
        {"start_date": "1756-01-27", "days": 30},
        {"date": "1756-02-26", "years": -1},
    ],
    9004: [
        {"title": "Don Quixote"},
        {"person": "Miguel de Cervantes"},
        {"country": "Spain"},
        {"input_string": "Madrid"},
        {"text": "dirdaM"},
    ],
    9005: [
        {"tournament": "FIFA World Cup", "year": 2010},
        {"player_name": "Andres Iniesta"},
        {"numbers": [6, 3]},
        {"player_name": "Andres Iniesta", "season_year": 2010},
        {"text": "Barcelona"},
        {"dividend": 18, "divisor": 9},
    ],
    9006: [
        {"scientist": "Marie Curie", "naming_origin": "country"},
        {"element_name": "Polonium", "property": "symbol"},
        {"text": "Po"},
        {"element_name": "Polonium", "property": "atomic_number"},
        {"number": 84},
        {"sequence": "1010100"},
        {"parts": ["P", "0010101"]},
    ],
}


def call_like_upstream(record: ToolHopRecord, name: str, args: dict):
    """Exec every source defining ``name`` in order (the last wins), then call it."""
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for src in record.functions:
            if upstream_def_name(src) == name:
                exec(src, namespace)  # trusted: our own bundled sample
        return namespace[name](**args)


@pytest.mark.parametrize("record_id", sorted(GOLD_CALLS))
def test_bundled_chain_reaches_the_gold(record_id):
    record = next(r for r in load_quiet(BUNDLED) if r.id == record_id)
    calls = GOLD_CALLS[record_id]
    assert len(calls) == record.hops
    for (question, expected), doc, args in zip(record.sub_task.items(), record.tool_docs, calls):
        props = doc["parameters"]["properties"]
        assert set(args) <= set(props) and set(doc["parameters"]["required"]) <= set(args)
        result = call_like_upstream(record, doc["name"], args)
        assert str(result) == expected, question
    assert str(result) == record.answer


# --------------------------------------------------------------------------- real records


@pytest.fixture(scope="module")
def real80() -> tuple[list[dict], list[ToolHopRecord]]:
    if not REAL80.exists():
        pytest.skip("real ToolHop sample not available")
    return json.loads(REAL80.read_text(encoding="utf-8")), load_quiet(REAL80)


def test_real_records_load_unchanged(real80):
    raw, records = real80
    assert len(records) == 80
    for r_raw, rec in zip(raw, records):
        dumped = rec.model_dump()
        assert tuple(dumped) == RECORD_KEYS
        # Verbatim: same content and the same key order everywhere, schemas included.
        assert json.dumps(dumped, ensure_ascii=False) == json.dumps(r_raw, ensure_ascii=False)
        assert 3 <= rec.hops <= 7


def test_real_duplicate_tool_names_are_reported(real80):
    _, records = real80
    flagged = sorted(r.id for r in records if r.validation_warnings())
    assert flagged == [127, 436, 525]


def test_integrity_check_only_applies_to_full_size_files(real80):
    _, records = real80
    assert check_upstream_integrity(REAL80, records) is None


# --------------------------------------------------------------------------- errors


def write(tmp_path: Path, data, name: str = "ToolHop.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_dataset_error_str_names_file_record_and_id():
    err = DatasetError("ToolHop.json", "answer must be a string", index=12, record_id=117)
    assert str(err) == "ToolHop.json record #12 (id=117): answer must be a string"
    assert isinstance(err, ValueError)
    assert err.location == "record #12 (id=117)"


def test_invalid_json_reports_line_and_column(tmp_path):
    path = write(tmp_path, '[\n  {"id": 1,\n   "question" "x"}\n]')
    with pytest.raises(DatasetError) as info:
        load_toolhop_file(path)
    assert (info.value.line, info.value.column) == (3, 15)
    assert str(info.value).startswith(f"{path} line 3 column 15: invalid JSON")


def test_top_level_must_be_an_array(tmp_path, bundled_raw):
    with pytest.raises(DatasetError, match="top level must be a JSON array of records, got dict$"):
        load_toolhop_file(write(tmp_path, bundled_raw[0]))


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r.update(answer=15), "answer: must be a string"),
        (lambda r: r.update(id="7"), "id: Input should be a valid integer"),
        (lambda r: r.update(extra_field=1), "unexpected keys ['extra_field']"),
        (lambda r: r.pop("domain"), "missing keys ['domain']"),
        (lambda r: r["sub_task"].popitem(), "tools and sub_task must have the same keys"),
        (lambda r: r["functions"].pop(), "functions has 2 sources but tools has 3"),
        (
            lambda r: r["functions"].__setitem__(0, "def other_tool(x):\n    return x"),
            "tool 'film_director_finder' has no 'def film_director_finder(' in functions",
        ),
        (
            lambda r: next(iter(r["tools"].values())).pop("parameters"),
            "tool 'film_director_finder' has no object 'parameters'",
        ),
    ],
)
def test_bad_record_is_named_by_file_index_and_id(tmp_path, bundled_raw, mutate, message):
    bad = copy.deepcopy(bundled_raw[0])
    mutate(bad)
    data = [copy.deepcopy(bundled_raw[1]), bad]
    path = write(tmp_path, data)
    with pytest.raises(DatasetError) as info:
        load_toolhop_file(path)
    err = info.value
    assert err.path == path and err.index == 1
    assert err.record_id == bad.get("id")
    assert message in str(err)
    assert str(err).startswith(f"{path} record #1 (id={bad.get('id')}): ")


def test_duplicate_ids_in_one_file(tmp_path, bundled_raw):
    path = write(tmp_path, [bundled_raw[0], bundled_raw[1], bundled_raw[0]])
    with pytest.raises(DatasetError, match=r"record #2 \(id=9001\): duplicate id \(also record #0\)"):
        load_toolhop_file(path)


def test_directory_loads_sorted_files_and_rejects_cross_file_duplicates(tmp_path, bundled_raw):
    write(tmp_path, [bundled_raw[2]], "b.json")
    write(tmp_path, [bundled_raw[0], bundled_raw[1]], "a.json")
    (tmp_path / "notes.txt").write_text("ignored")
    assert [r.id for r in load_toolhop_dir(tmp_path)] == [9001, 9002, 9003]
    write(tmp_path, [bundled_raw[1]], "c.json")
    with pytest.raises(DatasetError, match=r"c\.json record #0 \(id=9002\): id 9002 also appears in a\.json"):
        load_toolhop_dir(tmp_path)


def test_directory_errors(tmp_path):
    with pytest.raises(DatasetError, match="no \\*.json files"):
        load_toolhop_dir(tmp_path)
    with pytest.raises(DatasetError, match="does not exist"):
        load_toolhop_dir(tmp_path / "missing")


def test_bundled_chain_through_the_real_sandbox():
    """Same chains, executed by the real confined executor with upstream semantics."""
    pool = pytest.importorskip("pytest_toolbench.sandbox.pool")
    import asyncio

    from pytest_toolbench.benchmarks.toolhop.runner import EXECUTION_JOB
    from pytest_toolbench.config import SandboxLimits

    records = {r.id: r for r in load_quiet(BUNDLED)}

    async def walk(sandbox) -> None:
        for record_id, calls in GOLD_CALLS.items():
            record = records[record_id]
            for doc, args, expected in zip(record.tool_docs, calls, record.sub_task.values()):
                payload = {
                    "functions": record.functions,
                    "name": doc["name"],
                    "arguments": json.dumps(args),
                    "clean_namespace": False,
                }
                outcome = await sandbox.arun(EXECUTION_JOB, payload, timeout_s=10.0)
                assert outcome.status == "ok", outcome.detail
                assert outcome.value["raised"] is False, outcome.value["content"]
                result = json.loads(outcome.value["content"])
                assert str(result) == expected

    with pool.ToolSandbox(SandboxLimits(workers=1)) as sandbox:
        asyncio.run(walk(sandbox))
