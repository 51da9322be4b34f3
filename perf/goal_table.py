"""The rows perf/run.py prints: one figure each, read against a reference measured in the same run.

A row is a :class:`Goal`: the figure, its value, the in-run reference it is read against (the
ceiling, pytest's floor, the SDK alone, upstream's script...), the goal and whether it is met.
Issue 32 states every goal as a ratio to such a reference, so the reference is printed beside
the value rather than left in a note: a reader checks the ratio without the JSON file.

The table is rendered by the package's own plain-text table (``pytest_toolbench.text_table``) at
100 columns, the figure and reference cells wrapped between words where they must; each row's note (counts,
seconds, how the figure was taken) follows the table, so the table itself stays scannable.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from pytest_toolbench.text_table import TextTable, render_table

#: The widest line the table and its notes may print (issue 32: readable in 100 columns).
WIDTH = 100


@dataclass
class Goal:
    """One row. ``target`` None: a reference row (printed, never a miss). ``counted`` False: a
    goal shown with its verdict but left out of the exit status (the restatement perf/README
    proposes, not one of the issue's goals). ``unchecked``: why this run could not check the goal
    (the step its reference comes from was skipped); such a row is neither met nor missed."""

    name: str
    value: float | None
    target: float | None
    higher_is_better: bool = True
    unit: str = ""
    note: str = ""
    reference: str = "-"
    goal_text: str | None = None
    counted: bool = True
    unchecked: str = ""

    @property
    def met(self) -> bool | None:
        if self.target is None or self.unchecked:
            return None
        if self.value is None:  # a failed run, or a missing figure, is a miss, never a pass
            return False
        return self.value >= self.target if self.higher_is_better else self.value <= self.target

    @property
    def missed(self) -> bool:
        """Counts against the exit status."""
        return self.counted and self.met is False

    def goal_cell(self) -> str:
        if self.target is None:
            return "-"
        bound = f"{'>=' if self.higher_is_better else '<='} {self.target:g}{self.unit}"
        return f"{bound} {self.goal_text}" if self.goal_text else bound

    def met_cell(self) -> str:
        if self.unchecked:
            return "skip"
        verdict = {True: "yes", False: "NO", None: "ref"}[self.met]
        return verdict if self.counted or self.met is None else f"({verdict})"

    def value_cell(self) -> str:
        return fmt(self.value, self.unit)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "reference": self.reference,
                "target": self.target, "higher_is_better": self.higher_is_better,
                "goal": self.goal_cell(), "met": self.met, "counted": self.counted,
                "unchecked": self.unchecked or None, "note": self.note}


def fmt(value: float | None, unit: str = "") -> str:
    """A figure in a reference or note: ``n/a`` for a run that produced none (never ``Nones``)."""
    return "n/a" if value is None else f"{value:g}{unit}"


def ratio(numerator: float | None, denominator: float | None, digits: int = 3) -> float | None:
    """``numerator / denominator`` rounded, or None when either is missing or the denominator is
    not positive (a failed run's figure must not turn into a ratio that passes)."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return round(numerator / denominator, digits)


LEGEND = ("met: yes / NO against the goal; ref: a reference, no goal; skip: the step its reference "
          "comes from was skipped; restated, (yes) / (NO): the restatement of goal 1 that perf/README "
          "proposes, shown, not counted in the exit status.")


def render(goals: list[Goal], width: int = WIDTH) -> str:
    """The table (figure, value, reference, goal, met), the legend, then each row's note."""
    table = TextTable(columns=["figure", "value", "reference", "goal", "met"],
                      rows=[[g.name, g.value_cell(), g.reference, g.goal_cell(), g.met_cell()]
                            for g in goals],
                      align=["l", "r", "l", "l", "l"], wrap={0, 2})
    lines = render_table(table, width)
    lines += ["", *textwrap.wrap(LEGEND, width), "", "notes:"]
    for g in goals:
        if g.note or g.unchecked:
            text = f"{g.name.strip()}: " + "; ".join(x for x in (g.unchecked, g.note) if x)
            # A long path or error text breaks mid-word rather than past the width.
            lines += textwrap.wrap(text, width, initial_indent="- ", subsequent_indent="    ",
                                   break_on_hyphens=False)
    return "\n".join(lines)
