"""entry_points.load_group: each installed entry point loads or is left out with its reason, so
one broken package never stops a run that does not need it (tests/test_broken_entry_points.py
runs the whole path in pytest subprocesses)."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from pytest_toolbench import entry_points

GROUP = "toolbench.test-group"


@pytest.fixture
def points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A module ``plugs_mod`` on the path, and ``set(points)`` to choose the group's entry points."""
    (tmp_path / "plugs_mod.py").write_text("A = 'a'\nB = 'b'\nBAD = 3\n", encoding="utf-8")
    (tmp_path / "exiting_mod.py").write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(entry_points, "_LEFT_OUT", {})
    monkeypatch.setattr(entry_points, "_TOLD", set())
    chosen: list[EntryPoint] = []
    monkeypatch.setattr(entry_points, "entry_points_of", lambda group: chosen if group == GROUP else [])

    def choose(*pairs: tuple[str, str]) -> None:
        chosen[:] = [EntryPoint(name=n, value=v, group=GROUP) for n, v in pairs]

    return choose


def _must_be_text(point: EntryPoint, loaded: object) -> str:
    if not isinstance(loaded, str):
        raise ValueError(f"not text: {loaded!r}")
    return loaded.upper()


def test_each_entry_point_loads_or_is_left_out_with_its_reason(points) -> None:
    points(("z", "plugs_mod:A"), ("a", "plugs_mod:B"), ("gone", "no_such_mod:X"), ("attr", "plugs_mod:MISSING"),
           ("bad", "plugs_mod:BAD"), ("builtin", "plugs_mod:A"), ("quiet", "plugs_mod:A"),
           ("exits", "exiting_mod:X"))
    found = entry_points.load_group(GROUP, "widget", taken=["builtin"], shadowed=["quiet"],
                                    check=_must_be_text)
    assert found == {"a": "B", "z": "A"} and list(found) == ["a", "z"]  # name order, as checked
    assert {r.name: r.reason for r in entry_points.left_out(GROUP)} == {
        "attr": "AttributeError: module 'plugs_mod' has no attribute 'MISSING'",
        "bad": "not text: 3",
        "builtin": "the built-in widget of that name comes first",
        "exits": "SystemExit: 3",
        "gone": "ModuleNotFoundError: No module named 'no_such_mod'",
    }
    assert entry_points.left_out("another.group") == []
    assert entry_points.left_out_named(GROUP, "gone").text() == (
        "widget entry point 'gone' (no_such_mod:X) was left out: "
        "ModuleNotFoundError: No module named 'no_such_mod'")
    # named in an error once: the end's warning does not say it again
    assert [r.name for r in entry_points.left_out()] == ["attr", "bad", "builtin", "exits"]
    assert entry_points.left_out_named(GROUP, "a") is None


def test_a_name_twice_keeps_the_first_and_a_reload_forgets_the_last_verdicts(points) -> None:
    points(("same", "plugs_mod:A"), ("same", "plugs_mod:B"))
    assert entry_points.load_group(GROUP, "widget") == {"same": "a"}
    [refused] = entry_points.left_out(GROUP)
    assert refused.reason == "another package's widget entry point of that name came first"
    points(("same", "plugs_mod:B"))
    assert entry_points.load_group(GROUP, "widget") == {"same": "b"} and entry_points.left_out(GROUP) == []
