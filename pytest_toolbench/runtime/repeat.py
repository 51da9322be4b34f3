"""``--repeats K``: each case runs K times as its own pytest node (``<case id>-r1`` ... ``-rK``).

The repeat index is part of the case id, so node ids, journals, recordings and replay files tell
the repeats apart and the ids are the same in every xdist worker. It is also part of the response
cache key (``models.repeat.CURRENT_REPEAT``, which the case runtime sets for the case's task; it lives in
``models/repeat.py`` with the cache that reads it).
"""

from __future__ import annotations

import dataclasses

from pytest_toolbench.benchmarks.base import Case, repeat_suffix

__all__ = ["expand_repeats"]


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
