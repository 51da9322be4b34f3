"""Prose wrapped between words only: the one wrapper every command's text goes through.

A module of its own, below everything that prints (``toolbench data list`` in ``datasets`` as
well as the summary, ``compare`` and ``runs``), so no layer writes a wrapper of its own.
"""

from __future__ import annotations

import textwrap


def wrap_words(text: str, width: int, indent: str = "    ") -> list[str]:
    """A line of prose wrapped between words only, later lines indented by ``indent``: a path,
    case id or URL longer than the width stays whole on its line, and no line ends in a space
    (the terminal summary's notes, ``toolbench compare``, ``toolbench runs``, ``toolbench data
    list``)."""
    if len(text) <= width:
        return [text.rstrip()]
    lines = textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False,
                          break_on_hyphens=False)
    return [ln.rstrip() for ln in lines] or [""]
