"""A count with its noun: ``1 error``, ``3 errors``.

A module of its own, at the bottom of the layers, so every line that counts something (the
progress line, the run's end, a partial run's note, the run page) agrees on the one rule.
"""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, with an ``s`` unless ``n`` is exactly 1 (``0 errors``, ``1 error``);
    ``plural`` where an ``s`` is not it (``cache entries``)."""
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {plural if plural is not None else noun + 's'}"
