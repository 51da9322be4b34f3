"""The repeat of the running case, part of the response cache's key (``--repeats K``).

Without it repeat 2 would replay repeat 1's cached reply and measure nothing. The case runtime
sets :data:`CURRENT_REPEAT` for each case's asyncio task (``runtime/repeat.py`` makes the
repeated cases); repeat 1 keeps the plain key, so a ``--repeats 3`` run after an ordinary run
reuses that run's replies for its first repeat.
"""

from __future__ import annotations

import contextvars

#: The repeat index (1-based) of the case this asyncio task runs; None outside ``--repeats``.
CURRENT_REPEAT: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "toolbench_repeat", default=None
)


def cache_repeat_extra() -> dict[str, int]:
    """What the response cache adds to its key for the running case: nothing for repeat 1 (or no
    repeats), ``{"repeat": r}`` for r >= 2."""
    r = CURRENT_REPEAT.get()
    return {"repeat": r} if r is not None and r > 1 else {}
