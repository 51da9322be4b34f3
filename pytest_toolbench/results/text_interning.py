"""Long strings stored once per run: JSON lines with their long string literals replaced by a
reference to a content-addressed text (keyed by sha256), and back.

Every case of a benchmark repeats text its prompt embeds (a knowledge graph, a tool library, a
system prompt): thousands of copies of the same kilobytes in a run's journal, mostly farther
apart than gzip's 32 KiB window can see. :func:`intern_lines` replaces each JSON string literal
of at least ``min_len`` bytes, quotes included, by ``\\x01`` + the sha256 of its bytes (64 hex
digits) and returns the texts not stored before as definition lines (``\\x02`` + the same 64
digits + the literal's bytes); :func:`expand` puts them back.

Both work on the encoded bytes, not on parsed objects, so a line comes back byte for byte as it
was written, whatever it holds: the replacement is textual and reversible by construction, and
the two marker bytes cannot clash with a record's own text because a JSON encoder never writes
a raw control character (U+0000-U+001F are always ``\\u`` escapes inside strings, and cannot
appear outside them). A line that holds one anyway is not JSON and is refused
(:class:`ValueError`), never stored ambiguously.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

#: Starts a reference inside a stored line; 64 lowercase hex digits follow.
REF = b"\x01"
#: Starts a text definition line; the 64 hex digits, then the text's bytes, then the newline.
DEF = b"\x02"
KEY_LEN = 64
#: Literals shorter than this stay in their line: a reference costs 65 bytes, and the texts a
#: prompt repeats (graphs, tool documents, system prompts) are far longer.
MIN_LEN = 512

#: A string literal of at least ``min_len`` bytes, quotes included, matched in a probe copy of
#: the data where each escaped backslash and escaped quote is masked by two other bytes (the
#: offsets stay the same), so every double quote left is a literal's own: one character-class run
#: that the engine matches at ~300 MB/s (a pattern that parses escapes ran at ~140 MB/s, and one
#: match per literal, long or short, at ~45 MB/s). A match tried at a closing quote spans the
#: structure up to the next opening quote, short in a JSON line, so the scan realigns at once.
#: Which byte ranges are interned only decides how much is saved, never what is read back: each
#: is replaced by the hash of its exact bytes and expanded back the same way.
_LONG: dict[int, re.Pattern[bytes]] = {}


def _long_literal(min_len: int) -> re.Pattern[bytes]:
    pattern = _LONG.get(min_len)
    if pattern is None:
        pattern = _LONG[min_len] = re.compile(rb'"[^"\n]{%d,}"' % max(min_len - 2, 1))
    return pattern


def _probe(data: bytes) -> bytes:
    """``data`` with ``\\\\`` and ``\\"`` masked (same length): pairs from the left are
    exactly JSON's escapes, since a backslash only ever starts one."""
    return data.replace(b"\\\\", b"\x05\x05").replace(b'\\"', b"\x04\x04")


def check_plain(data: bytes) -> None:
    """Refuse bytes that already hold a marker (not JSON lines; see the module docstring)."""
    for marker in (REF, DEF):
        at = data.find(marker)
        if at >= 0:
            raise ValueError(f"a journal line holds a raw control byte {marker!r} at offset {at}: "
                             "not JSON text, so it cannot be stored with interned texts")


def intern_lines(data: bytes, known: set[bytes], min_len: int = MIN_LEN) -> tuple[list[bytes], bytes]:
    """``(definitions, stored)``: ``data`` (whole JSON lines) with every string literal of at
    least ``min_len`` bytes replaced by its reference, and a definition line for each text whose
    key is not in ``known``. ``known`` is not changed: the caller adds the new keys once the definitions
    are stored (:func:`keys_of`)."""
    check_plain(data)
    pieces: list[bytes] = []
    definitions: list[bytes] = []
    new: set[bytes] = set()
    last = 0
    for match in _long_literal(min_len).finditer(_probe(data)):
        start, end = match.span()
        text = data[start:end]
        key = hashlib.sha256(text).hexdigest().encode("ascii")
        if key not in known and key not in new:
            new.add(key)
            definitions.append(DEF + key + text + b"\n")
        pieces.append(data[last:start])
        pieces.append(REF + key)
        last = end
    if not pieces:
        return [], data
    pieces.append(data[last:])
    return definitions, b"".join(pieces)


def keys_of(definitions: Iterable[bytes]) -> list[bytes]:
    """The keys the definition lines define."""
    return [d[1:1 + KEY_LEN] for d in definitions]


def split_definitions(payload: bytes) -> tuple[dict[bytes, bytes], bytes]:
    """``(texts, lines)``: the definition lines a stored block starts with (key -> text bytes;
    :func:`intern_lines`'s caller writes them before the lines that use them) and the rest."""
    texts: dict[bytes, bytes] = {}
    at = 0
    while payload.startswith(DEF, at):
        end = payload.index(b"\n", at)
        texts[payload[at + 1:at + 1 + KEY_LEN]] = payload[at + 1 + KEY_LEN:end]
        at = end + 1
    return texts, payload[at:] if at else payload


def expand(stored: bytes, texts: Mapping[bytes, bytes], where: str = "journal") -> bytes:
    """``stored`` with every reference replaced by its text; :class:`KeyError` naming ``where``
    for a reference no definition gave (a journal cut or edited by hand)."""
    if REF not in stored:
        return stored
    parts = stored.split(REF)
    out = [parts[0]]
    for part in parts[1:]:
        key = part[:KEY_LEN]
        try:
            out.append(texts[key])
        except KeyError:
            raise KeyError(f"{where}: a reference to text {key.decode('ascii', 'replace')[:12]}... "
                           "that the journal does not define") from None
        out.append(part[KEY_LEN:])
    return b"".join(out)
