"""FamilyTool's README ends with its fidelity ledger: one numbered table, and a row for every reply
shape that stops upstream's evaluation (the harness's behaviour on each is tested in
test_familytool_reply_shapes.py)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "pytest_toolbench" / "benchmarks" / "familytool" / "README.md"


def rows() -> dict[int, str]:
    text = README.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings[-1] == "Fidelity ledger", headings
    lines = [line for line in text.split("## Fidelity ledger", 1)[1].splitlines() if line.startswith("|")]
    assert lines[0] == "| # | upstream | default here | option |"
    return {int(line.split("|")[1]): line for line in lines[2:]}


def test_ledger_is_one_numbered_table() -> None:
    table = rows()
    assert list(table) == list(range(1, len(table) + 1))
    assert all(line.count("|") - line.count("\\|") >= 5 for line in table.values())


def test_every_upstream_crash_the_harness_scores_has_a_row() -> None:
    """What stops upstream's run, and where the ledger says what the harness does instead."""
    table = rows()
    crashes = {
        11: ["the metric raises"],  # a gold tool's non-object arguments, a non-string name
        12: ["<\\|python_tag\\|>", "KeyError", "skip_special_tokens: false"],
        19: ["gpt-4o", "`content: null`", "len(result[\"content\"])", "TypeError"],
        20: ["deepseek-reasoner", "\"name\" in t", "TypeError", "json.loads(None)", "reasoning_content"],
    }
    for number, phrases in crashes.items():
        for phrase in phrases:
            assert phrase in table[number], (number, phrase)
        assert "run stops" in table[number] or "metric raises" in table[number], number
