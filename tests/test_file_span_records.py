"""ToolHop records kept as byte ranges of their data file (benchmarks/packed.py FileSpanRecord):
every layout and encoding reads back exactly what validation gave, and a file changed or removed
since the run parsed it fails its case with an error naming the file, never scores other text."""

from __future__ import annotations

import json
import os
import pickle
import warnings
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks.data_source import BUNDLED_DATA_DIR
from pytest_toolbench.benchmarks.dataset_errors import DatasetError, DatasetWarning
from pytest_toolbench.benchmarks.packed import FileSpanRecord, FileSpans, PackedRecord
from pytest_toolbench.benchmarks.toolhop.schema import ToolHopRecord, load_toolhop_entries
from shared_data import REAL_TOOLHOP

BUNDLED = BUNDLED_DATA_DIR / "toolhop" / "ToolHop.json"


def bundled_records() -> list[dict]:
    return json.loads(BUNDLED.read_text(encoding="utf-8"))[:4]


def entries_of(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)  # the bundled sample's oddities, outside it
        return load_toolhop_entries(path)


def assert_reads_back(path: Path, records: list[dict], kind: type) -> None:
    entries = entries_of(path)
    assert [type(e.kept) for e in entries] == [kind] * len(records)
    assert [e.unpack() for e in entries] == [ToolHopRecord.model_validate(r) for r in records]
    # Key order and values exactly as json.loads gives them (model_construct keeps both).
    assert [json.dumps(e.unpack().model_dump(), ensure_ascii=False) for e in entries] == [
        json.dumps(r, ensure_ascii=False) for r in records]


def with_text(records: list[dict], extra: str) -> list[dict]:
    return [{**r, "question": f"{extra} {r['question']}"} for r in records]


NON_ASCII = "caf\u00e9 \u4e2d\u6587 \U0001f642 \u00a0"  # 2-, 3- and 4-byte UTF-8 characters


@pytest.mark.parametrize("layout", [
    {"indent": 4, "ensure_ascii": False},  # upstream's layout, non-ASCII as it is
    {"separators": (",", ":"), "ensure_ascii": False},  # one line, no spaces
    {"indent": 1, "ensure_ascii": True},  # non-ASCII as \\u escapes: an ASCII file
])
def test_records_are_byte_ranges_that_read_back_exactly(tmp_path, layout):
    records = [with_text([r], NON_ASCII * i)[0] for i, r in enumerate(bundled_records())]
    path = tmp_path / "data.json"
    path.write_text("\n \t" + json.dumps(records, **layout) + "\n", encoding="utf-8")
    assert_reads_back(path, records, FileSpanRecord)
    raw = path.read_bytes()
    kept = [entry.kept for entry in entries_of(path)]
    for span, record in zip(kept, records):
        assert json.loads(raw[span.start:span.start + span.size]) == record  # the record's own bytes
    # What the cases hold, and the kept and shared parses store: the records' places, one path.
    assert len({id(span.path) for span in kept}) == 1
    assert len(pickle.dumps(kept)) < len(raw) / 20


def test_real_toolhop_records_are_kept_as_byte_ranges():
    if not REAL_TOOLHOP.exists():
        pytest.skip("real ToolHop sample not available")
    records = json.loads(REAL_TOOLHOP.read_text(encoding="utf-8"))
    assert not REAL_TOOLHOP.read_text(encoding="utf-8").isascii()  # the offsets count bytes
    assert_reads_back(REAL_TOOLHOP, records, FileSpanRecord)


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_a_file_with_carriage_returns_keeps_its_records_packed(tmp_path, newline):
    """Text-mode reading turns ``\\r\\n`` and ``\\r`` into ``\\n``, so text offsets are not byte
    offsets there: those records are packed, and read back the same."""
    records = with_text(bundled_records(), NON_ASCII)
    path = tmp_path / "data.json"
    path.write_bytes(json.dumps(records, indent=2, ensure_ascii=False)
                     .replace("\n", newline).encode("utf-8"))
    assert_reads_back(path, records, PackedRecord)


def test_spans_must_be_kept_in_file_order():
    spans = FileSpans("x.json", '["\u00e9", "\u00e9"]'.encode(), '["\u00e9", "\u00e9"]')
    second = spans.keep(ToolHopRecord, '"\u00e9"', 6)  # character 6, byte 7 (the first é is 2)
    assert isinstance(second, FileSpanRecord) and (second.start, second.size) == (7, 4)
    with pytest.raises(ValueError, match="order"):
        spans.keep(ToolHopRecord, '"\u00e9"', 1)


def test_a_relative_path_is_read_from_wherever_the_case_runs(tmp_path, monkeypatch):
    records = bundled_records()
    (tmp_path / "data.json").write_text(json.dumps(records), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    entries = entries_of(Path("data.json"))
    monkeypatch.chdir(tmp_path.parent)
    assert Path(entries[0].kept.path) == tmp_path / "data.json"
    assert entries[0].unpack() == ToolHopRecord.model_validate(records[0])
    assert pickle.loads(pickle.dumps(entries[0])).unpack() == entries[0].unpack()


def _edit_in_place(path: Path, start: int) -> None:
    with open(path, "r+b") as fh:  # same inode, same size: only the bytes differ
        fh.seek(start + 20)
        byte = fh.read(1)
        fh.seek(start + 20)
        fh.write(b"X" if byte != b"X" else b"Y")


def _replace(path: Path, start: int) -> None:
    other = path.with_name("other.json")
    other.write_text(json.dumps(with_text(bundled_records(), "edited")), encoding="utf-8")
    os.replace(other, path)  # what an editor or `git checkout` does: a new file at the path


CHANGES = {
    "edited in place": (_edit_in_place, "changed since the run parsed it"),
    "truncated": (lambda path, start: os.truncate(path, start + 5), "changed since the run parsed it"),
    "replaced": (_replace, "changed since the run parsed it"),
    "removed": (lambda path, start: path.unlink(), "cannot be read again"),
    "swapped for a FIFO": (lambda path, start: (path.unlink(), os.mkfifo(path)), "cannot be read again"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_file_changed_since_it_was_parsed_is_an_error_naming_it(tmp_path, change):
    path = tmp_path / "data.json"
    path.write_text(json.dumps(bundled_records(), indent=2), encoding="utf-8")
    kept = entries_of(path)[-1].kept
    apply, message = CHANGES[change]
    apply(path, kept.start)
    with pytest.raises(DatasetError, match=message) as info:
        kept.unpack()
    assert info.value.path == path and str(path) in str(info.value)


def test_a_file_rewritten_with_the_same_bytes_still_reads(tmp_path):
    path = tmp_path / "data.json"
    text = json.dumps(bundled_records())
    path.write_text(text, encoding="utf-8")
    entries = entries_of(path)
    path.unlink()
    path.write_text(text, encoding="utf-8")
    assert entries[1].unpack() == ToolHopRecord.model_validate(bundled_records()[1])
