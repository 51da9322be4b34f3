"""ToolHop's README ends with its fidelity ledger, and the ledger names every ToolHop option."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_toolbench.benchmarks.toolhop.options import ToolHopOptions

README = Path(__file__).resolve().parents[1] / "pytest_toolbench" / "benchmarks" / "toolhop" / "README.md"


def ledger() -> str:
    text = README.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings[-1] == "Fidelity ledger", headings
    return text.split("## Fidelity ledger", 1)[1]


def test_ledger_is_the_last_section_and_one_table() -> None:
    rows = [line for line in ledger().splitlines() if line.startswith("|")]
    assert rows[0] == "| # | difference from upstream | default | option that changes it |"
    numbers = [int(row.split("|")[1]) for row in rows[2:]]
    assert numbers == list(range(1, len(numbers) + 1))
    assert all(row.count("|") >= 5 for row in rows)


def test_every_toolhop_option_is_in_the_ledger() -> None:
    text = ledger()
    for name, field in ToolHopOptions.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        flag = extra.get("flag") or "--toolhop-" + name.replace("_", "-")
        assert flag in text, flag
