"""compare_runs on tiny hand-checkable runs: pairing, coverage, subgroups, McNemar, repeats."""

from __future__ import annotations

import json

import pytest

from pytest_toolbench.compare import LoadedRun, RunLoadError, compare_runs, load_run, load_runs
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome
from pytest_toolbench.results.metrics import MetricSpec

SPECS = {
    "bench": (
        MetricSpec(name="accuracy", value="correct"),
        MetricSpec(name="call_error_rate", kind="ratio", value="bad_calls", denominator="calls",
                   higher_is_better=False),
    )
}
LABELS = {"bench": ("hops",)}
#: Ten paired cases: both right on 0-4, only A right on 5 (b=1), only B right on 6-9 (c=4).
A_OK = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
B_OK = [1, 1, 1, 1, 1, 0, 1, 1, 1, 1]


def case(i: int | str, correct: float | None, *, model: str, scenario: str = "s",
         calls: tuple[int, int] | None = None, error: bool = False) -> CaseResult:
    values = {} if correct is None else {"correct": float(correct)}
    if calls is not None:
        values |= {"bad_calls": float(calls[0]), "calls": float(calls[1])}
    return CaseResult(
        case_id=f"bench-{i}-{scenario}", benchmark="bench", scenario=scenario, model=model,
        outcome=Outcome.ERROR if error else (Outcome.PASSED if correct else Outcome.FAILED),
        labels={"hops": 3 if isinstance(i, int) and i < 5 else 4},
        values={} if error else values,
        error=InfraError(kind="http", message="503") if error else None,
    )


def run(label: str, cases: list[CaseResult]) -> LoadedRun:
    return LoadedRun.from_cases(label, cases, SPECS, LABELS, n_boot=500)


@pytest.fixture
def pair() -> tuple[LoadedRun, LoadedRun]:
    a = [case(i, v, model="model-a") for i, v in enumerate(A_OK)]
    b = [case(i, v, model="model-b") for i, v in enumerate(B_OK)]
    return run("model-a", a), run("model-b", b)


def test_ten_paired_cases_by_hand(pair) -> None:
    comp = compare_runs(list(pair), SPECS, LABELS, n_boot=500)
    row = comp.find("bench.s.accuracy")
    assert row is not None
    assert [v.value for v in row.values] == pytest.approx([0.6, 0.9])
    assert [v.n for v in row.values] == [10, 10]
    d = row.diffs[0]
    assert d.n_paired == 10
    assert d.diff == pytest.approx(0.3)
    assert d.ci_low < 0.3 < d.ci_high
    assert (d.mcnemar.b, d.mcnemar.c, d.mcnemar.method) == (1, 4, "exact")
    assert d.mcnemar.p_value == pytest.approx(12 / 32)
    cov = comp.scenarios[0].coverage[0]
    assert (cov.n_paired, cov.only_in_reference, cov.only_in_run, cov.error_in_either) == (10, 0, 0, 0)
    assert [r.label for r in comp.runs] == ["model-a", "model-b"]


def test_subgroups_pair_within_the_group(pair) -> None:
    comp = compare_runs(list(pair), SPECS, LABELS, n_boot=500)
    three = comp.find("bench.s[hops=3].accuracy").diffs[0]
    four = comp.find("bench.s[hops=4].accuracy")
    assert (three.n_paired, three.diff, three.mcnemar.b, three.mcnemar.c) == (5, 0.0, 0, 0)
    assert (three.ci_low, three.ci_high, three.mcnemar.p_value) == (0.0, 0.0, 1.0)
    # hops=4: cases 5-9; A right on 1 of 5, B on 4 of 5; b=1, c=4.
    assert [v.value for v in four.values] == pytest.approx([0.2, 0.8])
    assert four.diffs[0].diff == pytest.approx(0.6)
    assert (four.diffs[0].mcnemar.b, four.diffs[0].mcnemar.c) == (1, 4)


def test_cases_in_one_run_only_are_counted_not_dropped(pair) -> None:
    a, b = pair
    a_cases = a.cases + [case(10, 0, model="model-a")]
    b_cases = b.cases + [case(11, 1, model="model-b"), case(12, 1, model="model-b")]
    comp = compare_runs([run("A", a_cases), run("B", b_cases)], SPECS, LABELS, n_boot=500)
    cov = comp.scenarios[0].coverage[0]
    assert (cov.n_paired, cov.only_in_reference, cov.only_in_run) == (10, 1, 2)
    row = comp.find("bench.s.accuracy")
    # Each run's own value covers all of its cases; the difference only the paired ones.
    assert [v.value for v in row.values] == pytest.approx([6 / 11, 11 / 12])
    assert row.diffs[0].n_paired == 10 and row.diffs[0].diff == pytest.approx(0.3)
    # and the text says so above the values (a --limit run against a full one read "A 16.67%
    # B 0.00% B - A +0.00 pp" as a contradiction); two runs of the same cases say nothing
    from pytest_toolbench.compare.render import comparison_text
    from pytest_toolbench.report.markdown_report import _comparison

    note = "the runs hold different cases: each value is over its own run's cases"
    text = " ".join(comparison_text(comp, width=80).split())
    assert text.index(note) < text.index("accuracy A ")
    assert any(line.startswith(note) for line in _comparison(comp))  # the Markdown summary
    assert note not in comparison_text(compare_runs(list(pair), SPECS, LABELS, n_boot=50), width=80)


def test_an_infrastructure_error_in_either_run_leaves_the_pair_out(pair) -> None:
    a, b = pair
    a_cases = a.cases + [case(13, 1, model="a")]
    b_cases = b.cases + [case(13, None, model="b", error=True)]
    comp = compare_runs([run("A", a_cases), run("B", b_cases)], SPECS, LABELS, n_boot=500)
    cov = comp.scenarios[0].coverage[0]
    assert (cov.n_paired, cov.error_in_either) == (11, 1)
    assert comp.find("bench.s.accuracy").diffs[0].n_paired == 10


def test_ratio_metric_is_paired_on_sums_and_has_no_mcnemar() -> None:
    a = [case(i, 1, model="a", calls=c) for i, c in enumerate([(1, 2), (0, 2), (2, 2)])]
    b = [case(i, 1, model="b", calls=c) for i, c in enumerate([(0, 2), (0, 2), (1, 2)])]
    comp = compare_runs([run("A", a), run("B", b)], SPECS, LABELS, n_boot=500)
    row = comp.find("bench.s.call_error_rate")
    assert [v.value for v in row.values] == pytest.approx([0.5, 1 / 6])
    assert row.diffs[0].diff == pytest.approx(1 / 6 - 0.5)
    assert row.diffs[0].mcnemar is None
    assert row.higher_is_better is False


def test_repeats_are_averaged_per_case_and_mcnemar_needs_0_1() -> None:
    a = [case(0, 1, model="a"), case(1, 0, model="a")]
    b = [case(0, 1, model="b"), case(0, 0, model="b"), case(1, 1, model="b")]
    comp = compare_runs([run("A", a), run("B", b)], SPECS, LABELS, n_boot=500)
    d = comp.find("bench.s.accuracy").diffs[0]
    # case 0: B mean 0.5 vs 1 -> -0.5; case 1: 1 vs 0 -> +1; mean +0.25
    assert d.n_paired == 2 and d.diff == pytest.approx(0.25)
    assert d.mcnemar is None


def repeated(cases: list[CaseResult], k: int) -> list[CaseResult]:
    """``cases`` as run k of ``--repeats``: ids suffixed ``-r<k>`` as the plugin writes it."""
    return [c.model_copy(update={"case_id": f"{c.case_id}-r{k}", "repeat": k}) for c in cases]


def test_repeat_run_pairs_with_a_plain_baseline_on_the_base_case_id() -> None:
    """A: no repeats. B: --repeats 2 (ids bench-<i>-s-r1/-r2). Case 0: 1 vs mean(1, 0) = 0.5;
    case 1: 0 vs mean(1, 1) = 1; case 2: 1 vs mean(1, 1) = 1. Diff mean (-0.5 + 1 + 0) / 3."""
    a = [case(0, 1, model="a"), case(1, 0, model="a"), case(2, 1, model="a")]
    b = (repeated([case(0, 1, model="b"), case(1, 1, model="b"), case(2, 1, model="b")], 1)
         + repeated([case(0, 0, model="b"), case(1, 1, model="b"), case(2, 1, model="b")], 2))
    comp = compare_runs([run("A", a), run("B", b)], SPECS, LABELS, n_boot=500)
    cov = comp.scenarios[0].coverage[0]
    assert (cov.n_paired, cov.only_in_reference, cov.only_in_run) == (3, 0, 0)
    d = comp.find("bench.s.accuracy").diffs[0]
    assert d.n_paired == 3 and d.diff == pytest.approx(0.5 / 3)
    assert d.mcnemar is None  # case 0's mean 0.5 is not a 0/1 outcome
    sub = comp.find("bench.s[hops=3].accuracy").diffs[0]
    assert sub.n_paired == 3  # labels come through the collapse too


def test_repeat_run_pairs_with_a_repeat_run() -> None:
    """Both runs --repeats 2, every repeat agreeing: cases pair 1:1 on the base id and the
    collapsed outcomes are 0/1 again, so McNemar is back (b = 1: case 1, c = 2: cases 2, 3)."""
    a_ok, b_ok = [1, 1, 0, 0], [1, 0, 1, 1]
    a = [c for k in (1, 2) for c in repeated([case(i, v, model="a") for i, v in enumerate(a_ok)], k)]
    b = [c for k in (1, 2) for c in repeated([case(i, v, model="b") for i, v in enumerate(b_ok)], k)]
    comp = compare_runs([run("A", a), run("B", b)], SPECS, LABELS, n_boot=500)
    cov = comp.scenarios[0].coverage[0]
    assert (cov.n_paired, cov.only_in_reference, cov.only_in_run) == (4, 0, 0)
    d = comp.find("bench.s.accuracy").diffs[0]
    assert d.n_paired == 4 and d.diff == pytest.approx(0.25)
    assert (d.mcnemar.b, d.mcnemar.c) == (1, 2)


def test_three_runs_each_compared_with_the_first(pair) -> None:
    a, b = pair
    c = run("C", [case(i, 1, model="c") for i in range(10)])
    comp = compare_runs([a, b, c], SPECS, LABELS, n_boot=500)
    row = comp.find("bench.s.accuracy")
    assert [d.run for d in row.diffs] == [1, 2]
    assert row.diffs[1].diff == pytest.approx(0.4)
    assert (row.diffs[1].mcnemar.b, row.diffs[1].mcnemar.c) == (0, 4)


def test_a_scenario_in_one_run_only_is_shown_with_coverage(pair) -> None:
    a, b = pair
    extra = [case(i, 1, model="b", scenario="t") for i in range(3)]
    comp = compare_runs([a, run("B", b.cases + extra)], SPECS, LABELS, n_boot=500)
    t = comp.scenario("bench", "t")
    assert t.coverage[0].only_in_run == 3 and t.coverage[0].n_paired == 0
    row = comp.find("bench.t.accuracy")
    assert row.values[0] is None and row.values[1].value == 1.0
    assert row.diffs[0].diff is None and row.diffs[0].n_paired == 0


SPECS_TWO = SPECS | {"other": SPECS["bench"]}
LABELS_TWO = LABELS | {"other": LABELS["bench"]}


def of_other(cases: list[CaseResult]) -> list[CaseResult]:
    return [c.model_copy(update={"benchmark": "other"}) for c in cases]


def with_other(label: str, cases: list[CaseResult], other: list[CaseResult]) -> LoadedRun:
    return LoadedRun.from_cases(label, cases + of_other(other), SPECS_TWO, LABELS_TWO, n_boot=200)


def test_a_benchmark_one_run_lacks_is_named_not_tabulated(pair) -> None:
    """A ToolHop run against a ToolHop + FamilyTool one: FamilyTool's every row was "-" / "n/a"
    and its every scenario "0 paired" (440 of 469 lines); it is one line now, either way round,
    and the benchmark both have is compared as before."""
    from pytest_toolbench.compare.render import comparison_text

    a, b = pair
    both = with_other("both", b.cases, [case(i, 1, model="b") for i in range(3)])
    for runs, line in (([a, both], "other: not compared, A has no case of it (B 3 cases); "
                                   "differences are against A"),
                       ([both, a], "other: only in A (3 cases); no other run has it, so nothing "
                                   "to compare")):
        comp = compare_runs(runs, SPECS_TWO, LABELS_TWO, n_boot=200)
        assert comp.benchmarks() == ["bench"]
        assert [(u.benchmark, u.n_cases) for u in comp.not_compared] == [
            ("other", [0, 3] if runs[0] is a else [3, 0])]
        assert comp.find("bench.s.accuracy").diffs[0].n_paired == 10
        text = comparison_text(comp, width=200)
        assert line in text and "other/s" not in text and "other / s" not in text
    # a run holding both benchmarks twice over: nothing left out, and no key in the JSON
    comp = compare_runs([both, both], SPECS_TWO, LABELS_TWO, n_boot=200)
    assert comp.benchmarks() == ["bench", "other"] and "not_compared" not in comp.model_dump()


def test_a_benchmark_the_reference_and_one_other_run_have_is_compared(pair) -> None:
    """Three runs: A and B have "other", C has not. A and B pair on it; C's cells are "-"."""
    a, b = pair
    three = [case(i, 1, model="x") for i in range(3)]
    runs = [with_other("A", a.cases, three), with_other("B", b.cases, three), run("C", b.cases)]
    comp = compare_runs(runs, SPECS_TWO, LABELS_TWO, n_boot=200)
    assert comp.not_compared == []
    row = comp.find("other.s.accuracy")
    assert [d.n_paired for d in row.diffs] == [3, 0] and row.values[2] is None
    # C's coverage is one line for the benchmark, not "0 paired; only in A: 3" per scenario
    from pytest_toolbench.compare.render import coverage_lines

    assert coverage_lines(comp, "other") == ["other: C has no case of it (its cells are -)",
                                             "other/s B vs A: 3 paired; only in A: 0, only in B: 0"]
    assert "bench/s C vs A: 10 paired; only in A: 0, only in C: 0" in coverage_lines(comp, "bench")


def test_seeded_and_reproducible(pair) -> None:
    one = compare_runs(list(pair), SPECS, LABELS, n_boot=300, seed=3)
    two = compare_runs(list(pair), SPECS, LABELS, n_boot=300, seed=3)
    assert one.model_dump() == two.model_dump()


def test_needs_two_runs(pair) -> None:
    with pytest.raises(ValueError, match="two runs"):
        compare_runs([pair[0]], SPECS, LABELS)


def test_load_errors_are_one_line_with_file_and_index(tmp_path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(RunLoadError, match="nope.json: cannot read"):
        load_run(missing)
    bad = tmp_path / "bad.json"
    bad.write_text('{"cases": [\n  1,')
    with pytest.raises(RunLoadError, match=r"bad.json:2: not JSON"):
        load_run(bad)
    other = tmp_path / "other.json"
    other.write_text('{"x": 1}')
    with pytest.raises(RunLoadError, match="no 'cases' list"):
        load_run(other)
    broken = tmp_path / "broken.json"
    good = case(0, 1, model="m").model_dump(mode="json")
    broken.write_text(json.dumps({"cases": [good, {"case_id": "x"}]}))
    with pytest.raises(RunLoadError) as info:
        load_run(broken)
    assert "broken.json: cases[1]:" in str(info.value) and "\n" not in str(info.value)


def test_a_report_that_is_not_utf8_is_one_line_naming_the_file(tmp_path) -> None:
    binary = tmp_path / "binary.json"
    binary.write_bytes(b'{"cases": [],\n "x": "\xff\xfe"}')
    with pytest.raises(RunLoadError) as info:
        load_run(binary)
    assert str(info.value) == (f"{binary}:2: not JSON (not UTF-8 text: invalid start byte at "
                               "byte 7 of the line)")


def test_loaded_labels_are_made_unique(tmp_path) -> None:
    for name in ("one", "two"):
        (tmp_path / f"{name}.json").write_text(json.dumps({
            "run": {"settings": {"model": "m"}}, "metrics": {"scenarios": []},
            "cases": [case(0, 1, model="m").model_dump(mode="json")]}))
    runs = load_runs([tmp_path / "one.json", tmp_path / "two.json"])
    assert [r.label for r in runs] == ["m (one)", "m (two)"]


def test_cli_refuses_runs_of_different_benchmarks_as_not_comparable(tmp_path, capsys) -> None:
    """Exit 4, as runs with no case in common are (README, Comparing runs), not 2."""
    from pytest_toolbench import cli

    other = case(0, 1, model="m").model_copy(update={"benchmark": "other"})
    for name, result in (("one", case(0, 1, model="m")), ("two", other)):
        (tmp_path / f"{name}.json").write_text(json.dumps({
            "run": {"settings": {"model": "m"}}, "metrics": {"scenarios": []},
            "cases": [result.model_dump(mode="json")]}))
    status = cli.main(["compare", str(tmp_path / "one.json"), str(tmp_path / "two.json")])
    assert status == 4
    assert "runs of different benchmarks cannot be compared" in capsys.readouterr().err


def test_cli_says_when_a_run_is_compared_with_itself(tmp_path, capsys) -> None:
    """The same report twice (here: a file and a symlink to it) is compared, with a note on
    stderr: its paired differences are 0 by construction, which would read like a result."""
    from pytest_toolbench import cli

    one, two = tmp_path / "one.json", tmp_path / "two.json"
    for path in (one, two):
        path.write_text(json.dumps({
            "run": {"settings": {"model": "m"}}, "metrics": {"scenarios": []},
            "cases": [case(0, 1, model="m").model_dump(mode="json")]}))
    (tmp_path / "link.json").symlink_to(one)
    assert cli.main(["compare", str(one), str(two), str(tmp_path / "link.json")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("toolbench compare: note: C (")
    assert "is the same report as A (" in err[0] and "0 by construction" in err[0]
    assert cli.main(["compare", str(one), str(two)]) == 0  # two files with equal content: no note
    assert capsys.readouterr().err == ""


def test_cli_dispatcher_registers_subcommands_from_their_modules(capsys, monkeypatch) -> None:
    import sys
    import types

    from pytest_toolbench import cli

    assert cli.main([]) == 2  # no subcommand: help, usage status
    assert "compare" in capsys.readouterr().out
    mod = types.ModuleType("fake_sub")

    def add_parser(sub):
        p = sub.add_parser("hello")
        p.set_defaults(func=lambda args: 7)
        return p

    mod.add_parser = add_parser
    monkeypatch.setitem(sys.modules, "fake_sub", mod)
    monkeypatch.setattr(cli, "SUBCOMMANDS", cli.SUBCOMMANDS + ("fake_sub",))
    assert cli.main(["hello"]) == 7


def test_plot_writes_a_png_with_one_bar_per_run_and_metric(pair, tmp_path) -> None:
    from pytest_toolbench.compare.plot import plot_comparison

    comp = compare_runs(list(pair), SPECS, LABELS, n_boot=200)
    out = plot_comparison(comp, tmp_path / "sub" / "cmp.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = comp.model_copy(update={"scenarios": []})
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_comparison(empty, tmp_path / "x.png")


def test_rendered_table_shows_values_diff_mcnemar_and_coverage(pair) -> None:
    from pytest_toolbench.compare.render import comparison_text

    comp = compare_runs(list(pair), SPECS, LABELS, n_boot=200)
    text = comparison_text(comp, width=200)  # a wide terminal: one table row per metric
    row = next(line for line in text.splitlines() if line.startswith("| s ") and "| accuracy " in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2].startswith("60.00% [") and cells[3].startswith("90.00% [")
    assert cells[4].startswith("+30.00 pp [") and cells[5] == "1/4 p=0.375" and cells[6] == "10"
    assert "accuracy [hops=4]" in text  # subgroup rows (not eaten as markup)
    assert "bench/s B vs A: 10 paired; only in A: 0, only in B: 0" in text
    assert "A = model-a [reference]" in text
    # at 80 columns (a CI log) the same cells, whole, packed under the metric's name
    narrow = comparison_text(comp, width=80).splitlines()
    at = narrow.index("bench / s")
    assert narrow[at + 1].startswith("  accuracy  A 60.00% [") and " B 90.00% [" in narrow[at + 1]
    assert narrow[at + 2].startswith("    B - A  +30.00 pp [")
    assert narrow[at + 2].endswith("  McNemar 1/4 p=0.375  10 paired")


def test_the_legend_gives_each_run_its_tokens_where_recorded(pair) -> None:
    """Cost beside the scores: a run whose record kept its tokens gets a line under its name
    (and its numbers in the comparison's JSON); one that kept none gets no line."""
    from pytest_toolbench.compare.render import comparison_text
    from pytest_toolbench.results.run_record import CacheCounts
    from pytest_toolbench.results.run_sections import TokenTotals

    a, b = pair
    b.record.run.usage = TokenTotals(prompt_tokens=12_000, completion_tokens=345)
    b.record.run.cache = CacheCounts(model_calls=10, replies_from_cache=4)
    comp = compare_runs([a, b], SPECS, LABELS, n_boot=200)
    text = comparison_text(comp, width=200)
    assert "    tokens: 12,000 prompt + 345 completion over 10 model calls (4 from the cache, " \
           "as recorded)" in text
    assert text.count("    tokens: ") == 1  # A kept none
    refs = json.loads(comp.model_dump_json())["runs"]
    assert "usage" not in refs[0] and refs[1]["usage"] == {"prompt_tokens": 12000, "completion_tokens": 345}
    assert (refs[1]["model_calls"], refs[1]["cached_calls"]) == (10, 4)


def test_a_partial_run_says_why_it_is_partial(pair) -> None:
    """Every partial run was "interrupted", also one -x stopped or one that lost cases."""
    from pytest_toolbench.compare.render import comparison_text

    a, b = pair
    c = run("model-c", [case(i, v, model="model-c") for i, v in enumerate(B_OK)])
    a.record.partial = b.record.partial = c.record.partial = True
    a.record.run.pytest_stop = "-x/--maxfail=1 stopped the run"
    b.record.run.missing_cases = ["bench-8-s", "bench-9-s"]
    c.record.run.interrupted_by = "SIGTERM"
    comp = compare_runs([a, b, c], SPECS, LABELS, n_boot=200)
    text = " ".join(comparison_text(comp, width=200).split())
    assert ("PARTIAL runs (fewer cases than they selected): model-a: -x/--maxfail=1 stopped the "
            "run; model-b: 2 selected cases without a result; model-c: interrupted (SIGTERM)") in text
    refs = json.loads(comp.model_dump_json())["runs"]
    assert refs[2]["partial_reason"] == "interrupted (SIGTERM)"
    d = run("model-d", [case(i, v, model="model-d") for i, v in enumerate(A_OK)])
    whole = compare_runs([c, d], SPECS, LABELS, n_boot=200)
    assert "model-d:" not in comparison_text(whole, width=200)
    assert "partial_reason" not in json.loads(whole.model_dump_json())["runs"][1]


def test_changed_cases_by_id_right_to_wrong_and_back(pair) -> None:
    """A_OK/B_OK: case 5 went right -> wrong, cases 6-9 wrong -> right; an error is not listed."""
    a, b = pair
    b.cases.append(case(10, None, model="model-b", error=True))
    a.cases.append(case(10, 1, model="model-a"))
    comp = compare_runs([a, b], SPECS, LABELS, n_boot=50)
    changes = comp.scenario("bench", "s").changes
    assert [c.model_dump() for c in changes] == [
        {"run": 1, "worse": ["bench-5-s"], "better": [f"bench-{i}-s" for i in (6, 7, 8, 9)]}
    ]
    from pytest_toolbench.compare.render import comparison_text

    text = comparison_text(comp)
    assert "bench/s right in A, wrong in B (1): bench-5-s" in text
    assert "bench/s wrong in A, right in B (4): bench-6-s, bench-7-s, bench-8-s, bench-9-s" in text


def test_a_long_list_of_changed_cases_is_bounded_with_a_count() -> None:
    from pytest_toolbench.compare.changed_cases import SHOWN_IDS, case_changes, changed_lines

    a = [case(i, 1, model="a") for i in range(25)]
    b = [case(i, 0, model="b") for i in range(25)]
    ch = case_changes(a, b, 1)[("bench", "s")]
    assert ch.worse[:3] == ["bench-0-s", "bench-1-s", "bench-2-s"]  # numeric order: 2 before 10
    [line] = changed_lines("bench/s", ch, "B")
    assert line.startswith("bench/s right in A, wrong in B (25): bench-0-s, ")
    assert line.endswith(f"bench-{SHOWN_IDS - 1}-s ... and {25 - SHOWN_IDS} more")


def test_a_repeated_case_is_worse_when_its_share_of_right_runs_went_down() -> None:
    from pytest_toolbench.compare.changed_cases import case_changes

    a = [case(0, 1, model="a"), case(1, 0, model="a")]
    b = repeated([case(0, 1, model="b"), case(1, 1, model="b")], 1)
    b += repeated([case(0, 0, model="b"), case(1, 0, model="b")], 2)
    ch = case_changes(a, b, 1)[("bench", "s")]
    assert (ch.worse, ch.better) == (["bench-0-s"], ["bench-1-s"])
