"""The controller holds each journalled result without its bulk (results/held_results.py): what
scoring reads stays, what it does not is read back from the journal for a report that holds the
cases inline, and a reader of the left bulk fails loudly instead of reading nothing. The worker
journals' merge validates only the lines of cases the controller lacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_toolbench.results import case_store
from pytest_toolbench.results.aggregate import RunMetrics
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.held_results import (
    SESSION_END_DETAILS,
    LeftInJournal,
    held,
    is_held,
    whole_cases,
)
from pytest_toolbench.results.journal import (
    JournalError,
    ResultJournal,
    _line_case_id,
    read_journal,
    recover_missing,
)
from pytest_toolbench.results.run_record import RunInfo, RunRecord
from pytest_toolbench.results.safe_text import safe_json_bytes

#: What the session end would read of these results: the harness's own keys and a table's one.
KEEP = frozenset((*SESSION_END_DETAILS, "retriever", "cut_replies"))
PROMPT = [{"role": "system", "content": "graph " * 400}, {"role": "user", "content": "who?"}]


def result(i: int, **update: object) -> CaseResult:
    base = CaseResult(
        case_id=f"familytool-b-{i}-extract-gs", benchmark="familytool", scenario="extract-gs",
        outcome=Outcome.PASSED, labels={"hops": 2}, values={"em": 1.0, "nan": float("nan")},
        details={"extraction": {"prompt": PROMPT, "raw_output": "KG.search(...)"},
                 "endpoints": {"http://127.0.0.1:1/v1": {"requests": 1, "errors": 0}},
                 "retriever": "faiss", "cut_replies": None, "long_name": "n" * 2000,
                 "short_note": "n"},
        transcript=PROMPT, failure_message="\u202e bidi", latency_s=0.5)
    return base.model_copy(update=update)


def test_a_held_result_keeps_what_the_session_end_reads_and_refuses_reads_of_the_rest():
    whole = result(1)
    kept = held(whole, KEEP)
    assert is_held(kept) and not is_held(whole)
    assert (kept.values, kept.labels, kept.outcome, kept.latency_s, kept.failure_message) == (
        whole.values, whole.labels, whole.outcome, whole.latency_s, whole.failure_message)
    # The keys the session end reads stay (endpoint totals, a table's retriever), short or long.
    assert kept.details["endpoints"] == whole.details["endpoints"]
    assert kept.details.get("retriever") == "faiss" and kept.details.get("cut_replies") is None
    assert kept.details.get("absent", 7) == 7 and "absent" not in kept.details
    # Any other is in the journal only, short or long: reading one raises, and says where it is.
    for key in ("extraction", "long_name", "short_note"):
        assert key in kept.details
        with pytest.raises(LeftInJournal, match="journal.*report_details"):
            kept.details[key]
        with pytest.raises(LeftInJournal):
            kept.details.get(key)
    for read in (len, bool, list, lambda t: t[0]):
        with pytest.raises(LeftInJournal, match="transcript"):
            read(kept.transcript)
    # Every key at once cannot be given without the left ones: none is.
    for every_key in (len, bool, list, dict, lambda d: d.items(), lambda d: d.values(),
                      lambda d: d.keys(), lambda d: [k for k in d]):
        with pytest.raises(LeftInJournal, match="every key of details"):
            every_key(kept.details)
    # Nothing left (the session end reads every key a ToolHop result has): a plain dict.
    nothing_left = held(result(2, details={"endpoints": {}}), KEEP)
    assert dict(nothing_left.details) == {"endpoints": {}} and len(nothing_left.details) == 1
    # The result itself (a test's teardown may still read it) is untouched.
    assert whole.transcript == PROMPT and whole.details["extraction"]["prompt"] == PROMPT
    # A benchmark that does not say what its tables read keeps every key; no transcript still.
    every = held(whole, None)
    assert is_held(every) and every.details == whole.details
    with pytest.raises(LeftInJournal):
        len(every.transcript)


def test_a_benchmark_s_declared_keys_are_checked():
    from pytest_toolbench.benchmarks import registry
    from pytest_toolbench.benchmarks.base import details_read_at_session_end

    declared = {name: details_read_at_session_end(b) for name, b in registry().items()}
    assert declared["metabench"] == ("retriever", "fmd_unit", "embedder", "alpha")
    assert declared["toolhop"] == () and declared["familytool"] == ()

    class Tables:
        name = "outside"

        def report_tables(self, results):
            return []

    assert details_read_at_session_end(Tables()) is None  # says nothing: holds every key
    bad = Tables()
    bad.report_details = "retriever"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="'outside': report_details must be a tuple"):
        details_read_at_session_end(bad)


def record_of(cases: list[CaseResult]) -> RunRecord:
    return RunRecord.build(run=RunInfo(), metrics=RunMetrics(scenarios=[]), cases=cases)


def test_a_report_with_inline_cases_reads_the_held_ones_back_from_the_journal(tmp_path: Path):
    results = [result(i) for i in range(3)] + [result(3, outcome=Outcome.ERROR)]
    with case_store.run_journal(tmp_path) as journal:
        for r in results[:3]:
            journal.append_json(r.model_dump_json())
    # The last one never reached the journal (its write failed): it is held whole.
    mixed = [held(r, KEEP) for r in results[:3]] + [results[3]]
    record = record_of(mixed)
    with pytest.raises(ValueError, match="held"):  # never silently without the bulk
        record.to_json()
    expected = record_of(results).to_json()
    got = json.loads(record.to_json(cases=list(whole_cases(record.cases, tmp_path))))
    assert got["cases"][0]["transcript"] == PROMPT
    assert json.dumps(got, sort_keys=True) == json.dumps(json.loads(expected), sort_keys=True)
    assert list(got) == list(json.loads(expected))  # "cases" in its place
    # Streamed, one case at a time, the file is the same bytes as the whole record's.
    streamed = b"".join(record.json_chunks(whole_cases(record.cases, tmp_path)))
    assert streamed == record.to_json(cases=list(whole_cases(record.cases, tmp_path)))
    assert streamed == expected  # and the held cases' text is the whole results' text


@pytest.mark.parametrize("count", [0, 1, 4])
def test_a_streamed_report_is_byte_for_byte_the_whole_one(count: int):
    """Cases with what could confuse a splice: text quoting the cases entry itself (its newline
    escaped), bidi and C1 controls, NaN, empty and nested containers, non-ASCII."""
    cases = [result(i, values={"nan": float("nan"), "inf": float("-inf"), "x": 1e-7},
                    details={"empty": [], "nested": {"a": [{}], "b": "\u0085\u202e\u00e9"}},
                    failure_message='\n  "cases": []\n  ],') for i in range(count)]
    record = record_of(cases)
    dumped = [c.model_dump(mode="json") for c in cases]
    whole = record.to_json(cases=dumped)
    assert whole == record.to_json()  # the dumped values are what the record writes
    assert b"".join(record.json_chunks(iter(dumped))) == whole
    if count:
        assert b"\\u202e" in whole and "\u202e".encode() not in whole  # escaped, as the file
    assert json.loads(b"".join(record.json_chunks(dumped)))["gates"] == json.loads(whole)["gates"]


def test_a_streamed_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path):
    record = record_of([result(0)])
    target = tmp_path / "out.json"
    record.write(target)
    before = target.read_bytes()

    def failing():
        yield result(1).model_dump(mode="json")
        raise case_store.CaseStoreError("the journal went away")

    with pytest.raises(case_store.CaseStoreError, match="went away"):
        record.write(target, record.json_chunks(failing()))
    assert target.read_bytes() == before and sorted(tmp_path.iterdir()) == [target]


def test_a_held_case_the_journal_lost_is_a_clear_error(tmp_path: Path):
    with case_store.run_journal(tmp_path) as journal:
        journal.append_json(result(0).model_dump_json())
    with pytest.raises(case_store.CaseStoreError, match=r"results.jsonl: the journalled case "
                                                         r"familytool-b-1-extract-gs"):
        list(whole_cases([held(result(0), KEEP), held(result(1), None)], tmp_path))
    assert next(whole_cases([result(5)], tmp_path))["case_id"] == "familytool-b-5-extract-gs"
    # A line of a case the report needs that is no JSON past its case id: named, not a crash.
    plain = tmp_path / "killed-run"  # its journal plain, as a run killed before compaction
    plain.mkdir()
    case_store.journal_path(plain).write_bytes(result(0).model_dump_json().encode()[:300] + b"\n")
    with pytest.raises(case_store.CaseStoreError, match="familytool-b-0-extract-gs cannot be "
                                                         r"read back \("):
        list(whole_cases([held(result(0), KEEP)], plain))


def _killed_worker_journal(folder: Path, worker: str, *results: CaseResult) -> Path:
    """A worker journal as a worker killed before any compaction leaves it: its plain file."""
    path = folder / f"worker-{worker}.jsonl"
    path.write_bytes(b"".join(safe_json_bytes(r.model_dump_json().encode()) + b"\n"
                              for r in results))
    assert case_store.worker_journal_paths(folder) == [path]
    return path


def test_the_merge_validates_only_the_cases_the_controller_lacks(tmp_path: Path):
    path = _killed_worker_journal(tmp_path, "gw0", result(1), result(2, outcome=Outcome.FAILED))
    lines = path.read_bytes().splitlines()
    # A line of a case the controller has is not validated: corrupt it past its case id.
    path.write_bytes(lines[0][:200] + b"\n" + lines[1] + b"\n")
    received = {"familytool-b-1-extract-gs": held(result(1), KEEP)}
    assert recover_missing([path], received) == 1
    assert is_held(received["familytool-b-1-extract-gs"])  # not replaced by the journal's
    assert received["familytool-b-2-extract-gs"].outcome is Outcome.FAILED
    assert received["familytool-b-2-extract-gs"].transcript == PROMPT
    # The same corrupt line for a case it lacks is corruption, named by file and line.
    with pytest.raises(JournalError, match=r"worker-gw0.jsonl:1: invalid journal record"):
        recover_missing([path], {})


def test_a_line_s_case_id_is_read_as_json_reads_it():
    tricky = result(1, case_id='a"b\\c\u202e\u00e9-r1')
    line = safe_json_bytes(tricky.model_dump_json().encode())
    assert _line_case_id(line) == tricky.case_id
    # A line written otherwise (keys reordered, spaces) is not guessed at: validated whole.
    assert _line_case_id(b'{"benchmark": "x", "case_id": "c1"}') is None
    assert _line_case_id(b'{ "case_id": "c1"}') is None
    assert _line_case_id(b'{"case_id":"c1"}') == "c1"


def test_the_merge_reads_a_worker_journal_a_line_at_a_time_as_journal_lines_reads_it(tmp_path: Path):
    from pytest_toolbench.results.journal import _streamed_lines, journal_lines

    path = _killed_worker_journal(tmp_path, "gw1", *(result(i) for i in range(3)))
    with path.open("ab") as f:  # a worker killed while writing its last line
        f.write(b'\n{"case_id":"familytool-b-9-extract-gs","bench')
    with pytest.warns(UserWarning, match=r"worker-gw1.jsonl:5: skipping a truncated last journal line"):
        expected = journal_lines(path)
    with pytest.warns(UserWarning, match=r"worker-gw1.jsonl:5: skipping a truncated last journal line"):
        assert list(_streamed_lines(path)) == expected
    with pytest.warns(UserWarning):
        assert recover_missing([path], {}) == 3


def test_a_worker_journal_is_compacted_and_read_back_whole(tmp_path: Path):
    """A FamilyTool run at -n 2 peaked at 80 MB of plain worker journals for a 3 MB run folder.
    They are compacted as the run's journal is: a closed one is its .gz alone, found, counted,
    merged and removed as the plain file was."""
    with case_store.worker_journal(tmp_path, "gw0") as worker:
        for i in range(4):
            worker.append(result(i))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["worker-gw0.jsonl.gz"]
    (path,) = case_store.worker_journal_paths(tmp_path)
    assert path == tmp_path / "worker-gw0.jsonl"
    assert case_store.count_results(tmp_path) == 4
    received = {"familytool-b-1-extract-gs": held(result(1), KEEP)}
    assert case_store.merge_worker_journals(tmp_path, received, lambda r: None) == 3
    assert received["familytool-b-2-extract-gs"].transcript == PROMPT
    case_store.remove_worker_journals(tmp_path)
    assert list(tmp_path.iterdir()) == []


def _compacting(path: Path, texts: list[str], block_bytes: int) -> ResultJournal:
    journal = ResultJournal(path, compact=True, block_bytes=block_bytes, level=1, intern=False)
    for i, text in enumerate(texts):
        journal.append(result(i, transcript=[{"role": "user", "content": text}]))
        journal.flush()  # each group commit that finds a block's worth compacts it
    return journal


def test_the_merge_holds_one_member_of_a_compacted_worker_journal_at_a_time(tmp_path: Path):
    """The session end reads every worker journal through; a long run's are gigabytes of lines,
    so it must not decompress every member before reading the first."""
    import tracemalloc

    path = tmp_path / "worker-gw0.jsonl"
    texts = [f"{i} " * 12_000 for i in range(60)]  # 60 members of ~30-70 KB, 3 MB in all
    _compacting(path, texts, block_bytes=1).close()
    assert read_journal(path)[59].transcript[0]["content"] == texts[59]
    received = {f"familytool-b-{i}-extract-gs": held(result(i), KEEP) for i in range(60)}
    tracemalloc.start()
    try:
        assert recover_missing([path], received) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, peak


def test_a_worker_journal_compacted_while_the_merge_reads_it_is_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An interrupted run's worker may run on while the controller merges its journal: a
    pending file packed and removed between the listing and its read was a FileNotFoundError
    out of the session end."""
    from pytest_toolbench.results import journal as journal_module
    from pytest_toolbench.results.packed_journal import PackedJournal

    path = tmp_path / "worker-gw0.jsonl"
    writer = _compacting(path, ["a", "b", "c"], block_bytes=1 << 30)
    pending = writer._set_aside(reopen=True)  # a block renamed aside, not yet packed
    for i in (3, 4):
        writer.append(result(i))
    writer.flush()
    read_pending = journal_module._pending_chunk
    packed_meanwhile: list[Path] = []

    def pack_first(p: Path, *args: object):
        if not packed_meanwhile:  # the live writer packs it just before the read opens it
            packed_meanwhile.append(p)
            journal_module._pack_file(PackedJournal(journal_module.packed_path(path)), pending)
        return read_pending(p, *args)

    monkeypatch.setattr(journal_module, "_pending_chunk", pack_first)
    received: dict[str, CaseResult] = {}
    assert recover_missing([path], received) == 5
    assert packed_meanwhile == [pending] and not pending.exists()
    writer.close()
