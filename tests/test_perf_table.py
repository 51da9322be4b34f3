"""perf/run.py's table of issue 32's goals: each row's verdict against its in-run reference, and
the table at 100 columns. No timing here: the figures come from a perf run, these tests check
how they are judged and printed (a failed run, a skipped reference, the restated goal)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

PERF = Path(__file__).resolve().parents[1] / "perf"
sys.path.insert(0, str(PERF))

import goal_table  # noqa: E402
import run as perf_run  # noqa: E402
from goal_table import Goal, ratio, render  # noqa: E402


def _run(calls: int, wall: float, cpu: float, in_flight: int = 64, ok: bool = True) -> dict:
    """An efficiency run's figures as perf/run.py's efficiency_run returns them."""
    ideal = calls * 0.5 / in_flight
    return {"ok": ok, "rc": 0 if ok else 1, "calls": calls, "wall_s": wall, "ideal_s": ideal,
            "in_flight": in_flight, "efficiency": round(ideal / wall, 3) if ok else None,
            "harness_cpu_s": cpu, "endpoint_cpu_s": 0.5, "machine_busy": 0.6, "cores": 2,
            "to_first_request_s": 0.9, "busy_s": wall - 1, "busy_efficiency": 0.9,
            "after_last_reply_s": 0.1, "tail": ""}


def test_verdicts() -> None:
    assert Goal("a", 0.96, 0.95).met is True
    assert Goal("a", 0.9, 0.95).missed
    assert Goal("b", 2.1, 2.0, higher_is_better=False).missed
    # A failed run has no value: a miss, never a pass.
    assert Goal("c", None, 0.95).missed
    # A reference row is neither met nor missed.
    ref = Goal("d", 3.0, None)
    assert ref.met is None and not ref.missed and ref.met_cell() == "ref"
    # Its reference step skipped: not checked, says so, not counted.
    skipped = Goal("e", None, 0.9, unchecked="the 64-in-flight run was skipped")
    assert skipped.met is None and not skipped.missed and skipped.met_cell() == "skip"
    # The restatement: verdict shown in brackets, left out of the exit status.
    restated = Goal("f", 2.5, 2.0, higher_is_better=False, counted=False, goal_text="restated")
    assert restated.met is False and not restated.missed
    assert restated.met_cell() == "(NO)" and restated.goal_cell() == "<= 2 restated"


def test_ratio_refuses_missing_figures() -> None:
    assert ratio(1.0, 4.0) == 0.25
    assert ratio(None, 4.0) is None
    assert ratio(1.0, None) is None
    assert ratio(1.0, 0.0) is None


def test_efficiency_drop_and_rise() -> None:
    falls = perf_run.drop_goal({64: 0.80, 128: 0.74, 256: 0.45}, 64, 128)
    assert falls.value == pytest.approx(0.06) and falls.missed
    rises = perf_run.drop_goal({64: 0.80, 128: 0.82, 256: 0.45}, 64, 128)
    assert rises.value == pytest.approx(-0.02) and rises.met is True
    assert perf_run.drop_goal({64: 0.80, 128: None, 256: 0.45}, 64, 128).missed


def test_rerun_that_called_the_model_is_a_miss() -> None:
    first = _run(1000, 10.0, 8.0)
    assert perf_run.rerun_speedup(first, 2.0, 0, 0) == 5.0
    assert perf_run.rerun_speedup(first, 2.0, 0, 3) is None  # not a cached re-run at all
    assert perf_run.rerun_speedup(first, 2.0, 1, 0) is None  # died early: not fast
    floor = {"max_speedup": 8.0, "wall_s": 1.25, "cases": 1000}
    goal = perf_run.rerun_goal("cached re-run", {"speedup": 6.4, "wall_s": 1.56, "rc": 0, "calls_sent": 0},
                               floor)
    assert goal.value == 0.8 and goal.met is True and goal.reference == "6.4x of 8x"
    missed = perf_run.rerun_goal("cached re-run", {"speedup": None, "wall_s": 1.0, "rc": 0,
                                                   "calls_sent": 5}, floor)
    assert missed.missed


def test_cpu_per_call_rows() -> None:
    run, floor = _run(1000, 10.0, 7.45), {"cpu_per_test_ms": 1.16, "cases": 1000}
    issue = perf_run.cpu_per_call_goal("64", run, floor)
    assert issue.value == pytest.approx(6.42) and issue.missed
    sdk = {"process_cpu_per_call_ms": 1.64, "calls": 1000, "cpu_per_call_ms": 0.9, "setup_cpu_s": 0.6, "rc": 0}
    least = perf_run.sdk_reference_goal("64", sdk, floor)
    assert least.value == pytest.approx((1.16 + 1.64) / 1.16, abs=0.01) and least.met is None
    restated = perf_run.restated_cpu_goal("64", run, floor, sdk)
    assert restated.value == pytest.approx(7.45 / 2.8, abs=0.01) and not restated.counted
    assert perf_run.restated_cpu_goal("64", run, floor, None).met_cell() == "skip"
    # A failed run: no CPU per call, a miss.
    assert perf_run.cpu_per_call_goal("64", _run(1000, 10.0, 7.45, ok=False), floor).missed


def test_upstream_rows() -> None:
    harness = _run(4000, 10.0, 20.0, in_flight=256)
    up = {"threads": 256, "wall_s": 14.0, "rc": 0, "calls": 4000, "records": 4000, "ok": True, "tail": ""}
    assert perf_run.upstream_goal(up, harness, 0.5, 1.3, "why").value == 1.4
    slower = perf_run.upstream_goal({**up, "wall_s": 12.0}, harness, 0.5, 1.3, "why")
    assert slower.missed
    died = perf_run.upstream_goal({**up, "ok": False, "rc": 1}, harness, 0.5, 1.3, "why")
    assert died.value is None and died.missed  # a script that died is never a pass
    # The reach: upstream's wall over 16 rounds of 0.5 s after both imports (0.1 + 0.6 s).
    ceiling = {"import_pytest_s": 0.1, "import_openai_s": 0.6}
    bound = perf_run.upstream_bound({**up, "wall_s": 10.6}, harness, ceiling, 0.5, 1.3)
    assert bound.value == round(10.6 / 8.7, 2) and bound.met is None and not bound.missed
    assert "16 rounds of 0.5s" in bound.note and "goal 1.3x" in bound.note
    assert perf_run.upstream_bound({**up, "ok": False}, harness, ceiling, 0.5, 1.3).value is None


def test_summary_count() -> None:
    assert perf_run.summary_count("...\n==== 5628 passed, 2 warnings in 91.2s ====\n") == 5628
    assert perf_run.summary_count("== 4 passed, 3 wrong, 5 infra-error in 2.26s ==") == 12
    assert perf_run.summary_count("no summary") is None


def test_run_folder_counts_every_file(tmp_path: Path) -> None:
    (tmp_path / "cache" / "ab").mkdir(parents=True)
    (tmp_path / "results.jsonl.gz").write_bytes(b"x" * 300)
    (tmp_path / "report.json").write_bytes(b"x" * 100)
    (tmp_path / "cache" / "ab" / "entry").write_bytes(b"x" * 50)
    (tmp_path / "cache" / "ab" / "empty.lock").write_bytes(b"")
    files = perf_run.folder_files(tmp_path)
    assert files[0] == ("results.jsonl.gz", 300) and len(files) == 4
    assert perf_run.top_level_usage(files)["cache/"] == {"bytes": 50, "files": 2}


def test_table_fits_100_columns() -> None:
    run64, run256 = _run(1000, 9.7, 7.45), _run(4000, 17.0, 21.6, in_flight=256)
    floor = {"cpu_per_test_ms": 1.16, "cases": 1000, "max_speedup": 8.34, "wall_s": 1.163}
    sdk = {"process_cpu_per_call_ms": 1.643, "calls": 1000, "cpu_per_call_ms": 0.84, "setup_cpu_s": 0.58,
           "rc": 0}
    up = {"threads": 64, "wall_s": 9.41, "rc": 0, "calls": 1000, "records": 1000, "ok": True, "tail": ""}
    reads = {"runs": {"wall_s": 0.81, "rc": 0}, "compare": {"wall_s": 14.2, "rc": 0},
             "load": {"wall_s": 5.1, "rc": 0, "load_s": 4.2, "cases": 5628}}
    goals = [
        Goal("efficiency / ceiling, 64 in flight", 0.909, 0.95, reference="0.805 of ceiling 0.886",
             note="x " * 200),
        perf_run.drop_goal({64: 0.805, 128: 0.767, 256: 0.45}, 64, 128),
        *perf_run.simplest_goals({64: run64, 128: run64, 256: run256}, {64: 0.805, 128: 0.767, 256: 0.45},
                                 {"ceiling": 0.886}),
        perf_run.rerun_goal("--cache-only", {"speedup": 2.47, "wall_s": 3.9, "rc": 0, "calls_sent": 0}, floor),
        perf_run.cpu_per_call_goal("256 in flight", run256, floor, "; marginal 1000 -> 4000: 6.46 ms"),
        perf_run.sdk_reference_goal("256 in flight", sdk, floor),
        perf_run.restated_cpu_goal("256 in flight", run256, floor, sdk),
        perf_run.upstream_goal(up, run64, 0.5, 1.0, "never slower"),
        perf_run.upstream_bound(up, run64, {"import_pytest_s": 0.126, "import_openai_s": 0.566},
                                0.5, 1.0),
        Goal("drive rate 10 ms / pytest tests/s", 0.177, 0.5, reference="187.2/s (-n 0 x 256) vs 1057.3/s"),
        perf_run.simplest_drive_goal({"-n 0 x 64": _drive(2000, 4.0, 3.0)}, {"tests_per_s": 1057.3}, 0.177, 2000),
        perf_run.simplest_endpoints_goal({64: run64, 256: run256}, 256, 0.363),
        *perf_run.read_goals("familytool", reads, {"wall_s": 4.1, "rc": 0, "cases": 5628}),
        Goal("familytool run folder / 247.3 MB", 0.999, 0.1, False,
             reference="247.1 MB (5628 cases)", note="/a/very/long/path/" * 20),
    ]
    text = render(goals)
    lines = text.splitlines()
    assert all(len(line) <= goal_table.WIDTH for line in lines), max(lines, key=len)
    for g in goals:  # every row's value and verdict are printed, none cut
        assert g.value_cell() in text and g.met_cell() in text
    assert "restated" in text and "(NO)" in text


def test_a_failed_run_reads_n_a_not_none() -> None:
    """A run that produced no figure prints n/a in its reference and note, not 'Nones'."""
    failed = {**_run(1000, 10.0, 8.0, ok=False), "to_first_request_s": None, "busy_s": None,
              "busy_efficiency": None, "after_last_reply_s": None, "tail": "TypeError: boom"}
    note = perf_run.run_note(failed)
    assert "None" not in note and "first request at n/a" in note and "boom" in note
    goal = perf_run.rerun_goal("cached re-run", {"speedup": None, "wall_s": 1.0, "rc": 1,
                                                 "calls_sent": 0}, {"max_speedup": 3.0})
    assert goal.reference == "n/a of 3x" and goal.missed


def test_failed_runs_print_n_a_in_every_reference() -> None:
    failed, floor = _run(1000, 10.0, 8.0, ok=False), {"cpu_per_test_ms": None, "cases": 1000}
    rows = [perf_run.cpu_per_call_goal("64", failed, floor),
            perf_run.restated_cpu_goal("64", failed, floor, {"process_cpu_per_call_ms": None}),
            perf_run.drop_goal({64: None, 128: None, 256: None}, 64, 128)]
    for row in rows:
        assert "None" not in row.reference and "nan" not in row.reference, row.reference
        assert row.value is None


def test_pytest_floor_is_the_least_of_its_repeats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The floor is a lower bound: the least wall and the least CPU of its repeats, each kept in
    the figures; one failed repeat fails the floor (no ratio is read against it)."""
    figures = iter([(2.8, 0, "", 0, 2.83), (1.6, 0, "", 0, 1.9), (1.9, 0, "", 0, 1.55)])
    monkeypatch.setattr(perf_run, "timed_usage", lambda cmd: next(figures))
    floor = perf_run.pytest_floor(tmp_path, 1000, 16.0)
    assert (floor["wall_s"], floor["cpu_s"], floor["cpu_per_test_ms"]) == (1.6, 1.55, 1.55)
    assert floor["walls_s"] == [2.8, 1.6, 1.9] and floor["max_speedup"] == 10.0
    assert floor["tests_per_s"] == 625.0

    runs = iter([(1.6, 0, "", 0, 1.5), (1.5, 1, "boom", 0, 1.4), (1.7, 0, "", 0, 1.6)])
    monkeypatch.setattr(perf_run, "timed_usage", lambda cmd: next(runs))
    failed = perf_run.pytest_floor(tmp_path, 1000, 16.0)
    assert failed["rc"] == 1 and failed["max_speedup"] is None and failed["tail"] == "boom"
    assert failed["cpu_per_test_ms"] is None and failed["tests_per_s"] is None


def test_bare_floor_leaves_the_plugin_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """plugin=False runs the same command with -p no:toolbench, and only then."""
    commands: list[list[str]] = []
    monkeypatch.setattr(perf_run, "timed_usage", lambda cmd: commands.append(cmd) or (1.0, 0, "", 0, 1.0))
    perf_run.pytest_floor(tmp_path, 10, 5.0)
    perf_run.pytest_floor(tmp_path / "bare", 10, 5.0, plugin=False)
    with_plugin, bare = commands[0], commands[-1]
    assert "no:toolbench" not in with_plugin and bare[-2:] == ["-p", "no:toolbench"]
    assert [a.replace(str(tmp_path / "bare"), str(tmp_path)) for a in bare[:-2]] == with_plugin


def test_paired_floors_run_in_turn_and_keep_each_ones_least(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """With and without the plugin alternate (a slow stretch of the machine meets both), each
    side the least wall and the least CPU of its runs; a failed run is never hidden."""
    walls = iter([1.5, 1.2, 1.4, 1.3, 1.6, 1.1])  # plugin, bare, plugin, bare, ...
    cpus = iter([1.45, 1.25, 1.5, 1.15, 1.35, 1.2])
    commands: list[list[str]] = []

    def fake(cmd: list[str]) -> tuple[float, int, str, int, float]:
        commands.append(cmd)
        return next(walls), 0, "", 0, next(cpus)

    monkeypatch.setattr(perf_run, "timed_usage", fake)
    plugin, bare = perf_run.paired_floors(tmp_path, 1000, 10.0)
    assert [("no:toolbench" in c) for c in commands] == [False, True] * 3
    assert plugin["wall_s"] == 1.4 and plugin["cpu_s"] == 1.35 and plugin["walls_s"] == [1.5, 1.4, 1.6]
    assert bare["wall_s"] == 1.1 and bare["cpu_s"] == 1.15 and bare["repeats"] == 3
    statuses = iter([0, 0, 0, 1, 0, 0])
    monkeypatch.setattr(perf_run, "timed_usage", lambda cmd: (1.0, next(statuses), "boom", 0, 1.0))
    assert perf_run.paired_floors(tmp_path, 1000, 10.0)[1]["rc"] == 1


@pytest.mark.parametrize("shape", sorted(perf_run.FLOOR_TESTS))
def test_each_floor_file_runs_its_tests(tmp_path: Path, shape: str) -> None:
    """The floor files are real pytest files: n tests pass (a broken one would leave the floor
    failed and every ratio read against it unmeasured)."""
    floor = perf_run.pytest_floor(tmp_path, 3, 1.0, shape=shape)
    assert floor["rc"] == 0 and floor["shape"] == shape, floor["tail"]
    bare = perf_run.pytest_floor(tmp_path / "bare", 3, 1.0, shape=shape, plugin=False)
    assert bare["rc"] == 0 and not bare["plugin"], bare["tail"]


def test_simplest_harness_rows_are_goal_twos_reach() -> None:
    """The simplest harness's efficiency over the ceiling and its own drops are references; the
    harness's efficiency over it is named per in-flight count; a skipped one says so."""
    simplest = {64: _run(1000, 9.56, 2.6), 128: _run(2000, 10.09, 4.4, in_flight=128),
                256: _run(4000, 10.68, 7.0, in_flight=256)}
    effs = {64: 0.807, 128: 0.743, 256: 0.668}
    rows = perf_run.simplest_goals(simplest, effs, {"ceiling": 0.88})
    assert [g.name for g in rows] == ["simplest harness / ceiling, 64", "simplest harness drop, 64 -> 128",
                                      "simplest harness drop, 128 -> 256"]
    assert all(g.met is None and not g.missed for g in rows)
    assert rows[0].value == ratio(0.817, 0.88) and rows[1].value == 0.043 and rows[2].value == 0.042
    assert "64: 0.988" in rows[0].note and "256: 0.913" in rows[0].note
    failed = perf_run.simplest_goals({**simplest, 256: _run(4000, 10.68, 7.0, 256, ok=False)}, effs,
                                     {"ceiling": 0.88})
    assert failed[2].value is None and failed[2].value_cell() == "n/a"
    skipped = perf_run.simplest_goals({}, effs, {"ceiling": 0.88})
    assert skipped[0].met_cell() == "skip" and not skipped[0].missed


def _drive(calls: int, wall: float, busy: float | None, ok: bool = True) -> dict:
    """A drive run's figures with its rates, as perf/run.py's measure_drive keeps them."""
    return perf_run.with_rates({**_run(calls, wall, 3.0, ok=ok), "busy_s": busy})


def test_simplest_harness_drive_rate_is_goal_threes_reach() -> None:
    """The simplest harness's best drive rate over pytest's tests/s, a reference naming the
    harness's share of it; a failed setting never wins, a skipped harness says so."""
    floor = {"tests_per_s": 1500.0, "wall_s": 1.33, "rc": 0}
    simplest = {"-n 0 x 64": _drive(2000, 4.0, 3.0), "-n 0 x 256": _drive(2000, 5.0, 4.0)}
    row = perf_run.simplest_drive_goal(simplest, floor, 0.3, 2000)
    assert row.value == ratio(500.0, 1500.0) and row.met_cell() == "ref" and not row.missed
    assert row.reference == "harness 0.3 = 0.901 of it"  # 0.3 / 0.333
    assert "(-n 0 x 64)" in row.note and "-n 0 x 256: 400/s (busy span 500/s" in row.note
    failed = {"-n 0 x 64": _drive(2000, 1.0, None, ok=False), "-n 0 x 256": _drive(2000, 5.0, 4.0)}
    row = perf_run.simplest_drive_goal(failed, floor, 0.3, 2000)
    assert row.value == ratio(400.0, 1500.0) and "-n 0 x 64: n/a/s" not in row.note
    assert "-n 0 x 64: n/a (busy span n/a" in row.note
    assert perf_run.simplest_drive_goal({}, floor, 0.3, 2000).met_cell() == "skip"
    none_ok = {"-n 0 x 64": _drive(2000, 1.0, None, ok=False)}
    assert perf_run.simplest_drive_goal(none_ok, floor, 0.3, 2000).value is None


def test_simplest_harness_at_the_endpoints_in_flight_is_their_reach() -> None:
    """4 endpoints x 64 keep 256 in flight: the simplest harness's 256 over its 64 is the
    reference; an in-flight count it did not run at says skip."""
    simplest = {64: _run(1000, 9.56, 2.6), 256: _run(4000, 10.68, 7.0, in_flight=256)}
    row = perf_run.simplest_endpoints_goal(simplest, 256, 0.67)
    assert row.name == "simplest harness 256 / 64 in flight" and row.met_cell() == "ref"
    assert row.value == ratio(simplest[256]["efficiency"], simplest[64]["efficiency"])
    assert "harness efficiency 0.67" in row.note
    assert perf_run.simplest_endpoints_goal(simplest, 192, 0.67).met_cell() == "skip"
    assert perf_run.simplest_endpoints_goal({}, 256, 0.67).met_cell() == "skip"


def test_the_simplest_harness_sends_every_case_and_passes(tmp_path: Path) -> None:
    """perf/minimal_harness.py is a real pytest run over the real SDK: every case's request
    reaches the endpoint, at most ``in_flight`` at a time, and every test passes."""
    data = perf_run.make_toolhop_data(tmp_path / "data", 12)
    server = perf_run.FakeEndpoints(perf_run.SAMPLE, 0.05)
    try:
        run = perf_run.minimal_harness_run(server, data, 0.05, 4, tmp_path / "simplest")
    finally:
        server.close()
    assert run["ok"] and run["calls"] == 12 and run["peak_in_flight"] == 4, run["tail"]
    assert "12 passed" in run["tail"]
    # 12 calls, 4 in flight: 8 gaps between a reply leaving and the request that took its place
    turnaround = run["turnaround"]
    assert turnaround is not None and turnaround["gaps"] == 8, turnaround
    assert 0 <= turnaround["mean_ms"] <= turnaround["p90_ms"] <= turnaround["max_ms"], turnaround
    assert "turnaround" in perf_run.run_note(run)


def test_turnaround_is_the_wait_for_each_freed_place() -> None:
    """Request k + in_flight arrives after reply k left; times in any order, in seconds."""
    # 2 in flight: replies at 1.0, 1.1, 2.0, 2.1; requests 3..6 at 1.01, 1.13, 2.0, 2.15 (and
    # requests 1, 2 at 0): gaps 10, 30, 0, 50 ms -> mean 22.5, p90 the 4th smallest's index 2: 30
    arrivals = [2.15, 0.0, 1.01, 0.0, 2.0, 1.13]
    replies = [2.1, 1.0, 2.0, 1.1, 3.0, 3.1]
    figures = perf_run.window_turnaround(arrivals, replies, 2)
    assert figures == {"mean_ms": 22.5, "p90_ms": 30.0, "max_ms": 50.0, "gaps": 4}
    # a window wider than in_flight reads negative; fewer calls than the window: nothing to say
    assert perf_run.window_turnaround([0.0, 0.0, 0.5], [1.0, 1.0, 1.0], 1)["mean_ms"] == -750.0
    assert perf_run.window_turnaround([0.0, 0.0], [1.0, 1.0], 2) is None
    assert perf_run.turnaround_note(None) == "turnaround n/a"


def test_fixture_floor_is_a_reference_beside_goal_five() -> None:
    rerun = {"wall_s": 4.0, "rc": 0}
    goal = perf_run.fixture_floor_goal(rerun, {"wall_s": 1.6, "rc": 0}, {"wall_s": 2.0, "rc": 0, "cases": 1000})
    assert goal.value == 2.0 and goal.met_cell() == "ref"
    assert "1.25x the no-op floor" in goal.note and "at most 0.8 of the floor's speed-up" in goal.note
    failed = perf_run.fixture_floor_goal(rerun, {"wall_s": 1.6, "rc": 0}, {"wall_s": 2.0, "rc": 1, "cases": 1000})
    assert failed.value is None


def test_plugin_floor_is_the_floor_with_the_plugin_over_pytests_own() -> None:
    """The no-op floor as users have it (the plugin loaded) over pytest's own, with what the
    plugin adds in wall and CPU; a failed floor on either side reads n/a."""
    floor = {"wall_s": 1.32, "cpu_s": 1.3, "rc": 0, "cases": 1000}
    bare = {"wall_s": 1.05, "cpu_s": 1.01, "rc": 0, "cases": 1000}
    goal = perf_run.plugin_floor_goal(floor, bare)
    assert goal.value == 1.26 and goal.met_cell() == "ref" and goal.reference == "1.32s vs 1.05s"
    assert "0.27s wall, 0.29s CPU" in goal.note
    failed = perf_run.plugin_floor_goal(floor, {**bare, "rc": 1})
    assert failed.value is None and "n/a wall, n/a CPU" in failed.note


def test_drive_bound_is_a_reference_beside_goal_three(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest's CPU for N no-op tests plus the SDK alone's for N calls, over the cores, or
    pytest's own wall when longer; over pytest's tests/s."""
    monkeypatch.setattr(perf_run, "usable_cores", lambda: 2)
    floor = {"wall_s": 1.4, "cpu_s": 1.4, "rc": 0}
    sdk = {"cpu_per_call_ms": 1.15, "setup_cpu_s": 0.8}
    goal = perf_run.drive_bound_goal(2000, floor, sdk, 0.26)
    # (1.4 + 0.8 + 2000 x 1.15 ms) / 2 cores = 2.25 s against pytest's 1.4 s
    assert goal.value == pytest.approx(1.4 / 2.25, abs=1e-3) and goal.met_cell() == "ref"
    assert goal.reference == "harness 0.26 = 0.418 of it"
    cheap_sdk = perf_run.drive_bound_goal(2000, floor, {"cpu_per_call_ms": 0.1, "setup_cpu_s": 0.1}, 0.26)
    assert cheap_sdk.value == 1.0  # pytest's own wall is the bound then
    loaded = perf_run.drive_bound_goal(2000, floor, sdk, 0.26, load=1)  # 2 of 3 processes' share
    assert loaded.value == pytest.approx(1.4 / (4.5 / (2 * 2 / 3)), abs=1e-3) and "1.33 cores" in loaded.note
    assert perf_run.drive_bound_goal(2000, floor, None, 0.26).met_cell() == "skip"
    assert perf_run.drive_bound_goal(2000, {**floor, "rc": 1}, sdk, 0.26).value is None


def test_best_of_keeps_the_fastest_run_and_never_hides_a_failure(tmp_path: Path) -> None:
    walls = iter([3.0, 2.0, 2.5])
    best = perf_run.best_of(3, lambda i: {"i": i, "wall_s": next(walls), "ok": True}, ok=lambda r: r["ok"])
    assert best["i"] == 1 and best["repeats_wall_s"] == [3.0, 2.0, 2.5]
    runs = iter([{"wall_s": 1.0, "ok": True}, {"wall_s": 0.5, "ok": False}])
    failed = perf_run.best_of(2, lambda i: next(runs), ok=lambda r: r["ok"])
    assert failed["ok"] is False and failed["repeats_wall_s"] == [1.0, 0.5]
    cpu = perf_run.best_of(2, lambda i: {"process_cpu_s": 2.0 - i}, ok=lambda r: True, key="process_cpu_s")
    assert cpu["process_cpu_s"] == 1.0
    cache = tmp_path / "cache-64" / "cache"
    assert perf_run.repeat_dir(cache, 0) == cache and perf_run.repeat_dir(cache, 1) == tmp_path / "cache-64" / "cache-r1"


def test_loop_thread_script_runs_each_shape_and_writes_its_figures(tmp_path: Path) -> None:
    """perf/loop_thread.py (why the case loop runs on pytest's thread): each of its three floors
    runs and reports; no timing is judged here."""
    import json
    import subprocess

    out = tmp_path / "loop.json"
    proc = subprocess.run([sys.executable, str(PERF / "loop_thread.py"), "--tests", "5", "--repeats", "1",
                           "--json", str(out)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads(out.read_text())
    assert set(figures["best"]) == {"alone", "waking thread (1 ms sleeps)", "thread working 0.5 of each ms"}
    assert all(fig["main_cpu_s"] > 0 and fig["loop_wall_s"] > 0 for fig in figures["best"].values())
    assert "x alone" in proc.stdout


def test_profile_names_each_process_of_an_xdist_run(tmp_path: Path) -> None:
    """perf/profile_calls.py: py-spy's raw stacks of a ``-n 2`` run are split by process, each
    worker apart (execnet's bootstrap command line holds ';', py-spy's frame separator)."""
    import profile_calls

    main = 'process 10:"python -m pytest suites/toolhop -n 2"'
    worker = 'process 11:"python -u -c import sys'
    raw = tmp_path / "raw.txt"
    raw.write_text(
        f"{main};run (a.py:1) 4\n"
        f"{main};{worker};exec(eval(sys.stdin.readline()))\";work (b.py:2) 3\n"
        f'{main};process 12:"python -u -c import sys;exec(eval(sys.stdin.readline()))";work (b.py:2) 2\n'
        f'{main};process 13:"python -m pytest_toolbench.models.sdk_process.server /tmp/s";post (c.py:3) 1\n')
    summary = profile_calls.summarise(profile_calls.read_raw(raw), calls=1, rate=1000, top=5)
    assert {name: p["samples"] for name, p in summary.items()} == {
        "pytest process": 4, "xdist worker (pid 11)": 3, "xdist worker (pid 12)": 2, "SDK process": 1}


def test_a_commands_own_peak_leaves_out_the_script_that_spawned_it() -> None:
    """Linux hands a parent's high-water mark to the child it spawns: the collection step's
    memory per case read perf/run.py's own RSS for its small sizes (s17). The launcher's figure
    is the command's; the plain one is at least the parent's."""
    ballast = bytearray(300 * 1024 * 1024)
    for i in range(0, len(ballast), 4096):  # touched, so it is resident
        ballast[i] = 1
    cmd = [sys.executable, "-c", "print('done')"]
    wall, rc, tail, own = perf_run.timed_own_peak(cmd)
    _, _, _, inherited = perf_run.timed(cmd)
    del ballast
    assert rc == 0 and "done" in tail and wall > 0
    assert inherited > 300 * 1024  # KiB: the parent's 300 MB counted
    assert 0 < own < 100 * 1024  # a bare interpreter, not the parent


def test_a_failed_command_keeps_its_return_code_through_the_launcher() -> None:
    wall, rc, tail, own = perf_run.timed_own_peak([sys.executable, "-c", "import sys; sys.exit(3)"])
    assert rc == 3 and own > 0
