"""Text from a tool, the model or a dataset is shown escaped, in every output.

A dataset's question, a tool's exception or a model's reply may hold terminal control sequences
(cursor up, erase line, a window title) or bidi overrides. The unit tests pin the escaper
(results/safe_text.py); the end-to-end test runs ``pytest suites/toolhop`` in a subprocess on a
hostile record against a local endpoint and reads every output a person or a CI system reads:
stdout, the JUnit XML, the Markdown summary, the Allure results and the JSON reports.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, completion, tool_call
from pytest_toolbench.report.markdown_report import cell
from pytest_toolbench.report.text_table import TextTable, render_table
from pytest_toolbench.results.safe_text import safe_data, safe_json, safe_json_bytes, safe_text

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "data" / "toolhop" / "ToolHop.json"

#: Cursor up, erase line, a window-title OSC ended by BEL, then a right-to-left override.
HOSTILE = "\x1b[1A\x1b[2K\x1b]0;pwned\x07\u202e"
ESCAPED = "\\x1b[1A\\x1b[2K\\x1b]0;pwned\\x07\\u202e"
#: Any raw character the outputs must never hold (newline, tab and CR excepted: files have lines).
RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


# --------------------------------------------------------------------------- the escaper
def test_control_and_bidi_characters_are_escaped_as_python_writes_them():
    assert safe_text(HOSTILE) == ESCAPED
    assert safe_text("a\x7fb\x9bc\u2067d\u200fe\u061cf") == "a\\x7fb\\x9bc\\u2067d\\u200fe\\u061cf"
    assert safe_text("one\ntwo\tthree\r") == "one\\ntwo\\tthree\\r"
    assert safe_text("one\ntwo\tthree\r", multiline=True) == "one\ntwo\tthree\\r"
    assert safe_text("\ud800") == "\\ud800"  # a lone surrogate could not even be printed


def test_ordinary_text_comes_back_unchanged():
    for text in ("How many letters?", "导演的名字有几个字母？", "emoji 🎬 and accents: café",
                 "a backslash \\x1b typed as text", ""):
        assert safe_text(text) is text
        assert safe_text(text, multiline=True) is text
        assert safe_json(json.dumps(text, ensure_ascii=False)) == json.dumps(text, ensure_ascii=False)


def test_json_escapes_are_lossless_and_keep_other_non_ascii_text_readable():
    value = {"question": "谁" + HOSTILE + "\x9b\x7f\u2066?", "k\u202e": ["\u200e"]}
    encoded = json.dumps(value, ensure_ascii=False)
    for text in (safe_json(encoded), safe_json_bytes(encoded.encode()).decode()):
        assert not RAW.search(text)
        assert json.loads(text) == value
        assert "谁" in text and "\\u202e" in text
    plain = "导演".encode()
    assert safe_json_bytes(plain) is plain


def test_safe_data_escapes_every_string_of_a_record():
    assert safe_data({"k" + HOSTILE: [HOSTILE, 1, ("\u202e",)]}) == {
        "k" + ESCAPED: [ESCAPED, 1, ("\\u202e",)]}


def test_table_cells_are_escaped_before_their_width_is_measured():
    lines = render_table(TextTable(["group", "n"], [["Film" + HOSTILE, "1"], ["TV", "2"]]), 80)
    assert not any(RAW.search(line) for line in lines)
    assert len({len(line) for line in lines}) == 1  # the escape did not shift a column
    assert cell("a" + HOSTILE + "|b") == "a" + ESCAPED.replace("\\", "\\\\") + "\\|b"
