"""Runs you can find again: the run folder's run.json/report.json, `toolbench runs` and
`toolbench prune` (run through `python -m pytest_toolbench.cli`, as the console script runs it)."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAIServer, delayed, reply

from pytest_toolbench.compare.load import load_record
from pytest_toolbench.models.cache_store import safe_name
from pytest_toolbench.runs.prune import Item, parse_duration, parse_size, plan
from pytest_toolbench.runs.store import find_runs_dir, locate_runs_dir

REPO = Path(__file__).resolve().parents[1]
DAY = 86400


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def suite_cmd(tmp_path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider", "-q",
            "-p", "no:randomly", "-n", "0", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"), *args]


def blocks(listing: str) -> list[list[str]]:
    """`toolbench runs` below a table's width (80 columns off a terminal): one block per run,
    its first line ``<run id>  <date>  <status>``, then indented ``key: value`` lines."""
    return [block.splitlines() for block in listing.strip("\n").split("\n\n")]


def field(block: list[str], key: str) -> str:
    """The value of a block's ``    key: value`` line."""
    return next(line.split(":", 1)[1].strip() for line in block if line.startswith(f"    {key}:"))


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}


def test_a_run_folder_holds_its_report_and_index_and_runs_lists_it(tmp_path):
    user_json = tmp_path / "mine.json"
    proc = subprocess.run(suite_cmd(tmp_path, "--model", "oracle", "--scenario", "direct",
                                    "--toolbench-json", str(user_json)),
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (folder,) = (tmp_path / "runs").iterdir()
    report = json.loads((folder / "report.json").read_text())
    mine = json.loads(user_json.read_text())
    # the run folder's report names the journal that holds its cases; read back, they are
    # --toolbench-json's, which holds them inline (results/case_store.py)
    assert "cases" not in report and report["cases_journal"]["count"] == len(mine["cases"])
    assert report["metrics"] == mine["metrics"]
    assert load_record(folder / "report.json").report_dict()["cases"] == mine["cases"]
    assert report["run"]["settings"]["model"] == "oracle"
    assert report["run"]["data_sources"] and report["run"]["data_sources"][0]["sha256"]
    index = json.loads((folder / "run.json").read_text())
    assert index["run_id"] == folder.name == report["run"]["run_id"]
    assert index["status"] == "finished" and index["partial"] is False
    assert index["suites"] == ["toolhop"] and index["model"] == "oracle"
    assert index["n_cases"] == len(mine["cases"]) == 6
    assert [(h["scenario"], h["metric"], h["value"]) for h in index["headline"]] == [
        ("direct", "accuracy", 1.0)]
    assert index["data"][0]["sha256"] == report["run"]["data_sources"][0]["sha256"]
    assert f"run folder: {folder}" in proc.stdout

    listed = cli("runs", "--runs-dir", str(tmp_path / "runs"))
    assert listed.returncode == 0, listed.stderr
    [block] = blocks(listed.stdout)
    assert block[0].split()[0] == folder.name and block[0].endswith("  complete")
    assert field(block, "model") == "oracle" and field(block, "toolhop accuracy") == "direct=100.0%"
    assert all(len(line) <= 80 and line == line.rstrip() for line in block), listed.stdout
    as_json = json.loads(cli("runs", "--runs-dir", str(tmp_path / "runs"), "--json").stdout)
    assert as_json[0]["report"] == str(folder / "report.json")


def test_sigterm_leaves_a_partial_report_in_the_run_folder(tmp_path):
    with FakeOpenAIServer(delayed(0.5, reply("<answer>x</answer>"))) as server:
        proc = subprocess.Popen(
            suite_cmd(tmp_path, "--base-url", server.base_url, "--api-key", "t", "--model", "slow",
                      "--no-cache", "--concurrency", "1", "--scenario", "direct"),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
        )
        deadline = time.monotonic() + 120
        while len(server.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    (folder,) = (tmp_path / "runs").iterdir()
    report = json.loads((folder / "report.json").read_text())
    assert report["partial"] is True, out[-2000:] + err[-2000:]
    index = json.loads((folder / "run.json").read_text())
    assert index["status"] == "interrupted" and index["interrupted_by"] == "SIGTERM"
    assert 1 <= index["n_cases"] < 6
    row = cli("runs", "--runs-dir", str(tmp_path / "runs")).stdout.splitlines()[0]
    assert row.endswith("  partial (SIGTERM)")


def make_run(root: Path, run_id: str, started: float, *, size: int = 100, status: str = "finished",
             pid: int | None = None) -> Path:
    folder = root / "runs" / run_id
    folder.mkdir(parents=True)
    index = {"run_id": run_id, "model": f"m-{run_id}", "suites": ["toolhop"], "started": started,
             "finished": started + 5, "status": status, "n_cases": 3, "pid": pid,
             "host": os.uname().nodename if pid else None,
             "headline": [{"benchmark": "toolhop", "scenario": "direct", "metric": "accuracy",
                           "value": 0.5}]}
    (folder / "run.json").write_text(json.dumps(index))
    (folder / "report.json").write_bytes(b"x" * size)
    for f in folder.iterdir():
        os.utime(f, (started, started))
    os.utime(folder, (started, started))
    return folder


def make_entry(cache: Path, key: str, mtime: float, size: int = 50) -> Path:
    """A cache entry of the one-file-per-entry layout, ``size`` bytes, last written at ``mtime``."""
    return make_cache_file(cache / key[:2] / key[2:4] / f"{key}.json", mtime, size)


def make_pack(cache: Path, name: str, mtime: float, size: int = 80) -> Path:
    """A cache pack file named ``name`` (host-pid-token.pack), last written at ``mtime``."""
    return make_cache_file(cache / "packs" / "m-0123456789abcdef" / name, mtime, size)


def make_cache_file(path: Path, mtime: float, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"y" * size)
    os.utime(path, (mtime, mtime))
    return path


def test_runs_lists_newest_first_including_a_killed_run(tmp_path):
    now = time.time()
    make_run(tmp_path, "old", now - 10 * DAY)
    make_run(tmp_path, "new", now - DAY)
    killed = tmp_path / "runs" / "killed"
    killed.mkdir()
    (killed / "results.jsonl").write_text('{"case_id": "a"}\n{"case_id": "b"}\n')
    out = blocks(cli("runs", "--runs-dir", str(tmp_path / "runs")).stdout)
    assert [block[0].split()[0] for block in out] == ["killed", "new", "old"]
    assert out[0][0].endswith("incomplete") and field(out[0], "cases") == "2 so far"
    assert not any("toolbench accuracy" in line for line in out[1])
    assert field(out[1], "toolhop accuracy") == "direct=50.0%"
    assert [r["run_id"] for r in json.loads(cli("runs", "--runs-dir", str(tmp_path / "runs"),
                                                 "--json", "-n", "1").stdout)] == ["killed"]


def test_a_partial_run_of_repeats_says_how_many_runs_it_has():
    from pytest_toolbench.runs.listing import render_runs
    from pytest_toolbench.runs.record import RunIndex

    whole = RunIndex(run_id="whole", n_cases=5, n_runs=15, repeats=3)
    part = RunIndex(run_id="part", status="interrupted", partial=True, n_cases=5, n_runs=7, repeats=3)
    out = blocks(render_runs([whole, part], 80))
    assert [field(b, "cases") for b in out] == ["5 x3", "5 x3 (7 of 15 runs)"]


def test_a_long_interruption_reason_is_a_field_of_its_own_in_a_block():
    """A ``pytest.exit``'s reason does not fit the block's first line; wrapped there, its rest
    read as the block's next line. It gets a field; a short reason stays in the status."""
    from pytest_toolbench.runs.listing import render_runs
    from pytest_toolbench.runs.record import RunIndex

    why = "pytest.exit: pytest-toolbench: familytool: no runner on this machine"
    long_ = RunIndex(run_id="long", status="interrupted", partial=True, interrupted_by=why)
    short = RunIndex(run_id="short", status="interrupted", partial=True, interrupted_by="SIGTERM")
    text = render_runs([long_, short], 80)
    assert all(len(line) <= 80 for line in text.splitlines())
    first, second = blocks(text)
    assert first[0].endswith("  partial") and first[1].startswith("    interrupted by: pytest.exit")
    assert why in " ".join(" ".join(first).split())
    assert second[0].endswith("  partial (SIGTERM)")
    assert not any(line.startswith("    interrupted by:") for line in second)


def test_a_run_pytest_stopped_early_says_why_in_its_block():
    """A run -x stopped read "incomplete", as one that lost a worker; it says it stopped early
    and why. A run that lost cases otherwise stays "incomplete", with no reason."""
    from pytest_toolbench.runs.listing import render_runs
    from pytest_toolbench.runs.record import RunIndex

    stopped = RunIndex(run_id="stopped", status="incomplete", partial=True, n_cases=2,
                       pytest_stop="-x/--maxfail=1 stopped the run")
    lost = RunIndex(run_id="lost", status="incomplete", partial=True, n_cases=2)
    first, second = blocks(render_runs([stopped, lost], 80))
    assert first[0].endswith("  stopped early")
    assert field(first, "reason") == "-x/--maxfail=1 stopped the run"
    assert second[0].endswith("  incomplete")
    assert not any(line.strip().startswith("reason:") for line in second)


def test_prune_by_age_removes_old_runs_and_cache_entries_and_dry_run_keeps_them(tmp_path):
    now = time.time()
    cache = tmp_path / "cache"
    old_run = make_run(tmp_path, "old", now - 40 * DAY)
    new_run = make_run(tmp_path, "new", now - DAY)
    live = make_run(tmp_path, "live", now - 90 * DAY, status="running", pid=os.getpid())
    old_entry = make_entry(cache, "aabb" + "0" * 60, now - 31 * DAY)
    new_entry = make_entry(cache, "ccdd" + "0" * 60, now - 2 * DAY)

    dry = cli("prune", "--cache-dir", str(cache), "--runs-dir", str(tmp_path / "runs"), "--older-than", "30d", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would remove run old" in dry.stdout and "would remove 1 cache entry" in dry.stdout
    assert "run live" not in dry.stdout  # a running run is never pruned
    assert old_run.exists() and old_entry.exists()

    done = cli("prune", "--cache-dir", str(cache), "--runs-dir", str(tmp_path / "runs"), "--older-than", "30d")
    assert "removed run old" in done.stdout
    assert not old_run.exists() and not old_entry.exists() and not (cache / "aa").exists()
    assert new_run.exists() and new_entry.exists() and live.exists()


def test_prune_says_when_the_project_s_view_still_shows_a_removed_run(tmp_path):
    """The site beside the runs folder keeps its own copy of each run it shows: a pruned run
    stayed in it (pages and case data) with no word of it."""
    now = time.time()
    make_run(tmp_path, "old", now - 40 * DAY)
    make_run(tmp_path, "new", now - DAY)
    args = ["prune", "--runs-dir", str(tmp_path / "runs"), "--only", "runs", "--older-than", "30d"]
    quiet = cli(*args, "--dry-run")  # no site: nothing to say
    assert quiet.returncode == 0 and "site" not in quiet.stderr
    site = tmp_path / "view"
    site.mkdir()
    (site / ".toolbench-view").write_text("")
    dry = cli(*args, "--dry-run")
    assert dry.stderr == (f"toolbench prune: note: the site at {site} would still show the 1 "
                          "removed run (pages and case data) until `toolbench view` builds it "
                          "again\n")
    done = cli(*args)
    assert "removed run old" in done.stdout and "still shows the 1 removed run" in done.stderr
    again = cli(*args)  # nothing removed this time
    assert "site" not in again.stderr


def test_prune_removes_old_cache_packs_but_not_one_a_live_process_writes(tmp_path):
    now = time.time()
    cache = tmp_path / "cache"
    host = safe_name(socket.gethostname())
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    old = make_pack(cache, f"{host}-{dead}-00aa11bb.pack", now - 40 * DAY)
    elsewhere = make_pack(cache, f"otherhost-{os.getpid()}-22cc33dd.pack", now - 40 * DAY)
    # a live process (this one) started after the pack's last write: given a dead writer's pid
    # (after a reboot, say), not the writer; it kept the pack from every prune
    reused = make_pack(cache, f"{host}-{os.getpid()}-44ee55ff.pack", now - 40 * DAY)
    writing = make_pack(cache, f"{host}-{os.getpid()}-88cc99dd.pack", now)  # this process writes it
    new = make_pack(cache, f"{host}-{dead}-66aa77bb.pack", now - DAY)
    done = cli("prune", "--cache-dir", str(cache), "--runs-dir", str(tmp_path / "runs"), "--older-than", "30d")
    assert done.returncode == 0, done.stderr
    assert "removed 3 cache packs" in done.stdout
    assert not old.exists() and not elsewhere.exists() and not reused.exists()
    assert writing.exists() and new.exists()
    by_size = cli("prune", "--cache-dir", str(cache), "--runs-dir", str(tmp_path / "runs"),
                  "--max-size", "0B")
    assert by_size.returncode == 0, by_size.stderr
    assert writing.exists() and not new.exists()  # the pack being written: never removed
    writing.unlink()
    cli("prune", "--cache-dir", str(cache), "--runs-dir", str(tmp_path / "runs"), "--older-than", "30d")
    assert not (cache / "packs").exists()  # emptied folders go too


def test_prune_by_size_removes_the_oldest_items_first(tmp_path):
    now = time.time()
    cache = tmp_path / "cache"
    oldest = make_run(tmp_path, "r1", now - 5 * DAY, size=1000)
    entry = make_entry(cache, "eeff" + "1" * 60, now - 4 * DAY, size=500)
    newer = make_run(tmp_path, "r2", now - 3 * DAY, size=1000)
    sizes = {p: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for p in (oldest, newer)}
    limit = sizes[newer] + 500  # room for the newer run and the entry, not the oldest run
    done = cli("prune", "--cache-dir", str(cache), "--runs-dir", str(tmp_path / "runs"), "--max-size", f"{limit}B")
    assert done.returncode == 0, done.stderr
    assert not oldest.exists() and entry.exists() and newer.exists()
    cli("prune", "--cache-dir", str(cache), "--runs-dir", str(tmp_path / "runs"), "--max-size", "0", "--only", "cache")
    assert not entry.exists() and newer.exists()


def test_prune_removes_only_what_the_harness_wrote(tmp_path):
    """A mistyped --runs-dir . or --cache-dir ~ once removed every old folder there (a project's
    .git, data/ and suites/) and every two-level *.json: only run folders (a run id's name, or
    a run's files) and the cache's own file names are items; the rest is named, and stays."""
    now = time.time()
    project = tmp_path / "project"
    project.mkdir()
    run = make_run(tmp_path, "20250101-000000-abcdef", now - 40 * DAY).rename(
        project / "20250101-000000-abcdef")
    renamed = make_run(tmp_path, "my-baseline", now - 40 * DAY).rename(project / "my-baseline")
    bare = project / "20250102-000000-123456"  # killed before it wrote a file
    bare.mkdir()
    mine = [project / ".git" / "HEAD", project / "data" / "keep.json", project / "ab" / "cd" / "notes.json",
            project / "ab" / "cd" / ("ef01" + "0" * 60 + ".json")]  # a key's name in the wrong folders
    for f in mine:
        make_cache_file(f, now - 40 * DAY, 10)
    for d in (project / ".git", project / "data", project / "ab" / "cd", project / "ab", bare):
        os.utime(d, (now - 40 * DAY, now - 40 * DAY))
    entry = make_entry(project, "0a1b" + "2" * 60, now - 40 * DAY)
    done = cli("prune", "--runs-dir", str(project), "--cache-dir", str(project), "--older-than", "1d")
    assert done.returncode == 0, done.stderr
    assert not run.exists() and not renamed.exists() and not bare.exists() and not entry.exists()
    assert not (project / "0a").exists()  # the entry's emptied shard folders
    assert all(f.exists() for f in mine), sorted(project.rglob("*"))
    assert done.stderr == (f"toolbench prune: note: left alone 3 folders of {project} that are "
                           "not runs (.git, ab, data)\n")
    assert "removed 4 items" in done.stdout


def test_runs_limit_is_a_count_of_newest_runs(tmp_path):
    for i in range(3):
        make_run(tmp_path, f"r{i}", time.time() - i * DAY)
    runs = ("--runs-dir", str(tmp_path / "runs"))
    newest = cli("runs", *runs, "--limit", "2", "--json")
    assert [r["run_id"] for r in json.loads(newest.stdout)] == ["r0", "r1"]
    for bad in ("0", "-3"):  # -3 once listed all but the oldest three; 0 "no runs found"
        proc = cli("runs", *runs, "--limit", bad)
        assert proc.returncode == 2 and f"--limit: {bad}: must be at least 1" in proc.stderr


def test_prune_needs_a_limit_and_rejects_bad_ones(tmp_path):
    assert cli("prune", "--cache-dir", str(tmp_path)).returncode == 2
    bad = cli("prune", "--cache-dir", str(tmp_path), "--older-than", "soon")
    assert bad.returncode == 2 and "--older-than 'soon'" in bad.stderr


def test_a_named_folder_that_does_not_exist_is_named(tmp_path):
    """A mistyped --runs-dir (or $TOOLBENCH_RUNS_DIR, or prune's --cache-dir) read as an empty
    history ("no runs found", "would remove 0 items") without a word on where it looked: the
    folder is named on stderr now. Still exit 0: a CI step may list or prune before the first
    run has made the folder."""
    nope = tmp_path / "nope"
    for args in (("runs", "--runs-dir", str(nope)),
                 ("prune", "--older-than", "1d", "--runs-dir", str(nope), "--cache-dir", str(tmp_path)),
                 ("prune", "--older-than", "1d", "--cache-dir", str(nope), "--runs-dir", str(tmp_path))):
        proc = cli(*args)
        assert proc.returncode == 0 and proc.stderr == f"toolbench {args[0]}: note: no such folder: {nope}\n"
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    named_file = cli("runs", "--runs-dir", str(a_file))  # said "no such folder" of a file it named
    assert named_file.returncode == 0 and named_file.stderr == f"toolbench runs: note: not a folder: {a_file}\n"
    quiet = cli("prune", "--older-than", "1d", "--cache-dir", str(nope), "--runs-dir", str(tmp_path),
                "--only", "runs")
    assert quiet.returncode == 0 and quiet.stderr == ""  # a folder it would not look in
    env = {k: v for k, v in os.environ.items() if k != "TOOLBENCH_RUNS_DIR"}
    by_env = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "runs"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60,
                            env={**env, "TOOLBENCH_RUNS_DIR": str(nope)})
    assert by_env.returncode == 0 and str(nope) in by_env.stderr
    nothing = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "runs"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60, env=env)
    assert nothing.returncode == 0 and "no .toolbench/runs in this folder or above" in nothing.stdout


def test_locate_runs_dir_says_whether_the_folder_found_is_one_the_user_named(tmp_path, monkeypatch):
    monkeypatch.delenv("TOOLBENCH_RUNS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert locate_runs_dir(None) == (tmp_path / ".toolbench" / "runs", False)
    assert locate_runs_dir(tmp_path / "x") == (tmp_path / "x", True)
    monkeypatch.setenv("TOOLBENCH_RUNS_DIR", str(tmp_path / "env"))
    assert locate_runs_dir(None) == (tmp_path / "env", True)
    monkeypatch.setenv("TOOLBENCH_RUNS_DIR", "")  # set but empty: the default, as find_runs_dir
    assert locate_runs_dir(None) == (tmp_path / ".toolbench" / "runs", False)
    assert find_runs_dir(None) == tmp_path / ".toolbench" / "runs"


def test_duration_and_size_units():
    assert parse_duration("30d") == 30 * DAY and parse_duration("12h") == 12 * 3600
    assert parse_duration("2w") == 14 * DAY and parse_duration("7") == 7 * DAY
    assert parse_duration("90min") == 90 * 60 and parse_duration("45s") == 45
    assert parse_duration("2 hours") == 2 * 3600 and parse_duration("1.5d") == 1.5 * DAY
    assert parse_size("2GB") == 2_000_000_000 and parse_size("1GiB") == 2**30
    assert parse_size("500MB") == 500_000_000 and parse_size("123") == 123


def test_prune_refuses_an_age_that_may_mean_minutes_or_months(tmp_path):
    """`1m` read as one minute removed every run of a user who meant a month: 'm' (and months,
    which have no fixed length) are refused in one line that says what to write instead."""
    import pytest

    assert parse_duration("90m") == 90 * 60 and parse_duration("120m") == 7200  # only minutes
    for text in ("1m", "12m", "59m", "1M", "2 m"):
        with pytest.raises(ValueError, match=r"is ambiguous \(minutes or months\?\): write e.g. 90min or 30d"):
            parse_duration(text)
    for text in ("3mo", "1 month", "2months"):
        with pytest.raises(ValueError, match="months have no fixed length: write days, e.g. 30d"):
            parse_duration(text)
    for text in ("1y", "m", "-1d", "1e3d"):
        with pytest.raises(ValueError, match="expected a number with s, min, h, d or w"):
            parse_duration(text)
    run = make_run(tmp_path, "old", time.time() - 3600)
    proc = cli("prune", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"),
               "--older-than", "1m")
    assert proc.returncode == 2 and run.exists()
    assert proc.stderr == ("toolbench prune: --older-than '1m': 'm' is ambiguous (minutes or "
                           "months?): write e.g. 90min or 30d\n")


def test_plan_orders_by_age_and_combines_both_limits():
    items = [Item("cache", Path("c"), mtime=100, size=10), Item("run", Path("a"), mtime=10, size=10),
             Item("run", Path("b"), mtime=50, size=10)]
    assert [i.path.name for i in plan(items, older_than_s=60, max_size=None, now=120)] == ["a", "b"]
    assert [i.path.name for i in plan(items, older_than_s=100, max_size=10, now=120)] == ["a", "b"]
    assert plan(items, older_than_s=None, max_size=30, now=120) == []


def _run_suite(tmp_path: Path, suite: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [a if a != "suites/toolhop" else suite for a in suite_cmd(tmp_path, "--model", "oracle", *args)]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env())


def _run_ids(tmp_path: Path) -> list[str]:
    """Run ids as `toolbench runs` prints them, oldest first."""
    return [block[0].split()[0] for block in reversed(blocks(
        cli("runs", "--runs-dir", str(tmp_path / "runs")).stdout))]


def test_runs_shows_each_run_s_gate_verdict_and_exit_status(tmp_path):
    """A run that failed its gates is not just "complete": the gates and exit columns say so;
    nor is one in which no case ran."""
    none = _run_suite(tmp_path, "suites/toolhop", "-k", "no_such_case")
    ok = _run_suite(tmp_path, "suites/toolhop", "--scenario", "direct",
                    "--gate", "toolhop.direct.accuracy>=0.5")
    failed = _run_suite(tmp_path, "suites/toolhop", "--scenario", "direct",
                        "--gate", "toolhop.direct.accuracy>=0.5", "--gate", "toolhop.direct.accuracy>1")
    plain = _run_suite(tmp_path, "suites/toolhop", "--scenario", "direct")
    assert (none.returncode, ok.returncode, failed.returncode, plain.returncode) == (5, 0, 10, 0), \
        failed.stdout[-2000:]
    listed = blocks(cli("runs", "--runs-dir", str(tmp_path / "runs")).stdout)
    newest_first = [(block[0].split(maxsplit=3)[3], field(block, "gates")) for block in listed]
    assert newest_first == [("complete", "-, exit 0 OK"),
                            ("complete", "FAILED 1/3, exit 10 GATE_FAILED"),
                            ("complete", "passed 2/2, exit 0 OK"),
                            ("no case ran", "-, exit 5 NO_CASES")]
    as_json = json.loads(cli("runs", "--runs-dir", str(tmp_path / "runs"), "--json").stdout)
    assert [(r["exit_status"], r["gates_passed"], r["gates_failed"]) for r in as_json] == [
        (0, 0, []), (10, 2, ["toolhop.direct.accuracy>1"]), (0, 2, []), (5, 0, [])]


def test_runs_marks_a_run_that_covered_part_of_a_suite(tmp_path):
    """A --limit run's headline (100% on 2 questions) was listed as a full run's was: nothing
    in `toolbench runs` said it covered 6 of the suite's 18 cases."""
    part = _run_suite(tmp_path, "suites/toolhop", "--limit", "2", "--repeats", "2")
    whole = _run_suite(tmp_path, "suites/toolhop")
    assert (part.returncode, whole.returncode) == (0, 0), part.stdout[-2000:]
    listed = blocks(cli("runs", "--runs-dir", str(tmp_path / "runs")).stdout)
    assert [field(block, "cases") for block in listed] == ["18", "6 x2 (toolhop subset: 6 of 18)"]
    as_json = json.loads(cli("runs", "--runs-dir", str(tmp_path / "runs"), "--json").stdout)
    assert ["subsets" in r for r in as_json] == [False, True]
    assert as_json[1]["subsets"] == {"toolhop": [6, 18]}


def test_compare_takes_run_ids_and_refuses_runs_of_different_benchmarks(tmp_path):
    for _ in range(2):
        assert _run_suite(tmp_path, "suites/toolhop", "--scenario", "direct").returncode == 0
    assert _run_suite(tmp_path, "suites/familytool", "--limit", "1").returncode == 0
    first, second, family = _run_ids(tmp_path)
    cache = ("--runs-dir", str(tmp_path / "runs"))
    same = cli("compare", first, second[:-2], *cache)  # a unique prefix is enough
    assert same.returncode == 0, same.stderr
    assert f"A = oracle ({first})" in same.stdout and "toolhop/direct B vs A: 6 paired" in same.stdout
    mixed = cli("compare", first, family, *cache)
    assert mixed.returncode == 4 and mixed.stdout == ""
    assert mixed.stderr.strip() == (
        f"toolbench compare: runs of different benchmarks cannot be compared: {first} (toolhop) "
        f"vs {family} (familytool); no case can pair")
    unknown = cli("compare", first, "no-such-run", *cache)
    assert unknown.returncode == 2 and "no-such-run: no such report file, and no run with that id" \
        in unknown.stderr and unknown.stderr.count("\n") == 1
    # a run's folder, as a shell tab-completes it, stands for its report (compare and --baseline)
    runs = tmp_path / "runs"
    folders = cli("compare", str(runs / first), str(runs / second))
    assert folders.returncode == 0 and "toolhop/direct B vs A: 6 paired" in folders.stdout, folders.stderr
    from pytest_toolbench.compare.baseline import load_baseline

    assert load_baseline(runs / first, []).run_id == first
    unfinished = runs / "20200101-000000-aaaaaa"
    unfinished.mkdir()
    (unfinished / "run.json").write_text((runs / first / "run.json").read_text())
    other = tmp_path / "not-a-run"
    other.mkdir()
    for folder, said in ((unfinished, "has no report.json (it did not finish"),
                         (other, "a folder that is not a run's")):
        refused = cli("compare", str(runs / first), str(folder))
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1 and str(folder) in refused.stderr
    by_id = cli("compare", first, unfinished.name, *cache)
    assert by_id.returncode == 2 and "has no report.json (it did not finish" in by_id.stderr


def test_no_command_ends_in_a_traceback_when_its_output_is_piped_into_head(tmp_path):
    for i in range(2):
        make_run(tmp_path, f"r{i}", time.time() - i * DAY)
    commands = [["runs", "--runs-dir", str(tmp_path / "runs"), "--json"],
                ["runs", "--runs-dir", str(tmp_path / "runs")]]
    for args in commands:
        # A reader that closes the pipe at once: every write of ours hits EPIPE.
        proc = subprocess.Popen([sys.executable, "-m", "pytest_toolbench.cli", *args], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 1, err
        assert "Traceback" not in err and "BrokenPipeError" not in err and err == ""


def test_runs_dir_is_its_own_setting_and_found_from_a_subfolder(tmp_path):
    """--cache-dir elsewhere leaves the run history where it was; `toolbench runs` finds the
    project's .toolbench/runs from any subfolder (as git finds its repository)."""
    project = tmp_path / "project"
    (project / "sub" / "deeper").mkdir(parents=True)
    make_run(project / ".toolbench", "r1", time.time() - DAY)
    env = {k: v for k, v in os.environ.items() if k != "TOOLBENCH_RUNS_DIR"}
    listed = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "runs"], cwd=project / "sub" / "deeper",
                            capture_output=True, text=True, timeout=60, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "r1" in listed.stdout
    from pytest_toolbench.runs.store import find_runs_dir, nearest, DEFAULT_RUNS_DIR

    assert nearest(DEFAULT_RUNS_DIR, project / "sub") == project / ".toolbench" / "runs"
    assert find_runs_dir(tmp_path / "x") == tmp_path / "x"


@pytest.mark.parametrize("settings", [
    ("pyproject.toml", '[tool.pytest.ini_options]\ntoolbench_runs_dir = "out/runs"\n'),
    ("pytest.ini", "[pytest]\ntoolbench_runs_dir = out/runs\n"),
    ("setup.cfg", "[tool:pytest]\ntoolbench_runs_dir = out/runs\n"),
])
def test_the_commands_find_the_runs_folder_the_settings_file_names(tmp_path, settings):
    """Every option can live in the settings file (README), --runs-dir too; the plugin kept its
    runs there, but ``toolbench runs`` looked in .toolbench/runs only: "no runs found". The
    commands read the file pytest reads, its path taken from the file's folder, from any
    subfolder; in the plugin's order: --runs-dir first, $TOOLBENCH_RUNS_DIR only a default the
    file overrides."""
    from pytest_toolbench.runs.store import find_cache_dir, find_runs_dir, settings_file_path

    project = tmp_path / "project"
    (project / "suites" / "x").mkdir(parents=True)
    name, text = settings
    (project / name).write_text(text)
    make_run(project / "out", "kept-there", time.time() - DAY)
    make_run(project / ".toolbench", "not-this", time.time() - DAY)
    plain = {k: v for k, v in os.environ.items() if k != "TOOLBENCH_RUNS_DIR"}
    for where in (project, project / "suites" / "x"):
        listed = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "runs"], cwd=where,
                                capture_output=True, text=True, timeout=60, env=plain)
        assert listed.returncode == 0, listed.stderr
        assert "kept-there" in listed.stdout and "not-this" not in listed.stdout
    assert settings_file_path("toolbench_runs_dir", project / "suites") == project / "out" / "runs"
    assert settings_file_path("toolbench_cache_dir", project) is None
    listed = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "runs"], cwd=project,
                            capture_output=True, text=True, timeout=60,
                            env={**plain, "TOOLBENCH_RUNS_DIR": str(project / ".toolbench" / "runs")})
    assert "kept-there" in listed.stdout and "not-this" not in listed.stdout
    listed = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "runs", "--runs-dir",
                             str(project / ".toolbench" / "runs")], cwd=project,
                            capture_output=True, text=True, timeout=60, env=plain)
    assert "not-this" in listed.stdout and "kept-there" not in listed.stdout
    assert find_runs_dir(tmp_path / "given") == tmp_path / "given"
    assert find_cache_dir(tmp_path / "c") == tmp_path / "c"


def test_a_settings_file_pytest_refuses_leaves_the_commands_on_their_default(tmp_path, monkeypatch):
    """setup.cfg's plain [pytest] section is one pytest fails on (pytest.fail, a BaseException):
    the commands keep their default rather than end in a traceback."""
    from pytest_toolbench.runs.store import find_runs_dir

    (tmp_path / "setup.cfg").write_text("[pytest]\ntoolbench_runs_dir = out/runs\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLBENCH_RUNS_DIR", raising=False)
    assert find_runs_dir() == tmp_path / ".toolbench" / "runs"


def test_a_plain_test_session_under_xdist_leaves_no_run_folder(tmp_path):
    """The plugin loads in every pytest of an environment that installs it: a project's own
    tests, run with -n 2, get no (empty) run folder in its .toolbench/runs. The xdist controller
    once made one at session end, to look for worker journals a plain session never has."""
    (tmp_path / "test_plain.py").write_text("def test_one():\n    pass\n")
    plain_env = {k: v for k, v in env().items() if k != "TOOLBENCH_RUNS_DIR"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "-n", "2", "test_plain.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=plain_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (tmp_path / ".toolbench").exists(), sorted((tmp_path / ".toolbench").rglob("*"))


STOP_REPORT = '''
import errno

from pytest_toolbench.runs import record


def save_report(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


record.save_report = save_report
'''


def test_a_run_whose_end_cannot_write_its_report_is_listed_stopped_and_finish_scores_it(tmp_path):
    """The run folder's disk full at the run's end: run.json still said "running", so
    `toolbench runs` called the run killed (exit ``?``). Now it names the failure and the exit
    status, keeps the run's start, and `toolbench finish` scores the journal once there is room,
    as the run's own end would have: stopped by that output failure (exit OUTPUT_ERROR)."""
    (tmp_path / "stop_report.py").write_text(STOP_REPORT)
    proc = subprocess.run(suite_cmd(tmp_path, "--model", "oracle", "--scenario", "direct",
                                    "-p", "stop_report", "--gate", "toolhop.direct.accuracy>=0.5"),
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**env(), "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 13, proc.stdout[-2000:] + proc.stderr[-2000:]
    (folder,) = (tmp_path / "runs").iterdir()
    assert not (folder / "report.json").exists()
    index = json.loads((folder / "run.json").read_text())
    assert index["status"] == "incomplete" and index["exit_status"] == 13 and index["start"]
    assert index["stopped_by"]["what"] == "run folder's report"
    assert "ENOSPC" in index["stopped_by"]["error"]
    [block] = blocks(cli("runs", "--runs-dir", str(tmp_path / "runs")).stdout)
    assert block[0].endswith("  disk full (toolbench finish scores it)"), block
    assert field(block, "gates") == "-, exit 13 OUTPUT_ERROR"  # (verdicts are in the report)
    assert all(len(line) <= 80 for line in block), block

    done = cli("finish", folder.name, "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stdout + done.stderr  # (finish itself succeeded)
    report = json.loads((folder / "report.json").read_text())
    assert report["run"]["exit_status"] == 13 and report["run"]["interrupted_by"] is None
    assert "ENOSPC" in report["run"]["output_errors"][0]
    assert [g["kind"] for g in report["gates"] if not g["passed"]] == ["output"]
    assert len(load_record(folder / "report.json").cases) == 6  # every case, from the journal


def test_the_last_word_of_a_run_on_a_full_disk_is_written_where_the_index_lies(tmp_path, monkeypatch):
    """runs/record.py ``write_index(..., in_place_when_full=True)``: the atomic write needs a new
    file, which a full disk refuses; the index is then overwritten in the blocks it holds, if the
    new text fits there, else the write fails as before."""
    from pytest_toolbench.runs import record

    folder = make_run(tmp_path, "r1", time.time(), status="running")
    before = record.read_index(folder)
    assert before is not None

    def full(path, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(record, "atomic_write_text", full)
    with pytest.raises(OSError):
        record.write_index(folder, before.model_copy(update={"status": "incomplete"}))
    record.write_index(folder, before.model_copy(update={"status": "incomplete"}),
                       in_place_when_full=True)
    after = record.read_index(folder)
    assert after is not None and after.status == "incomplete" and after.model == "m-r1"
    huge = before.model_copy(update={"model": "m" * 1_000_000})
    with pytest.raises(OSError):  # does not fit the file's blocks: untouched
        record.write_index(folder, huge, in_place_when_full=True)
    assert record.read_index(folder) == after
