"""``toolbench view``, ``toolbench list`` and the dataframes API over real recorded runs (three
ToolHop runs on the bundled sample, tests/view_runs.py): what the built site holds, read from its
files; the browser side is tests/test_view_browser.py."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from view_runs import REPO, make_runs

from pytest_toolbench.view.case_data import CHUNK, sandbox_limit, share_texts, unshare_texts
from pytest_toolbench.view.site import build_site, js_literal, pack_chunk, unpack_chunk
from shared_data import BUNDLED_TOOLHOP


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("view-runs")
    records = make_runs(tmp)
    return {"tmp": tmp, "records": records, "ids": {k: v["run"]["run_id"] for k, v in records.items()}}


@pytest.fixture(scope="module")
def site(runs: dict) -> Path:
    out = runs["tmp"] / "site"
    result = build_site([runs["tmp"] / "runs"], out)
    assert result.runs == 3 and not result.skipped
    return out


def _js_call(path: Path, call: str) -> list:
    """The arguments of the ``TB.<call>(...)`` in a data file, read back as JSON."""
    text = path.read_text(encoding="utf-8")
    m = re.fullmatch(rf"TB\.{call}\((.*)\);\n", text, re.S)
    assert m, text[:200]
    return json.loads(f"[{m.group(1)}]".replace("<\\/", "</"))


def _chunk(path: Path) -> list:
    """A chunk file's ``TB.chunkz(key, k, packed)`` as ``[key, k, cases, texts]``."""
    key, k, packed = _js_call(path, "chunkz")
    return [key, k, *unpack_chunk(packed)]


def test_the_leaderboard_ranks_full_runs_together_and_the_subset_apart(site: Path, runs: dict) -> None:
    html = (site / "index.html").read_text()
    ids = runs["ids"]
    groups = re.findall(r'<section class="group" id="group-(\w+)">(.*?)</section>', html, re.S)
    assert [g for g, _ in groups] == ["A", "B"]
    full, subset = groups[0][1], groups[1][1]
    assert ids["oracle"] in full and ids["half"] in full and ids["subset"] not in full
    # --backend auto (every run's here) is recorded as what it resolved to: the providers
    backends = re.findall(r'<td>(\w+)</td>\s*<td class="mono nowrap"><a href="run-[^"]+">([^<]+)</a>', html)
    assert sorted(backends) == sorted([("oracle", ids["oracle"]), ("replay", ids["half"]),
                                       ("oracle", ids["subset"])]), backends
    # the oracle and a replay report no tokens: the cell says so, and sorts below any count
    assert full.count('data-sort="-1" title="no token counts recorded">-</td>') == 2
    assert ids["subset"] in subset and "SUBSET: 6 of 18 cases" in subset
    assert "full suite, 18 cases" in full and "toolhop sample fp" in full
    assert "never together with another" in html
    # one column per scenario with the headline metric, its CI and n; the sort uses the raw value
    assert re.search(r'data-sort="1\.0">100\.0%<br><small>\[100\.0, 100\.0\]</small><small class="n"> n=6', full)
    assert re.search(r'data-sort="0\.6666666666666666">66\.7%', full)


def test_the_leaderboard_tokens_cell_is_the_runs_total_with_its_split() -> None:
    from pytest_toolbench.results.run_record import CacheCounts, RunInfo, RunRecord
    from pytest_toolbench.results.run_sections import TokenTotals
    from pytest_toolbench.view.leaderboard import _tokens

    def record(prompt: int, completion: int, cached: int) -> RunRecord:
        return RunRecord(cases=[], run=RunInfo(
            usage=TokenTotals(prompt_tokens=prompt, completion_tokens=completion),
            cache=CacheCounts(model_calls=9, replies_from_cache=cached)))

    assert _tokens(record(1_200_000, 34_000, 0)) == {
        "tokens": "1.23M", "tokens_total": 1_234_000,
        "tokens_title": "1,200,000 prompt + 34,000 completion over 9 model calls"}
    assert _tokens(record(900, 50, 9))["tokens_title"] == (
        "900 prompt + 50 completion over 9 model calls (9 from the cache, as recorded)")
    assert _tokens(RunRecord(cases=[]))["tokens"] == "-"  # a report from before they were kept


def test_each_run_page_has_every_metric_breakdown_and_plot(site: Path, runs: dict) -> None:
    rec = runs["records"]["half"]
    page = (site / f"run-{runs['ids']['half']}.html").read_text()
    for s in rec["metrics"]["scenarios"]:
        assert f"{s['benchmark']} / {s['scenario']}" in page
        for name in s["metrics"]:
            assert f'<td class="mono">{name}' in page
    assert page.count("<canvas data-plot=") == 3  # hops, per scenario
    plot = json.loads(re.search(r'data-plot="([^"]+)"', page).group(1).replace("&#34;", '"'))
    assert plot["label"] == "hops" and plot["groups"] == ["3", "4", "5", "6", "7"]
    assert "bundled sample (not the real benchmark)" in page
    assert 'src="data/' + runs["ids"]["half"] + '/index.js"' in page


def test_the_case_data_is_chunked_and_complete(site: Path, runs: dict) -> None:
    key = runs["ids"]["half"]
    cases = runs["records"]["half"]["cases"]
    key_, n, chunk, rows = _js_call(site / "data" / key / "index.js", "index")
    assert (key_, n, chunk) == (key, len(cases), CHUNK)
    assert [r["id"] for r in rows] == [c["case_id"] for c in cases]
    assert [r["o"] for r in rows] == [c["outcome"] for c in cases]
    assert rows[0]["labels"]["hops"] == str(cases[0]["labels"]["hops"])
    _, k, payload, texts = _chunk(site / "data" / key / "c0.js")
    payload = unshare_texts(payload, texts)
    assert k == 0 and [p["id"] for p in payload] == [c["case_id"] for c in cases[:CHUNK]]
    assert payload[0]["transcript"] == cases[0]["transcript"]
    assert payload[0]["details"]["gold"] == cases[0]["details"]["gold"]


def test_a_chunk_file_is_packed_and_reads_back_as_the_literal_it_held() -> None:
    """Gzipped and base64: a FamilyTool chunk repeats each case's tool list (~4 KB) beyond what
    its shared texts take; the real data's site was 47 MB for a 2.9 MB run folder. What comes
    back is the literal the plain file held: NaN, non-ASCII, a text that would close a
    <script>, a chunk too deep to share."""
    tools = [{"name": f"tool_{n}", "description": "d" * 60, "parameters": {"x": n}} for n in range(40)]
    cases = [{"id": f"c{i}", "values": {"score": math.nan, "em": 1.0}, "details": {"tools": tools},
              "transcript": [{"role": "user", "content": f"q{i} ünï </script> \x00"}]}
             for i in range(50)]
    shared, texts = share_texts(cases)
    packed = pack_chunk(shared, texts)
    assert re.fullmatch(r"[A-Za-z0-9+/=]+", packed)
    assert len(packed) * 10 < len(js_literal([shared, texts]))
    back, back_texts = unpack_chunk(packed)
    assert back_texts == texts and math.isnan(back[0]["values"]["score"])
    assert json.dumps(unshare_texts(back, back_texts)) == json.dumps(cases)  # NaN as NaN
    deep: Any = "leaf"
    for _ in range(900):
        deep = [deep]
    assert unpack_chunk(pack_chunk([{"a": deep}], None)) == ([{"a": deep}], None)


def test_a_chunk_stores_each_repeated_long_text_once() -> None:
    """FamilyTool repeats its knowledge graph in every prompt: each long text is stored once per
    chunk, referenced as "\\0<n>"; a text that really begins with NUL is escaped, so it never
    reads as one."""
    prompt = "KG " * 400
    cases = [{"transcript": [{"role": "system", "content": prompt}, {"role": "user", "content": f"q{i}"}],
              "details": {"prompt": [{"content": prompt}], "odd": "\x000", "odder": "\x00\x00x",
                          "short": "s" * 10}} for i in range(3)]
    cases.append({"transcript": [{"role": "user", "content": "u" * 600}], "details": {}})  # once
    shared, texts = share_texts(cases)
    assert texts == [prompt, "u" * 600]  # every long text, each distinct one once
    assert shared[1]["transcript"][0]["content"] == "\x000" and shared[1]["details"]["odd"] == "\x00\x000"
    assert shared[3]["transcript"][0]["content"] == "\x001"
    assert shared[0]["details"]["short"] == "s" * 10
    assert unshare_texts(shared, texts) == cases
    assert len(js_literal([shared, texts])) < len(js_literal(cases)) - 2 * len(prompt)
    deep: Any = "leaf"
    for _ in range(900):  # a model's arguments, parsed as deep as upstream's json.loads allows
        deep = [deep]
    whole = [{"details": {"arguments": deep}, "transcript": [{"content": prompt}, {"content": "\x00"}]}]
    assert share_texts(whole) == (whole, None) and unshare_texts(whole, None) is whole
    js_literal(whole)  # and the chunk is still written


def test_the_side_by_side_page_has_compares_numbers_and_links_both_transcripts(site: Path, runs: dict) -> None:
    from pytest_toolbench.compare import compare_with_registry, load_runs

    ids = runs["ids"]
    page = (site / f"diff-{ids['oracle']}--{ids['half']}.html").read_text()
    cmp = compare_with_registry(load_runs([runs["tmp"] / "oracle.json", runs["tmp"] / "half.json"]))
    row = cmp.find("toolhop.mandatory.accuracy")
    d = row.diffs[0]
    assert d.mcnemar is not None and (d.mcnemar.b, d.mcnemar.c) == (2, 0)
    assert f"{100 * d.diff:+.1f} pp" in page and f"[{100 * d.ci_low:.1f}, {100 * d.ci_high:.1f}]" in page
    assert f"{d.mcnemar.p_value:.3g} (b=2, c=0)" in page
    oracle_ids = [c["case_id"] for c in runs["records"]["oracle"]["cases"]]
    half_ids = [c["case_id"] for c in runs["records"]["half"]["cases"]]
    for case in ("toolhop-9001-mandatory", "toolhop-9003-mandatory"):
        assert (f'href="case.html#run={ids["oracle"]}&amp;i={oracle_ids.index(case)}"' in page)
        assert (f'href="case.html#run={ids["half"]}&amp;i={half_ids.index(case)}"' in page)
    assert "right in A, wrong in B (2)" in page


def test_runs_on_other_data_get_no_side_by_side_but_the_reason(runs: dict, tmp_path: Path) -> None:
    """A copy of the oracle record whose data file has another sha256: ``toolbench compare``
    refuses it, and so does the site (no page; the compare button says why)."""
    other = json.loads((runs["tmp"] / "oracle.json").read_text())
    for d in other["run"]["data_sources"]:
        d["sha256"] = "0" * 64
    other["run"]["run_id"] = "other-data"
    other["run"]["started"] += 1000
    (tmp_path / "other.json").write_text(json.dumps(other))
    out = tmp_path / "site"
    result = build_site([runs["tmp"] / "oracle.json", tmp_path / "other.json"], out)
    assert result.runs == 2 and result.pairs == 0
    assert not list(out.glob("diff-*.html"))
    pairs = json.loads(re.search(r"TB\.pairs = (\{.*?\});", (out / "index.html").read_text()).group(1))
    (reason,) = pairs.values()
    assert reason.startswith("refused: ") and "ran on different data" in reason
    assert 'id="group-B"' in (out / "index.html").read_text()  # and ranked apart


def test_the_side_by_side_page_says_which_run_is_partial_and_why(runs: dict, tmp_path: Path) -> None:
    """A run -x stopped, beside a whole one: its numbers cover fewer cases than it selected, as
    ``toolbench compare`` ends its text; the page said nothing of it."""
    part = json.loads((runs["tmp"] / "oracle.json").read_text())
    part["partial"] = True
    part["run"].update(run_id="stopped", pytest_stop="-x/--maxfail=1 stopped the run",
                       started=part["run"]["started"] + 1000)
    (tmp_path / "stopped.json").write_text(json.dumps(part))
    out = tmp_path / "site"
    result = build_site([runs["tmp"] / "half.json", tmp_path / "stopped.json"], out)
    assert result.pairs == 1
    (page,) = out.glob("diff-*.html")
    text = " ".join(page.read_text().split())
    assert ('<p class="warn partial">Partial runs (fewer cases than they selected): '
            "B (stopped): -x/--maxfail=1 stopped the run.</p>") in text
    whole = tmp_path / "whole"
    build_site([runs["tmp"] / "half.json", runs["tmp"] / "oracle.json"], whole)
    assert "warn partial" not in next(whole.glob("diff-*.html")).read_text()


def test_the_side_by_side_page_names_a_benchmark_only_one_run_has(runs: dict, tmp_path: Path) -> None:
    """A run of two benchmarks beside a run of one: the other benchmark's scenarios were sections
    of "0 paired, 0 only in A, 18 only in B" with "-" and "n/a" in every cell; one line now."""
    both = json.loads((runs["tmp"] / "oracle.json").read_text())
    extra = [dict(c, benchmark="extra") for c in both["cases"]]
    both["cases"] += extra
    both["run"].update(run_id="both", started=both["run"]["started"] + 1000)
    (tmp_path / "both.json").write_text(json.dumps(both))
    out = tmp_path / "site"
    assert build_site([runs["tmp"] / "half.json", tmp_path / "both.json"], out).pairs == 1
    (page,) = out.glob("diff-*.html")
    text = " ".join(page.read_text().split())
    assert (f'<p class="not-compared">extra: not compared, A has no case of it (B {len(extra)} '
            "cases); differences are against A.</p>") in text
    assert "<h3>toolhop / mandatory" in text and "<h3>extra /" not in text


def test_a_rebuild_drops_the_pages_of_runs_that_are_gone(runs: dict, tmp_path: Path) -> None:
    out = tmp_path / "site"
    build_site([runs["tmp"] / "oracle.json", runs["tmp"] / "half.json"], out)
    assert len(list(out.glob("run-*.html"))) == 2
    build_site([runs["tmp"] / "oracle.json"], out)
    assert [p.name for p in out.glob("run-*.html")] == [f"run-{runs['ids']['oracle']}.html"]
    assert not list(out.glob("diff-*.html")) and [p.name for p in (out / "data").iterdir()] == [runs["ids"]["oracle"]]


def test_an_unreadable_record_is_named_and_left_out(runs: dict, tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{not json")
    result = build_site([runs["tmp"] / "oracle.json", tmp_path / "broken.json"], tmp_path / "site")
    assert result.runs == 1
    assert result.skipped == [f"{tmp_path / 'broken.json'}:1: not JSON (Expecting property name enclosed in double quotes)"]
    assert "broken.json" in (tmp_path / "site" / "index.html").read_text()


def test_a_run_folder_without_a_report_is_named_with_what_would_give_it_one(
        runs: dict, tmp_path: Path) -> None:
    """A run killed outright, or stopped by a full disk, has a run.json and a journal but no
    report: the site cannot show it, and says so with its `toolbench runs` status, instead of
    leaving a run the user knows of out without a word."""
    from pytest_toolbench.output_errors import OutputFailure
    from pytest_toolbench.runs.record import RunIndex, RunStart, mark_unreported, write_index

    folder = tmp_path / "runs"
    shutil.copytree(runs["tmp"] / "runs", folder)
    start = RunStart(settings={"model": "m"})
    killed, stopped = folder / "20991231-000000-aaaaaa", folder / "20991231-000001-bbbbbb"
    for run_dir in (killed, stopped):
        run_dir.mkdir()
        write_index(run_dir, RunIndex(run_id=run_dir.name, status="running", partial=True,
                                      started=1.0, start=start))  # no pid: not alive
    mark_unreported(stopped, exit_status=13, stopped_by=OutputFailure.of(
        "results journal", stopped / "results.jsonl", OSError(28, "No space left on device")))
    result = build_site([folder], tmp_path / "site")
    assert result.runs == 3
    assert result.skipped == [f"{killed}: no report yet: killed (toolbench finish scores it)",
                              f"{stopped}: no report yet: disk full (toolbench finish scores it)"]
    assert "no report yet: killed" in (tmp_path / "site" / "index.html").read_text()
    one = build_site([killed], tmp_path / "site-one")  # the run's own folder, as given
    assert one.runs == 0 and one.skipped == [result.skipped[0]]


def test_a_run_that_ended_without_a_report_is_not_said_to_get_one(tmp_path: Path) -> None:
    """A run stopped at its first case by a usage error (exit 4) ends with no report, and none
    will come: "no report yet" promised one."""
    from pytest_toolbench.runs.record import RunIndex, RunStart, mark_ended, write_index

    run_dir = tmp_path / "runs" / "20991231-000002-cccccc"
    run_dir.mkdir(parents=True)
    write_index(run_dir, RunIndex(run_id=run_dir.name, status="running", partial=True,
                                  started=1.0, start=RunStart(settings={"model": "m"})))
    why = "pytest.exit: pytest-toolbench: toolhop: no runner on this machine"
    mark_ended(run_dir, partial=True, interrupted_by=why, exit_status=4)
    result = build_site([tmp_path / "runs"], tmp_path / "site")
    assert result.runs == 0 and result.skipped == [f"{run_dir}: no report: partial ({why})"]


def test_a_record_that_is_not_utf8_is_named_and_left_out(runs: dict, tmp_path: Path) -> None:
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe")
    result = build_site([runs["tmp"] / "oracle.json", tmp_path / "binary.json"], tmp_path / "site")
    assert result.runs == 1
    assert result.skipped == [f"{tmp_path / 'binary.json'}:1: not JSON (not UTF-8 text: invalid "
                              "start byte at byte 0 of the line)"]


def _with_unknown_keys(record: dict) -> dict:
    """A record as a newer version might write it: keys this version does not know, at every
    level the site reads."""
    record = json.loads(json.dumps(record))
    record["future_top"] = {"x": 1}
    record["run"]["run_id"] = "newer-writer"
    record["run"]["future_run"] = "y"
    record["run"]["settings"]["future_setting"] = 3
    record["cases"][0]["future_case"] = True
    scenario = record["metrics"]["scenarios"][0]
    scenario["future_scenario"] = 1
    next(iter(scenario["metrics"].values()))["future_metric_key"] = 2
    record["gates"][0]["future_gate_key"] = "z"
    return record


def test_the_site_reads_the_one_run_record_older_and_newer_ones_too(tmp_path: Path) -> None:
    """Issue 30: the site reads a record as the one ``RunRecord`` (results/run_record.py),
    through ``toolbench compare``'s loader: a record written before the typed sections and one
    with keys this version does not know are shown, a key it does not know kept in the settings."""
    from pytest_toolbench.results.run_record import RunRecord
    from pytest_toolbench.results.run_sections import SettingsSection
    from pytest_toolbench.view.load import load_view_runs

    old = json.loads((REPO / "tests" / "data" / "report_before_typed_sections.json").read_text())
    for name, record in (("old", old), ("newer", _with_unknown_keys(old))):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "report.json").write_text(json.dumps(record))
    loaded = load_view_runs([tmp_path / "runs"])
    assert not loaded.skipped and [r.run_id for r in loaded.runs] == [old["run"]["run_id"], "newer-writer"]
    assert all(type(r.record) is RunRecord and type(r.record.run.settings) is SettingsSection
               for r in loaded.runs)

    result = build_site([tmp_path / "runs"], tmp_path / "site")
    assert result.runs == 2 and not result.skipped
    for run_id in (old["run"]["run_id"], "newer-writer"):
        page = (tmp_path / "site" / f"run-{run_id}.html").read_text()
        assert "<td>auto</td>" in page  # backend, from the typed settings
        assert "benchmark_options.toolhop.scorer" in page and "http://127.0.0.1:41234/v1" in page
    newer = (tmp_path / "site" / "run-newer-writer.html").read_text()
    assert "future_setting" in newer
    chunk = unshare_texts(*_chunk(tmp_path / "site" / "data" / "newer-writer" / "c0.js")[2:])
    assert chunk[0]["id"] == old["cases"][0]["case_id"] and "future_case" not in chunk[0]


def test_a_record_the_loader_rejects_is_left_out_with_its_line(tmp_path: Path) -> None:
    """The site's reason is compare/load.py's one line, as ``toolbench compare`` prints it."""
    from pytest_toolbench.compare.load import RunLoadError, load_record

    bad = json.loads((REPO / "tests" / "data" / "report_before_typed_sections.json").read_text())
    bad["cases"][0]["outcome"] = "maybe"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(RunLoadError) as err:
        load_record(path)
    result = build_site([path], tmp_path / "site")
    assert result.runs == 0 and result.skipped == [str(err.value)]
    assert str(err.value).startswith(f"{path}: cases[0]: outcome: ")


def test_the_view_defines_no_second_record_model() -> None:
    """Issue 30: one run record. The view's page models are its own; none shares a name with a
    class of the record's packages (results/, compare/, runs/), as the view's own RunRecord,
    RunInfo, CaseResult... once did."""
    import ast

    def classes(folder: str) -> set[str]:
        return {node.name for f in (REPO / "pytest_toolbench" / folder).rglob("*.py")
                for node in ast.walk(ast.parse(f.read_text(encoding="utf-8")))
                if isinstance(node, ast.ClassDef)}

    view = classes("view")
    assert "ViewRun" in view and "RunRecord" in classes("results")
    assert not view & (classes("results") | classes("compare") | classes("runs"))


def test_an_error_line_reads_cause_attempts_and_the_option_to_try() -> None:
    from pytest_toolbench.results.infra_errors import ErrorSummary
    from pytest_toolbench.view.run_page import error_text

    e = ErrorSummary(kind="timeout", count=2, cause="no reply within 120 s",
                     hint="raise --request-timeout", attempts_min=1, attempts_max=3)
    assert error_text(e) == "no reply within 120 s; 1-3 attempts per call; try: raise --request-timeout"
    one = e.model_copy(update={"attempts_min": 1, "attempts_max": 1, "hint": "",
                               "unreachable": "http://h:1/v1 unreachable: refused"})
    assert error_text(one) == "http://h:1/v1 unreachable: refused; 1 attempt per call"


def test_a_run_without_a_case_is_not_listed_as_complete() -> None:
    """A run in which no case ran (NO_CASES) or none finished (interrupted) has a record too."""
    from pytest_toolbench.results.run_record import RunInfo, RunMetrics, RunRecord
    from pytest_toolbench.view.leaderboard import status_text

    def record(**run: object) -> RunRecord:
        return RunRecord.build(run=RunInfo(**run), metrics=RunMetrics(scenarios=[]), cases=[])

    assert status_text(record()) == "no case ran"
    assert status_text(record(partial=True, interrupted_by="SIGTERM")) == "partial (SIGTERM)"


def test_js_literals_keep_nan_and_cannot_close_a_script() -> None:
    assert js_literal({"v": float("nan"), "t": "</script><b>"}) == '{"v":NaN,"t":"<\\/script><b>"}'


def test_sandbox_limits_are_recognised_in_tool_results() -> None:
    # benchmarks/toolhop/runner.py's feedback for a call the sandbox stopped
    assert sandbox_limit("an error occured when call slow_tool: timed out after 10 seconds") == \
        "sandbox limit: timed out after 10 seconds"
    assert sandbox_limit("an error occured when call t: tool execution crashed (killed: memory)") == \
        "sandbox limit: tool execution crashed (killed: memory)"
    # sandbox/protocol.py's mark on output cut at --sandbox-output-cap
    assert sandbox_limit("x" * 10 + "…[truncated 1234 chars]") == "sandbox limit: output cut at --sandbox-output-cap"
    assert sandbox_limit("an error occured when call t: name 'x' is not defined") is None
    assert sandbox_limit(None) is None


def test_toolbench_view_command_builds_and_says_where(runs: dict, tmp_path: Path) -> None:
    out = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "view",
                           str(runs["tmp"] / "runs"), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "3 runs, 3 side-by-side pages" in proc.stdout
    assert f"open {(out / 'index.html').resolve().as_uri()}" in proc.stdout
    # --runs-dir, as every other toolbench command names the runs folder
    again = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "view", "--runs-dir",
                            str(runs["tmp"] / "runs"), "--out", str(tmp_path / "site2")],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "3 runs, 3 side-by-side pages" in again.stdout, again.stderr
    missing = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "view",
                              str(tmp_path / "nope")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr


def test_toolbench_view_from_a_subfolder_builds_the_projects_site(runs: dict, tmp_path: Path) -> None:
    """The runs are found from any folder of the project (the nearest .toolbench/runs), but the
    site went into ./.toolbench/view of the folder the command ran in: a second, stray site
    in each subfolder it was run from. A runs folder named on the command line keeps --out's
    plain default, where the command runs."""
    project = tmp_path / "project"
    shutil.copytree(runs["tmp"] / "runs", project / ".toolbench" / "runs")
    (project / "suites" / "toolhop").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "TOOLBENCH_RUNS_DIR"}
    proc = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "view"],
                          cwd=project / "suites" / "toolhop", capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    site = project / ".toolbench" / "view" / "index.html"
    assert f"open {site.resolve().as_uri()}" in proc.stdout and site.exists()
    assert not (project / "suites" / "toolhop" / ".toolbench").exists()
    named = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "view",
                            str(project / ".toolbench" / "runs")], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300, env=env)
    assert named.returncode == 0 and (tmp_path / ".toolbench" / "view" / "index.html").exists()


def _view(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "view", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_toolbench_view_builds_only_into_a_folder_it_may_clear(runs: dict, tmp_path: Path) -> None:
    """A build clears its folder's data/, static/ and pages first: --out . in the project would
    have deleted the project's data/. A folder the view did not build is refused before the
    runs are read; one it built (its marker, or an older site's files alone) is rebuilt."""
    history = str(runs["tmp"] / "runs")
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "keep.json").write_text("{}")
    refused = _view(history, "--out", str(project))
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout
    assert refused.stderr == (f"toolbench view: --out {project}: a folder toolbench view did not "
                              "build (it holds data), which a build would clear; give a new or "
                              "empty folder\n")
    assert (project / "data" / "keep.json").read_text() == "{}"
    site = tmp_path / "site"
    assert _view(history, "--out", str(site)).returncode == 0
    assert (site / ".toolbench-view").is_file()
    (site / ".toolbench-view").unlink()  # a site built before the marker: only a site's files
    (site / "data" / "stale").mkdir()
    rebuilt = _view(history, "--out", str(site))
    assert rebuilt.returncode == 0 and not (site / "data" / "stale").exists(), rebuilt.stderr
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for out, said in ((a_file, "not a folder"), (a_file / "site", "is not a folder")):
        bad = _view(history, "--out", str(out))
        assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    negative = _view(history, "--out", str(site), "--max-pairs", "-1")
    assert negative.returncode == 2 and "--max-pairs -1: must be 0 or more" in negative.stderr


def test_toolbench_view_serve_says_a_port_in_use_before_building(runs: dict, tmp_path: Path) -> None:
    import socket
    import urllib.request

    history = str(runs["tmp"] / "runs")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = _view(history, "--out", str(tmp_path / "site"), "--serve", "--port", str(port))
    assert busy.returncode == 2 and "Traceback" not in busy.stderr, busy.stderr
    assert busy.stderr.startswith(f"toolbench view: --port {port}: cannot serve on 127.0.0.1:{port} (")
    assert not (tmp_path / "site").exists()  # refused before the build
    assert "not a port" in _view(history, "--port", "70000", "--serve").stderr
    server = subprocess.Popen([sys.executable, "-m", "pytest_toolbench.cli", "view", history, "--out",
                               str(tmp_path / "site"), "--serve", "--port", "0"], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in server.stdout:
            if line.startswith("serving "):
                url = line.split(" on ", 1)[1].split()[0]
                break
        with urllib.request.urlopen(url + "index.html", timeout=30) as page:
            assert page.status == 200 and b"Leaderboard" in page.read()
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_toolbench_list_fits_80_columns_and_lists_values_in_the_data(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "list"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(len(line) <= 80 and line == line.rstrip() for line in lines), \
        [line for line in lines if len(line) > 80 or line != line.rstrip()]
    out = proc.stdout
    for name in ("toolhop - ToolHop [built-in]", "familytool - FamilyTool [built-in]",
                 "toolbehonest - ToolBeHonest [built-in]", "metabench - Meta-Bench [built-in]"):
        assert name in out
    assert "    hops(n=...): 3, 4, 5, 6, 7\n" in out  # the bundled ToolHop sample's hop counts
    assert "    solvable(value=...): False, True\n" in out
    assert "accuracy: answer correctness" in out
    assert "data/toolhop/ToolHop.json (6 records)" in out
    # another folder: its own values, and a benchmark without data there says so
    (tmp_path / "toolhop").mkdir()
    shutil.copy(BUNDLED_TOOLHOP, tmp_path / "toolhop" / "ToolHop.json")
    proc = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "list", "--data-dir",
                           str(tmp_path), "--benchmark", "toolhop", "--benchmark", "familytool"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert "hops(n=...): 3, 4, 5, 6, 7" in proc.stdout
    assert "familytool" in proc.stdout and "data: not readable here" in proc.stdout
    # named as `toolbench data fetch toolhop` names it
    named = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "list", "toolhop"],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    assert named.returncode == 0 and "toolhop - ToolHop" in named.stdout
    assert "familytool - FamilyTool" not in named.stdout
    unknown = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "list", "toolhopp"],
                             cwd=REPO, capture_output=True, text=True, timeout=300)
    assert unknown.returncode == 2 and "no benchmark 'toolhopp' (registered: toolhop" in unknown.stderr


def test_dataframes_read_many_runs_in_three_lines(runs: dict) -> None:
    pytest.importorskip("pandas")
    from pytest_toolbench.analysis import cases_df, metrics_df, runs_df

    folder = runs["tmp"] / "runs"
    r, m, c = runs_df(folder), metrics_df(folder), cases_df(folder)
    assert sorted(r["run_id"]) == sorted(runs["ids"].values())
    assert set(r.loc[r["run_id"] == runs["ids"]["subset"], "subset"]) == {True}
    assert {"prompt_tokens", "completion_tokens"} <= set(r.columns)  # 0 here: no endpoint
    half = runs["records"]["half"]
    for s in half["metrics"]["scenarios"]:
        for name, mv in s["metrics"].items():
            got = m[(m.run_id == runs["ids"]["half"]) & (m.scenario == s["scenario"])
                    & (m.metric == name) & m.label.isna()]
            assert len(got) == 1
            value = got["value"].iloc[0]
            assert (mv["value"] is None and (value is None or math.isnan(value))) or value == mv["value"]
            assert got["n"].iloc[0] == mv["n"]
    hops3 = m[(m.run_id == runs["ids"]["half"]) & (m.label == "hops") & (m.group == "3")]
    assert not hops3.empty
    mine = c[c.run_id == runs["ids"]["half"]]
    assert list(mine.case_id) == [x["case_id"] for x in half["cases"]]
    assert list(mine.outcome) == [x["outcome"] for x in half["cases"]]
    assert "label_hops" in c.columns and "value_answer_correct" in c.columns
    run = r[r.run_id == runs["ids"]["half"]].iloc[0]  # each case started within its run
    assert mine["started"].notna().all()
    assert (run["started"] <= mine["started"]).all() and (mine["started"] <= run["finished"]).all()


def test_toolbench_view_option_refreshes_the_site_at_the_end_of_a_run(tmp_path: Path) -> None:
    """``--toolbench-view DIR``: the site of every run in --runs-dir, this one included, built
    after the run's record is written; a folder it cannot write, or one it did not build, is
    refused at configure, as every other output."""
    from view_runs import run_suite

    site = tmp_path / "site"
    first = run_suite(tmp_path, "first", "oracle", "--limit", "1", "--toolbench-view", str(site))
    index = (site / "index.html").read_text()
    assert first["run"]["run_id"] in index and (site / f"run-{first['run']['run_id']}.html").exists()
    second = run_suite(tmp_path, "second", "oracle", "--limit", "1", "--toolbench-view", str(site))
    index = (site / "index.html").read_text()
    assert first["run"]["run_id"] in index and second["run"]["run_id"] in index
    assert "view_dir" not in second["run"]["settings"]  # the run record's settings are unchanged

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly", "-p",
         "no:cacheprovider", "--data", "sample", "--model", "oracle", "--limit", "1", "--no-plots",
         "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"),
         "--toolbench-view", str(blocker / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    # checked with the other outputs, before any case: exit 4, one line
    assert proc.returncode == 4, proc.stdout[-3000:]
    assert f"ERROR: pytest-toolbench: --toolbench-view {blocker / 'site'}: cannot be created" \
        in proc.stderr, proc.stderr
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    foreign = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly", "-p",
         "no:cacheprovider", "--data", "sample", "--model", "oracle", "--limit", "1", "--no-plots",
         "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"),
         "--toolbench-view", str(project), "--toolbench-json", str(blocker / "r.json")],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert foreign.returncode == 4 and project.joinpath("data").is_dir(), foreign.stdout[-3000:]
    # in one go with the other outputs' problems, not after they are fixed
    errors = [line for line in foreign.stderr.splitlines() if line.startswith("ERROR: pytest-toolbench:")]
    assert len(errors) == 2, foreign.stderr
    assert f"--toolbench-json {blocker / 'r.json'}: {blocker} is not a folder" in errors[0]
    assert f"--toolbench-view {project}: a folder toolbench view did not build" in errors[1]


def test_a_site_that_cannot_be_refreshed_at_the_end_is_a_line_not_an_exit_status(tmp_path: Path):
    """The folder changed between configure and the run's end: the run is recorded; the site's
    failure is one line."""
    from types import SimpleNamespace

    from pytest_toolbench.view.pytest_hook import ViewRefresh

    site = tmp_path / "site"
    (site / "notes").mkdir(parents=True)  # appeared after the check
    hook = ViewRefresh(site, tmp_path / "runs")
    session = SimpleNamespace(config=SimpleNamespace(pluginmanager=SimpleNamespace(
        get_plugin=lambda name: None)))
    hook.pytest_sessionfinish(session)  # type: ignore[arg-type]
    assert hook.line is not None and hook.line.startswith(f"toolbench view: could not refresh {site}")
    assert "a folder toolbench view did not build (it holds notes)" in hook.line
    assert (site / "notes").is_dir()
