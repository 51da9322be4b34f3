"""The whole-case result cache (runtime/result_cache.py): a re-run of unchanged code, data and
settings answers each case with its stored result, without a request or scoring, and with the
same metrics and results as a re-run that scored the response cache's replies again."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import BaseModel

from fake_openai_server import FakeOpenAIServer
from shared_data import BUNDLED_TOOLHOP as BUNDLED
from test_suite_toolhop import GoldAgent, load_records, metric_table, run_suite

from pytest_toolbench.models.cache_store import safe_name
from pytest_toolbench.runtime import result_cache
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome
from pytest_toolbench.results.case_store import read_cases
from pytest_toolbench.runtime.result_cache import ResultCache, ResultStore

REPO = Path(__file__).resolve().parents[1]
#: What differs between two runs of the same results: when and how long they ran (the sandbox's
#: timings are a run's own: a case answered from the result cache ran no tool).
TIMINGS = ("wall_s", "started_at")
TIMING_DETAILS = ("sandbox_calls_ms", "sandbox_wall_ms", "sandbox_worker_ms")


def without_timings(result: CaseResult | dict) -> dict:
    data = result.model_dump(mode="json") if isinstance(result, CaseResult) else dict(result)
    for key in TIMINGS:
        data.pop(key, None)
    data["details"] = {k: v for k, v in data["details"].items() if k not in TIMING_DETAILS}
    return data


def journal_of(tmp_path: Path, report: dict) -> list[dict]:
    return [without_timings(r) for r in read_cases(tmp_path / "runs" / report["run"]["run_id"])]


def from_cache(report: dict) -> int:
    return report["run"]["cache"].get("results_from_cache", 0)


@pytest.fixture
def server():
    with FakeOpenAIServer(GoldAgent(load_records(BUNDLED))) as fake:
        yield fake


def endpoint(server) -> list[str]:
    return ["--base-url", server.base_url, "--api-key", "t", "--model", "m", "--data", "sample"]


def test_a_rerun_is_answered_whole_with_the_same_results_and_rescore_and_no_cache_bypass_it(tmp_path, server):
    args = endpoint(server)
    proc, first = run_suite(tmp_path, *args)
    assert first is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    calls = len(server.requests)
    n = len(first["cases"])
    assert calls > 0 and n > 0 and from_cache(first) == 0
    assert list((tmp_path / "cache" / "results").glob("*/*.pack"))

    proc, second = run_suite(tmp_path, *args)
    assert second is not None, proc.stdout[-3000:]
    assert len(server.requests) == calls  # no request sent
    assert from_cache(second) == n  # every case answered from the result cache
    assert "answered whole by the result cache" in " ".join(proc.stdout.split())

    # --rescore: the response cache's replies scored again (no request either), not the stored results
    proc, rescored = run_suite(tmp_path, *args, "--rescore")
    assert rescored is not None, proc.stdout[-3000:]
    assert len(server.requests) == calls and from_cache(rescored) == 0
    assert all(c["cached_calls"] == c["model_calls"] > 0 for c in rescored["cases"])

    # the same metrics, byte for byte, and the same results as the re-run that rescored
    dump = lambda r: json.dumps(r["metrics"], sort_keys=True)  # noqa: E731
    assert dump(second) == dump(first) == dump(rescored)
    assert metric_table(second) == metric_table(rescored)
    assert journal_of(tmp_path, second) == journal_of(tmp_path, rescored)
    assert [without_timings(c) for c in second["cases"]] == [without_timings(c) for c in rescored["cases"]]
    # a hit's timings are this run's, not the stored run's
    started = {c["case_id"]: c["started_at"] for c in first["cases"]}
    assert all(c["started_at"] > started[c["case_id"]] for c in second["cases"])

    # --no-cache: neither cache; every case is asked again
    proc, uncached = run_suite(tmp_path, *args, "--no-cache")
    assert uncached is not None and from_cache(uncached) == 0
    assert len(server.requests) > calls
    calls = len(server.requests)

    # --cache-only: a hit is an answered case
    proc, offline = run_suite(tmp_path, *args, "--cache-only")
    assert offline is not None and proc.returncode == first_rc(first), proc.stdout[-3000:]
    assert len(server.requests) == calls and from_cache(offline) == n
    assert dump(offline) == dump(first)


def first_rc(report: dict) -> int:
    return report["run"]["exit_status"]


def test_record_mode_bypasses_the_result_cache(tmp_path, server):
    args = [*endpoint(server), "--scenario", "direct"]
    run_suite(tmp_path, *args)
    proc, recorded = run_suite(tmp_path, *args, "--record", str(tmp_path / "rec.jsonl"))
    assert recorded is not None, proc.stdout[-3000:]
    assert from_cache(recorded) == 0
    assert (tmp_path / "rec.jsonl").read_text().strip()  # each case ran, and was recorded


#: A plugin (``-p no_runner``) whose environment cannot build any benchmark's runner, as one
#: whose embedder does not load or whose sandbox lacks its isolation layers.
NO_RUNNER = """
from pytest_toolbench.benchmarks.base import EnvironmentUnavailable
from pytest_toolbench.runtime.environment import RunEnvironment


def _no_runner(self, benchmark):
    raise EnvironmentUnavailable(f"{benchmark}: no runner in this test's environment")


RunEnvironment.runner = _no_runner
"""


def test_a_fully_answered_run_builds_no_runner_and_a_miss_still_stops_on_a_broken_environment(
        tmp_path, server, monkeypatch):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "no_runner.py").write_text(NO_RUNNER)
    # on the path in every run (sys.path is in the run key), loaded only with -p
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(plugins), os.environ.get("PYTHONPATH")])))
    args = endpoint(server)
    proc, first = run_suite(tmp_path, *args)
    assert first is not None and from_cache(first) == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    calls = len(server.requests)

    # every case answered: no runner is asked for, so the broken environment does not matter
    proc, answered = run_suite(tmp_path, *args, "-p", "no_runner")
    assert answered is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == first_rc(first) and from_cache(answered) == len(first["cases"])
    assert "no runner in this test's environment" not in proc.stdout + proc.stderr
    assert len(server.requests) == calls

    # a miss (--rescore: every case) still stops the run on it, before any request
    proc, _ = run_suite(tmp_path, *args, "-p", "no_runner", "--rescore")
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr[-3000:]  # USAGE_ERROR
    assert "no runner in this test's environment" in proc.stdout + proc.stderr
    assert len(server.requests) == calls


def test_a_changed_setting_or_data_record_misses(tmp_path, server):
    data = tmp_path / "data"
    shutil.copytree(REPO / "data" / "toolhop", data / "toolhop")
    args = [*endpoint(server), "--scenario", "direct", "--data-dir", str(data)]
    proc, first = run_suite(tmp_path, *args)
    assert first is not None, proc.stdout[-3000:]
    n = len(first["cases"])
    _, again = run_suite(tmp_path, *args)
    assert from_cache(again) == n

    # a setting that can change a result: a benchmark option
    _, strict = run_suite(tmp_path, *args, "--toolhop-scorer", "strict")
    assert strict is not None and from_cache(strict) == 0

    # one byte of one record changed (the file's size kept): the data file's sha256 moved (the
    # run's data fingerprint), so every case misses, the edited one also by its record's CRC
    file = data / "toolhop" / "ToolHop.json"
    text = file.read_bytes()
    question = json.loads(text)[0]["question"]
    edited = question[:-1] + ("X" if question[-1] != "X" else "Y")
    assert text.count(question.encode()) == 1
    file.write_bytes(text.replace(question.encode(), edited.encode()))
    proc, changed = run_suite(tmp_path, *args)
    assert changed is not None, proc.stdout[-3000:]
    assert from_cache(changed) == 0
    _, again = run_suite(tmp_path, *args)  # (the edited question's case: the fake has no answer)
    assert from_cache(again) == sum(c["outcome"] != "error" for c in changed["cases"]) > 0

    # the data file changed outside every record (its sha256, the run's data fingerprint): no
    # record's bytes moved, yet every case misses, as one would when a knowledge graph or a tool
    # pool a case reads beside its record changed
    file.write_bytes(file.read_bytes() + b"\n")
    proc, refiled = run_suite(tmp_path, *args)
    assert refiled is not None, proc.stdout[-3000:]
    assert from_cache(refiled) == 0


def test_the_run_key_moves_with_code_settings_and_model_identity(tmp_path, monkeypatch):
    """A suite's file touched (its mtime), a new conftest.py, a result-affecting setting or the
    response cache's model identity: another run key; an output path or the concurrency: the same."""
    from pytest_toolbench.config import RunSettings

    root = tmp_path / "project"
    (root / "suites" / "x").mkdir(parents=True)
    suite = root / "suites" / "x" / "test_x.py"
    suite.write_text("def test(): pass\n")
    model = SimpleNamespace(name="m", include_base_url=True, key_extra={},
                            inner=SimpleNamespace(describe=lambda: {"base_url": "http://a"}))
    settings = RunSettings(model="m")
    key = result_cache.run_key(settings, model, root, "d")
    assert result_cache.run_key(settings, model, root, "d") == key
    assert result_cache.run_key(settings.model_copy(update={"concurrency": 99, "runs_dir": tmp_path}),
                                model, root, "d") == key
    assert result_cache.run_key(settings, model, root, "e") != key  # another data fingerprint
    assert result_cache.run_key(settings.model_copy(update={"temperature": 0.5}), model, root, "d") != key
    assert result_cache.run_key(settings.model_copy(update={"seed": 7}), model, root, "d") != key
    other = SimpleNamespace(**{**vars(model), "key_extra": {"server": "other"}})
    assert result_cache.run_key(settings, other, root, "d") != key
    later = time.time() + 10
    os.utime(suite, (later, later))
    touched = result_cache.run_key(settings, model, root, "d")
    assert touched != key
    (root / "conftest.py").write_text("\n")
    assert result_cache.run_key(settings, model, root, "d") != touched


class Record(BaseModel):
    question: str


def a_case(case_id: str = "b-1-direct", question: str = "q") -> SimpleNamespace:
    return SimpleNamespace(id=case_id, benchmark="b", scenario="direct", repeat=None,
                           stored_sample=Record(question=question))


def a_result(case_id: str = "b-1-direct", outcome: Outcome = Outcome.PASSED) -> CaseResult:
    return CaseResult(case_id=case_id, benchmark="b", scenario="direct", model="m", outcome=outcome,
                      values={"answer_correct": 1.0}, model_calls=2, cached_calls=0, wall_s=3.0,
                      started_at=1.0, details={"endpoints": {"u": {"requests": 2}}, "gold": "x"},
                      error=InfraError(kind="http_500", message="down") if outcome is Outcome.ERROR else None)


def stored_result(cache: ResultCache, case) -> CaseResult | None:
    """The case's stored result, with this run's timings (what a hit's test is given), or None."""
    hit = cache.lookup(case)
    return hit.result if hit is not None else None


def test_a_stored_result_reads_back_as_a_cached_rerun_makes_it_and_errors_are_not_stored(tmp_path):
    cache = ResultCache(ResultStore(tmp_path, "ns"), writes=True)
    cache.put(a_case("b-2-direct"), a_result("b-2-direct", Outcome.ERROR))
    assert not list(tmp_path.rglob("*.pack"))  # an infrastructure error is never kept
    cache.put(a_case(), a_result())
    cache.close()
    reader = ResultCache(ResultStore(tmp_path, "ns"), writes=True)
    hit = stored_result(reader, a_case())
    assert hit is not None and hit.values == {"answer_correct": 1.0}
    assert hit.cached_calls == hit.model_calls == 2  # every call a cached one
    assert hit.details == {"gold": "x"}  # not the storing run's wire counts
    assert hit.wall_s < 3.0 and hit.started_at > 1.0  # this run's timings
    other = ResultCache(ResultStore(tmp_path, "ns"), writes=True)
    assert stored_result(other, a_case(question="other")) is None  # another record: a miss
    assert stored_result(reader, a_case("b-2-direct")) is None
    rescoring = ResultCache(ResultStore(tmp_path, "ns"), writes=True, reads=False)  # --rescore
    assert stored_result(rescoring, a_case()) is None and stored_result(reader, a_case()) is not None


def test_a_hit_is_parsed_once_and_its_journal_line_is_the_dump_without_a_dump(tmp_path, monkeypatch):
    cache = ResultCache(ResultStore(tmp_path, "ns"), writes=True)
    tricky = a_result().model_copy(update={
        "details": {"gold": "x", "wall_s": 1, "model_calls": '"wall_s":2,', "nan": float("nan")},
        "failure_message": "谁 \u202e \x7f", "transcript": [{"role": "user", "content": "q\n" * 3000}]})
    cache.put(a_case(), tricky)
    cache.put(a_case("b-2-direct"), a_result("b-2-direct"))
    cache.close()
    reader = ResultCache(ResultStore(tmp_path, "ns"), writes=True)
    dump = CaseResult.model_dump_json
    with monkeypatch.context() as patched:
        patched.setattr(CaseResult, "model_dump_json", lambda *a, **k: pytest.fail("a hit was dumped"))
        hits = [reader.lookup(a_case()), reader.lookup(a_case("b-2-direct"))]
        lines = [hit.line() for hit in hits]
    for hit, line in zip(hits, lines):
        assert hit.result.wall_s is not None and hit.result.started_at is not None
        assert line == dump(hit.result)  # the very text a dump writes: the journal's line
    assert ResultStore.encode(tricky)[:1] == b"Z"  # the compressed form says where too


def test_an_entry_of_another_format_or_a_broken_one_is_a_miss(tmp_path):
    store = ResultStore(tmp_path, "ns")
    cache = ResultCache(store, writes=True)
    good = ResultStore.encode(a_result().model_copy(update={"wall_s": None, "started_at": None}))
    text = good.split(b" ", 1)[1]
    entries = {"b-1-direct": b"j" + text,  # format 1's entry
               "b-2-direct": b"J" + text,  # no place of the timings
               "b-3-direct": b"Jx " + text, "b-4-direct": b"J99999 " + text,
               "b-5-direct": good[:-5], "b-6-direct": b"Z0 notbase64!"}
    for case_id, entry in entries.items():
        store.save_entry(cache.key_of(a_case(case_id)), entry)
    store.save_entry(cache.key_of(a_case("b-7-direct")), good.replace(b"b-1-direct", b"b-7-direct"))
    cache.close()
    reader = ResultCache(ResultStore(tmp_path, "ns"), writes=True)
    assert all(stored_result(reader, a_case(case_id)) is None for case_id in entries)
    assert stored_result(reader, a_case("b-7-direct")) is not None


def test_a_torn_last_entry_reads_as_a_miss(tmp_path):
    cache = ResultCache(ResultStore(tmp_path, "ns"), writes=True)
    cache.put(a_case("b-1-direct"), a_result("b-1-direct"))
    cache.put(a_case("b-2-direct"), a_result("b-2-direct"))
    cache.close()
    (pack,) = tmp_path.rglob("*.pack")
    data = pack.read_bytes()
    pack.write_bytes(data[:-1])  # the last line lost its newline (a crash mid-write)
    reader = ResultCache(ResultStore(tmp_path, "ns"), writes=True)
    assert stored_result(reader, a_case("b-1-direct")) is not None
    assert stored_result(reader, a_case("b-2-direct")) is None


def test_a_large_result_is_compressed_and_reads_back(tmp_path):
    cache = ResultCache(ResultStore(tmp_path, "ns"), writes=True)
    big = a_result().model_copy(update={"transcript": [{"role": "user", "content": "long text\n" * 2000}]})
    cache.put(a_case(), big)
    cache.close()
    (pack,) = tmp_path.rglob("*.pack")
    assert pack.stat().st_size < 5000 and pack.read_bytes().count(b"\n") == 1
    hit = stored_result(ResultCache(ResultStore(tmp_path, "ns"), writes=True), a_case())
    assert hit is not None and hit.transcript == big.transcript


def test_a_hit_a_signal_stops_before_its_report_is_journalled_as_a_hit(tmp_path, server,
                                                                     monkeypatch):
    """-n 0, a SIGTERM after a hit's test body and before the report that carries its result
    (tests/signal_after_call.py): the run's end takes the result from the test's item, and it
    counts as answered by the result cache, as its report would have said (it counted as
    scored, and its journal line was dumped again)."""
    # tests/ on the path in both runs (sys.path is in the run key), the plugin loaded by -p
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO / "tests"),
                                                                    os.environ.get("PYTHONPATH")])))
    args = [*endpoint(server), "-n", "0", "--scenario", "direct"]
    proc, first = run_suite(tmp_path, *args)
    assert first is not None and from_cache(first) == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    proc, stopped = run_suite(tmp_path, *args, "-p", "signal_after_call")
    assert stopped is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert stopped["run"]["interrupted_by"] == "SIGTERM", proc.stdout[-3000:]
    assert [c["case_id"] for c in stopped["cases"]] == [first["cases"][0]["case_id"]]
    assert from_cache(stopped) == 1
    assert "answered whole by the result cache" in " ".join(proc.stdout.split())
    (line,) = journal_of(tmp_path, stopped)  # the stored result, its replies now cached
    assert line == dict(journal_of(tmp_path, first)[0], cached_calls=line["model_calls"])


def test_a_rerun_under_xdist_is_answered_by_any_worker(tmp_path, server):
    args = [*endpoint(server), "-n", "2"]
    proc, first = run_suite(tmp_path, *args)
    assert first is not None, proc.stdout[-3000:]
    assert len(list((tmp_path / "cache" / "results").glob("*/*.pack"))) == 2  # a pack per worker
    calls = len(server.requests)
    proc, second = run_suite(tmp_path, *args)
    assert second is not None, proc.stdout[-3000:]
    assert len(server.requests) == calls and from_cache(second) == len(first["cases"])
    assert json.dumps(second["metrics"], sort_keys=True) == json.dumps(first["metrics"], sort_keys=True)
    # the workers' key (their data fingerprint read from the run's index) is -n 0's own
    proc, single = run_suite(tmp_path, *endpoint(server), "-n", "0")
    assert single is not None, proc.stdout[-3000:]
    assert len(server.requests) == calls and from_cache(single) == len(first["cases"])


def test_prune_removes_old_result_packs(tmp_path):
    cache = tmp_path / "cache"
    host = safe_name(socket.gethostname())
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    old = cache / "results" / "0123456789abcdef" / f"{host}-{dead}-00aa11bb.pack"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"x" * 80)
    then = time.time() - 40 * 86400
    os.utime(old, (then, then))
    done = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "prune", "--cache-dir", str(cache),
                           "--runs-dir", str(tmp_path / "runs"), "--older-than", "30d"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "removed 1 cache pack" in done.stdout
    assert not old.exists() and not (cache / "results").exists()
