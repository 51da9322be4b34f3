"""The count-and-noun rule every counting line shares (pytest_toolbench/counting.py) and the
attempts phrase the terminal and the run page share (results/infra_errors.py)."""

from __future__ import annotations

import pytest

from pytest_toolbench.counting import counted
from pytest_toolbench.results.infra_errors import attempts_text
from pytest_toolbench.results.partial_run import missing_text


@pytest.mark.parametrize(("n", "text"), [(0, "0 errors"), (1, "1 error"), (2, "2 errors")])
def test_counted_adds_s_unless_exactly_one(n: int, text: str) -> None:
    assert counted(n, "error") == text


def test_counted_puts_the_s_on_the_last_word() -> None:
    assert counted(3, "infrastructure error") == "3 infrastructure errors"
    assert counted(1, "other test") == "1 other test"


def test_counted_takes_a_plural_an_s_would_not_make() -> None:
    assert counted(1, "cache entry", "cache entries") == "1 cache entry"
    assert counted(2, "cache entry", "cache entries") == "2 cache entries"


def test_the_prune_summary_counts_each_kind_with_its_plural(tmp_path) -> None:
    """``1 cache entries``, ``3 item(s)``: the prune summary counts as the rest of the harness."""
    from pytest_toolbench.runs.prune import Item, describe

    entry = Item(path=tmp_path / "cache" / "ab" / "one.json", size=10, mtime=0.0, kind="cache")
    text = describe([entry], [entry], dry_run=True, now=0.0)
    assert "would remove 1 cache entry (" in text and "would remove 1 item," in text
    assert "kept 0 runs and 0 cache files" in text


@pytest.mark.parametrize(("fewest", "most", "text"), [
    (1, 1, "1 attempt per call"),
    (None, 1, "1 attempt per call"),
    (3, 3, "3 attempts per call"),
    (None, 3, "3 attempts per call"),
    (1, 3, "1-3 attempts per call"),
])
def test_attempts_text(fewest: int | None, most: int, text: str) -> None:
    assert attempts_text(fewest, most) == text


def test_missing_text_counts_the_selection_not_the_missing() -> None:
    assert missing_text(["a"], 1) == "1 of 1 selected case has no result: a"
    assert missing_text(["a", "b"], 40) == "2 of 40 selected cases have no result: a, b"
