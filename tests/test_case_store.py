"""A run folder stores each case once, compressed, with the texts every case repeats stored once
(results/case_store.py, journal.py, packed_journal.py, text_interning.py): round trips, torn
and killed writes, worker journals merged and removed, older run folders still read."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
import warnings
import zlib
from pathlib import Path

import pytest

from pytest_toolbench.compare.load import RunLoadError, load_record
from pytest_toolbench.results import case_store, text_interning
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.journal import (
    JournalError,
    ResultJournal,
    held_ranges,
    journal_files,
    pack_leftovers,
    packed_path,
    pending_paths,
    read_journal,
)
from pytest_toolbench.results.packed_journal import (
    Block,
    PackedJournal,
    PackedJournalError,
    read_blocks,
)
from spawned import run_in_processes

REPO = Path(__file__).resolve().parents[1]
#: What every case's prompt repeats (a knowledge graph, a tool library): far beyond MIN_LEN.
GRAPH = "".join(f"(person_{i}, knows \"person_{i + 1}\")\n" for i in range(400))
TOOLS = [{"name": f"tool_{i}", "description": "d" * 300} for i in range(5)]


def result(i: int, *, graph: str = GRAPH, outcome: Outcome = Outcome.PASSED) -> CaseResult:
    return CaseResult(
        case_id=f"c{i:04d}", benchmark="familytool", scenario="golden", outcome=outcome,
        values={"em": 1.0, "nan": float("nan")}, details={"tools": TOOLS, "question": f"q {i}"},
        transcript=[{"role": "system", "content": graph},
                    {"role": "user", "content": f"who is person_{i}? " + "x" * 600 + str(i)}],
        failure_message="\u202e bidi and \x1b[2K controls", latency_s=0.25 * i)


def same(a: list[CaseResult], b: list[CaseResult]) -> bool:
    """Equal results (NaN compared as equal: it is a value the journal must keep)."""
    return [r.model_dump_json() for r in a] == [r.model_dump_json() for r in b]


def member_payloads(path: Path) -> list[bytes]:
    data, out = path.read_bytes(), []
    while data:
        decoder = zlib.decompressobj(31)
        out.append(decoder.decompress(data))
        data = decoder.unused_data
    return out


# --- round trip -----------------------------------------------------------------------------


def test_compacted_journal_round_trips_and_stores_each_repeated_text_once(tmp_path):
    cases = [result(i) for i in range(120)]
    path = tmp_path / "results.jsonl"
    for part in range(3):  # three writers in turn (each close stores a member): texts stay once
        with ResultJournal(path, compact=True, block_bytes=40_000) as journal:
            for case in cases[40 * part:40 * (part + 1)]:
                journal.append(case)
        assert journal.compact_error is None
    # Closed: the journal is the .gz alone (no plain file, no pending file), several members
    assert journal_files(path) == [packed_path(path)]
    assert len(member_payloads(packed_path(path))) >= 3
    # one valid gzip stream, whatever reads it
    raw = gzip.decompress(packed_path(path).read_bytes())
    graph_key = text_interning.hashlib.sha256(json.dumps(GRAPH).encode()).hexdigest().encode()
    assert raw.count(text_interning.DEF + graph_key) == 1  # defined once in the whole run
    assert raw.count(text_interning.REF + graph_key) == 120  # referenced by every case
    assert json.dumps(GRAPH)[:200].encode() not in raw.replace(
        text_interning.DEF + graph_key + json.dumps(GRAPH).encode(), b"")
    back = read_journal(path)
    assert same(back, cases)
    plain = sum(len(c.model_dump_json()) + 1 for c in cases)
    assert packed_path(path).stat().st_size * 20 < plain


def test_interning_is_byte_exact_whatever_the_line_holds():
    lines = b"".join([
        b'{"a":"' + b"y" * 600 + b'","b":"' + b"z" * 10 + b'\\"' + b"w" * 700 + b'"}\n',
        b'{"n":[' + b",".join(b"1.5" for _ in range(400)) + b'],"s":"' + b"q" * 520 + b'"}\n',
        b'{"escaped":"' + b"\\\\" * 400 + b'\\"' + b"v" * 600 + b'"}\n',
    ])
    known: set[bytes] = set()
    definitions, stored = text_interning.intern_lines(lines, known)
    assert definitions and len(stored) < len(lines)
    texts, rest = text_interning.split_definitions(b"".join(definitions) + stored)
    assert text_interning.expand(rest, texts) == lines
    # a second block with the same texts defines nothing again
    known.update(text_interning.keys_of(definitions))
    again, stored_again = text_interning.intern_lines(lines, known)
    assert again == [] and stored_again == stored
    with pytest.raises(ValueError, match="raw control byte"):
        text_interning.intern_lines(b'{"a":"\x01"}\n', set())


# --- interruptions --------------------------------------------------------------------------


def test_a_torn_last_member_is_skipped_and_cut_by_the_next_writer(tmp_path):
    path = tmp_path / "results.jsonl"
    with ResultJournal(path, compact=True, block_bytes=10**9) as journal:
        for i in range(5):
            journal.append(result(i))
    whole = packed_path(path).read_bytes()
    with ResultJournal(tmp_path / "other.jsonl", compact=True) as other:
        other.append(result(99))
    torn = packed_path(tmp_path / "other.jsonl").read_bytes()
    packed_path(path).write_bytes(whole + torn[: len(torn) // 2])  # killed mid-member
    with pytest.warns(UserWarning, match=r"results\.jsonl\.gz: skipping a torn last block"):
        assert same(read_journal(path), [result(i) for i in range(5)])
    with ResultJournal(path, compact=True) as journal:  # a later writer cuts it first
        journal.append(result(5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert same(read_journal(path), [result(i) for i in range(6)])


def test_a_corrupt_member_before_the_end_is_an_error_not_an_interruption(tmp_path):
    path = tmp_path / "results.jsonl"
    with ResultJournal(path, compact=True) as journal:
        journal.append(result(0))
    data = bytearray(packed_path(path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    packed_path(path).write_bytes(bytes(data) + bytes(data))
    with pytest.raises((PackedJournalError, JournalError), match=r"results\.jsonl\.gz"):
        read_journal(path)


def test_a_killed_compacting_writer_keeps_every_line_it_wrote(tmp_path):
    """SIGKILL at any point: each line is in the plain file, a pending file or a member."""
    path = tmp_path / "results.jsonl"
    code = (
        "import os, sys, time\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from test_case_store import result\n"
        "from pytest_toolbench.results.journal import ResultJournal\n"
        "j = ResultJournal(sys.argv[1], compact=True, block_bytes=20_000)\n"
        "for i in range(60):\n"
        "    j.append(result(i))\n"
        "    if i == 40: time.sleep(0.5)  # let the group-commit thread compact some\n"
        "os._exit(0)  # no close, no atexit: as if killed right after the last append\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path), str(REPO / "tests")], check=True,
                   cwd=REPO, timeout=120)
    assert packed_path(path).exists()  # some of it was compacted before the kill
    assert same(read_journal(path), [result(i) for i in range(60)])
    assert [c.case_id for c in case_store.read_cases(tmp_path)] == [f"c{i:04d}" for i in range(60)]


def test_a_compaction_killed_before_it_removed_its_pending_file_is_read_once(tmp_path):
    path = tmp_path / "results.jsonl"
    with ResultJournal(path, compact=True) as journal:
        for i in range(4):
            journal.append(result(i))
    (block,) = read_blocks(packed_path(path))
    # the pending file the member was made from, back as a kill before its unlink leaves it,
    # with one more line a writer added to it after the member was made
    (tmp_path / block.source).write_bytes(block.lines + result(4).model_dump_json().encode() + b"\n")
    assert pending_paths(path) == [tmp_path / block.source]
    assert same(read_journal(path), [result(i) for i in range(5)])


def test_a_compaction_killed_after_some_members_of_a_file_reads_its_rest_after_them(tmp_path):
    """A block is packed in members of at most ``block_bytes`` (a reader holds one at a time);
    killed after two of a pending file's members, the file's rest was read before them."""
    path = tmp_path / "results.jsonl"
    with ResultJournal(path, compact=True, block_bytes=1 << 30) as journal:
        for i in range(5):
            journal.append(result(i))
        pending = journal._set_aside(reopen=True)
        lines = pending.read_bytes().splitlines(keepends=True)
        packed = PackedJournal(packed_path(path))
        cut = [0, len(lines[0]) + len(lines[1]), sum(map(len, lines[:4]))]
        for start, end in zip(cut, cut[1:]):
            packed.append_block(pending.read_bytes()[start:end], pending.name, start, end)
        journal.append(result(5))
        assert same(read_journal(path), [result(i) for i in range(6)])
    assert same(read_journal(path), [result(i) for i in range(6)])


def test_a_block_is_packed_in_members_of_at_most_block_bytes(tmp_path):
    path = tmp_path / "results.jsonl"
    from pytest_toolbench.results.journal import _pack_file

    limit = 5 * len(result(0).model_dump_json()) // 2  # two lines and a half
    pending = tmp_path / "results.jsonl.1.2.pending"  # a block renamed aside: seven lines
    pending.write_bytes(b"".join(result(i).model_dump_json().encode() + b"\n" for i in range(7)))
    _pack_file(PackedJournal(packed_path(path)), pending, limit=limit)
    assert not pending.exists()
    blocks = read_blocks(packed_path(path))
    assert [b.lines.count(b"\n") for b in blocks] == [2, 2, 2, 1]
    assert all(b.end - b.start <= limit for b in blocks)
    assert same(read_journal(path), [result(i) for i in range(7)])


def test_toolbench_finish_packs_what_a_killed_compaction_left_plain(tmp_path):
    """pack_leftovers (``toolbench finish``): a pending file a member already holds in part is
    stored from the end of that part, one nothing holds from its start; the lines read back
    once each, in write order, and no pending file is left."""
    path = tmp_path / "results.jsonl"
    with ResultJournal(path, compact=True) as journal:
        for i in range(4):
            journal.append(result(i))
    (block,) = read_blocks(packed_path(path))
    # killed after the member's fsync, before the unlink, with a line added after the member
    held = tmp_path / block.source
    held.write_bytes(block.lines + result(4).model_dump_json().encode() + b"\n")
    # killed before any member of a later pending file was written
    later = tmp_path / f"results.jsonl.{time.time_ns()}.{os.getpid()}.pending"
    later.write_bytes(b"".join(result(i).model_dump_json().encode() + b"\n" for i in (5, 6)))
    assert pending_paths(path) == [held, later]
    assert pack_leftovers(path) == 2
    assert pending_paths(path) == [] and not path.exists()
    blocks = read_blocks(packed_path(path))
    assert [(b.source, b.start) for b in blocks] == [(held.name, 0), (held.name, block.end),
                                                     (later.name, 0)]
    assert same(read_journal(path), [result(i) for i in range(7)])
    assert pack_leftovers(path) == 0  # nothing left: nothing read


def test_held_ranges_are_per_pending_file_and_in_order_whatever_the_member_order():
    """What both the reader (skips these ranges) and pack_leftovers (goes on from the last end)
    read: members of two pending files, one of them out of order on disk."""
    blocks = [Block("a.pending", 40, 90, b""), Block("b.pending", 0, 10, b""),
              Block("a.pending", 0, 40, b"")]
    assert held_ranges(blocks) == {"a.pending": [(0, 40), (40, 90)], "b.pending": [(0, 10)]}
    assert held_ranges([]) == {}


def _append_many(path: str, worker: int, count: int) -> None:
    journal = ResultJournal(path, compact=True, block_bytes=30_000)
    for i in range(count):
        journal.append(result(worker * 1000 + i))
    journal.close()


def test_compacting_writers_in_several_processes_lose_nothing(tmp_path):
    path = tmp_path / "results.jsonl"
    run_in_processes(_append_many, [(str(path), w, 25) for w in range(4)])
    ids = [r.case_id for r in read_journal(path)]
    assert len(ids) == 100 and len(set(ids)) == 100
    assert not path.exists() and not pending_paths(path)


# --- the run folder -------------------------------------------------------------------------


def suite(tmp_path: Path, *args: str, name: str = "toolhop") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", f"suites/{name}", "--data", "sample", "--model", "oracle",
         "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--cache-dir", str(tmp_path / "cache"),
         "--runs-dir", str(tmp_path / "runs"), "--toolbench-json", str(tmp_path / "mine.json"),
         *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_an_xdist_run_folder_is_report_index_and_one_compressed_journal(tmp_path):
    proc = suite(tmp_path, "-n", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (folder,) = (tmp_path / "runs").iterdir()
    # worker journals merged into the run's journal and removed; nothing plain left
    assert sorted(p.name for p in folder.iterdir()) == ["report.json", "results.jsonl.gz", "run.json"]
    report = json.loads((folder / "report.json").read_text())
    assert "cases" not in report and report["cases_journal"] == {"file": "results.jsonl", "count": 18}
    # the run folder's report reads back as the very record --toolbench-json holds inline
    mine = load_record(tmp_path / "mine.json")
    assert len(mine.cases) == 18
    assert load_record(folder / "report.json").report_dict() == mine.report_dict()
    listed = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "runs", "--runs-dir",
                             str(tmp_path / "runs")], cwd=REPO, capture_output=True, text=True)
    assert "cases:            18" in listed.stdout and "complete" in listed.stdout


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_finished_familytool_run_keeps_no_scratch_files(tmp_path, workers):
    """FamilyTool's extraction memo (one file per sample, shared by the workers while the run
    runs) is a scratch folder of the run: gone once the run has ended whole, as every case's
    result holds its extraction."""
    proc = suite(tmp_path, "-n", workers, name="familytool")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (folder,) = (tmp_path / "runs").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["report.json", "results.jsonl.gz", "run.json"]
    extracted = [c for c in case_store.read_cases(folder) if "extraction" in c.details]
    assert extracted and all(c.details["extraction"] for c in extracted)


def test_results_only_a_worker_journal_holds_are_merged_into_the_run_journal(tmp_path):
    with case_store.worker_journal(tmp_path, "gw0") as worker:
        worker.append(result(1))
        worker.append(result(2, outcome=Outcome.FAILED))
    received = {"c0001": result(1, outcome=Outcome.ERROR)}  # what the report channel delivered
    with case_store.run_journal(tmp_path) as journal:
        journal.append(received["c0001"])
        assert case_store.merge_worker_journals(tmp_path, received, journal.append) == 1
    case_store.remove_worker_journals(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.jsonl.gz"]
    stored = case_store.read_cases(tmp_path)
    assert [(c.case_id, c.outcome) for c in stored] == [("c0001", Outcome.ERROR),
                                                       ("c0002", Outcome.FAILED)]


def test_a_run_folder_of_the_older_layout_still_reads(tmp_path):
    """report.json with its cases inline, a plain results.jsonl and worker journals beside it."""
    cases = [result(i) for i in range(3)]
    folder = tmp_path / "runs" / "20250101-000000-old"
    folder.mkdir(parents=True)
    lines = "".join(c.model_dump_json() + "\n" for c in cases)
    (folder / "results.jsonl").write_text(lines)
    (folder / "worker-gw0.jsonl").write_text(lines)
    old = json.loads((REPO / "tests" / "data" / "report_before_typed_sections.json").read_text())
    old["cases"] = [json.loads(c.model_dump_json()) for c in cases]
    (folder / "report.json").write_text(json.dumps(old))
    record = load_record(folder / "report.json")
    assert same(record.cases, cases)
    assert same(read_journal(folder / "results.jsonl"), cases)
    with (folder / "results.jsonl").open("a") as fh:  # killed mid-line
        fh.write(cases[0].model_dump_json()[:50])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a listing's count says nothing about the torn line
        assert case_store.count_results(folder) == 3
    # killed before its report: listed from the journal, read from it
    (folder / "report.json").unlink()
    listed = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "runs", "--runs-dir",
                             str(tmp_path / "runs")], cwd=REPO, capture_output=True, text=True)
    assert "incomplete" in listed.stdout and "3 so far" in listed.stdout


def test_a_report_whose_journal_is_missing_or_short_is_one_line(tmp_path):
    with case_store.run_journal(tmp_path) as journal:
        journal.append(result(0))
    doc = {"run": {}, "metrics": {"scenarios": []},
           "cases_journal": case_store.cases_reference(2)}
    (tmp_path / "report.json").write_text(json.dumps(doc))
    with pytest.raises(RunLoadError, match=r"report\.json: its journal .*results\.jsonl holds 1 "
                                           r"cases, the report says 2"):
        load_record(tmp_path / "report.json")
    packed_path(tmp_path / "results.jsonl").unlink()
    with pytest.raises(RunLoadError, match=r"its cases are in .*results\.jsonl, which is missing"):
        load_record(tmp_path / "report.json")
