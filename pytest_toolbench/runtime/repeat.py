"""``--repeats K``: each case runs K times as its own pytest node (``<case id>-r1`` ... ``-rK``).

The repeat index is part of the case id, so node ids, journals, recordings and replay files tell
the repeats apart and the ids are the same in every xdist worker. It is also part of the response
cache key (through :data:`CURRENT_REPEAT`, set by the case runtime for the case's task): without
it repeat 2 would replay repeat 1's cached reply and measure nothing. Repeat 1 keeps the plain key,
so a ``--repeats 3`` run after an ordinary run reuses that run's replies for its first repeat.
"""

from __future__ import annotations

import contextvars
import dataclasses

from pytest_toolbench.benchmarks.base import Case, repeat_suffix

#: The repeat index (1-based) of the case this asyncio task runs; None outside ``--repeats``.
CURRENT_REPEAT: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "toolbench_repeat", default=None
)


def expand_repeats(cases: list[Case], repeats: int) -> list[Case]:
    """K copies of every case, repeat-major (all of repeat 1 first), so an interrupted run holds
    whole repeats. ``repeats == 1`` returns the cases unchanged (ids without a suffix)."""
    if repeats < 1:
        raise ValueError(f"--repeats {repeats}: must be at least 1")
    if repeats == 1:
        return list(cases)
    return [
        dataclasses.replace(c, id=c.id + repeat_suffix(r), repeat=r)
        for r in range(1, repeats + 1)
        for c in cases
    ]


def cache_repeat_extra() -> dict[str, int]:
    """What the response cache adds to its key for the running case: nothing for repeat 1 (or no
    repeats), ``{"repeat": r}`` for r >= 2."""
    r = CURRENT_REPEAT.get()
    return {"repeat": r} if r is not None and r > 1 else {}
