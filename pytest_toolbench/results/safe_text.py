"""Text from a tool, the model or a dataset, made safe to show: the one escaper every writer uses.

A tool's exception, a model's reply or a dataset's question may carry terminal control sequences
(``ESC[1A ESC[2K`` moves the cursor up and erases the line, ``ESC]0;...BEL`` sets the window
title) or Unicode bidi controls (``U+202E`` reverses what follows). Shown raw they can rewrite
lines a reader trusts, e.g. a verdict, or make text read differently than it is stored. Every
place that shows such text (terminal, JUnit XML, Markdown, Allure, the JSON reports) passes it
through here; ordinary text (any language, emoji) comes back unchanged, so reports of a normal
run stay byte-identical.

Escaped as Python writes them in a repr: C0 controls, DEL and C1 controls as ``\\x1b``
(``\\n``, ``\\r``, ``\\t`` by name), the bidi embeddings, overrides, isolates and marks
(U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C) and lone surrogates (which cannot even
be written as UTF-8) as ``\\u202e``. A multi-line block (an attachment, a failure's message)
keeps its newlines and tabs; anything shown on one line (a table cell, a note, a title) escapes
them too, so data cannot start a line of its own that looks like the harness's.

:func:`safe_json_bytes` does the same inside JSON text, losslessly: the characters become JSON
``\\u`` escapes, so a reader decoding the file gets the very same strings back.
"""

from __future__ import annotations

import re
from typing import Any

#: Bidi controls: embeddings and overrides, isolates, the marks LRM/RLM and ALM.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
_BLOCK = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
#: What a JSON encoder leaves raw (it escapes C0 itself): DEL, C1, bidi, lone surrogates.
_JSON_TEXT = re.compile(f"[\x7f-\x9f{_BIDI}\ud800-\udfff]")
#: The same characters as UTF-8 bytes (a lone surrogate cannot be in UTF-8 at all).
_JSON_BYTES = re.compile(
    rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str, *, multiline: bool = False) -> str:
    """``text`` with control and bidi characters escaped (``\\x1b``, ``\\u202e``); newlines and
    tabs are kept when ``multiline`` (a block of its own), else escaped too (one line)."""
    pattern = _BLOCK if multiline else _ONE_LINE
    if pattern.search(text) is None:  # the common case: nothing to escape, the same object back
        return text
    return pattern.sub(_escape, text)


def safe_data(value: Any) -> Any:
    """``value`` with :func:`safe_text` applied to every string in it (dict keys included, through
    dicts, lists and tuples): for a record a viewer decodes and shows field by field."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_data(k): safe_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(safe_data(v) for v in value)
    return value


def safe_json(text: str) -> str:
    """JSON text with the characters a JSON encoder leaves raw written as ``\\u`` escapes
    (the decoded strings are unchanged)."""
    if text.isascii() and "\x7f" not in text:  # the common case, without a regex's scan
        return text
    if _JSON_TEXT.search(text) is None:
        return text
    return _JSON_TEXT.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def safe_json_bytes(data: bytes) -> bytes:
    """UTF-8 JSON with DEL, C1 and bidi controls written as ``\\u`` escapes. Such characters can
    only stand inside a JSON string, where the escape means the same character; UTF-8 never has
    one character's bytes inside another's, so matching bytes is exact.

    ASCII without DEL has none of them: told by two C-speed scans (0.25 us for a 1.5 KB journal
    line, where the regex's search took 6-20 us, per journal line of every case)."""
    if data.isascii() and b"\x7f" not in data:
        return data
    if _JSON_BYTES.search(data) is None:
        return data
    return _JSON_BYTES.sub(lambda m: b"\\u%04x" % ord(m.group().decode("utf-8")), data)


__all__ = ["safe_data", "safe_json", "safe_json_bytes", "safe_text"]
