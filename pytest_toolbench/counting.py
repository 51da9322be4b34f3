"""A count with its noun: ``1 error``, ``3 errors``.

A module of its own, at the bottom of the layers, so every line that counts something (the
progress line, the run's end, a partial run's note, the run page) agrees on the one rule.
"""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, with an ``s`` unless ``n`` is exactly 1 (``0 errors``, ``1 error``)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
