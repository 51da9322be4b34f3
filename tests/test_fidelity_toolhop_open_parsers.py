"""Every reply of ``../shared/fidelity/toolhop-open-parsers.jsonl`` parses as upstream's parser did.

The file (its first line says what it is) holds raw Qwen2.5 / Llama-3.1 completions and what
upstream's ``evaluation_open.py`` ``parse_qwen25`` / ``parse_llama31`` returned for them under
json_repair 0.30.2: ``{"ok": message}`` with call ids normalised to ``"ID"``, or
``{"raise": exception type}``. Each line is one test, named by its id, replayed through the
project's :func:`parse_open_reply` (the entry point the open protocol uses). The file stays in
``../shared`` (``TOOLBENCH_SHARED_DIR`` overrides where that is); without it the tests skip.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_toolbench.benchmarks.toolhop.open_parsers import OpenParseError, deterministic_ids, parse_open_reply
from shared_data import SHARED_FIDELITY

#: ``../shared/fidelity`` (tests/shared_data.py; ``TOOLBENCH_SHARED_DIR`` names another shared/).
FIDELITY_FILE = SHARED_FIDELITY / "toolhop-open-parsers.jsonl"
#: Upstream's ids are "call_" + sha256(clock); the file writes them as this placeholder.
NORMALISED_ID = "ID"


def _lines() -> list[Any]:
    if not FIDELITY_FILE.is_file():
        return [pytest.param(None, id="absent", marks=pytest.mark.skip(
            reason=f"{FIDELITY_FILE} is absent (clone the repo beside shared/ or set TOOLBENCH_SHARED_DIR)"
        ))]  # fmt: skip
    header, *rows = FIDELITY_FILE.read_text(encoding="utf-8").splitlines()
    assert "_about" in json.loads(header), "the first line describes the file"
    lines = [json.loads(row) for row in rows if row.strip()]
    return [pytest.param(line, id=line["id"]) for line in lines]


def replay(line: dict[str, Any]) -> dict[str, Any]:
    """What the project does with the line's text, in the file's notation."""
    try:
        message = parse_open_reply(line["series"], line["text"], deterministic_ids(line["id"]))
    except OpenParseError as exc:
        return {"raise": exc.upstream_exception}
    message = json.loads(json.dumps(message))  # a copy; tuples etc. would show up as lists
    for call in message.get("tool_calls") or []:
        assert call["id"].startswith("call_") and len(call["id"]) == 5 + 64, call["id"]
        call["id"] = NORMALISED_ID
    return {"ok": message}


@pytest.mark.parametrize("line", _lines())
def test_reply_parses_as_upstream(line: dict[str, Any]) -> None:
    expected = {k: v for k, v in line["upstream"].items() if k in ("ok", "raise")}
    assert replay(line) == expected, f"{line['label']}: {line['text'][:300]!r}"
