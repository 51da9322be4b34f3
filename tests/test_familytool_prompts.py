"""The extraction prompt is byte-exact against the shared spec files."""

from __future__ import annotations

import pytest
from shared_data import FAMILYTOOL_SPECS, REAL_FAMILYTOOL

from pytest_toolbench.benchmarks.familytool.kg import KnowledgeGraph
from pytest_toolbench.benchmarks.familytool.prompts import (
    EXTRACTION_TEMPLATE,
    extraction_instruction,
    extraction_messages,
)
from pytest_toolbench.benchmarks.familytool.schema import load_records

TEMPLATE = FAMILYTOOL_SPECS / "familytool_kg_extraction_prompt_template.txt"
EXAMPLE = FAMILYTOOL_SPECS / "familytool_kg_extraction_prompt_example_b0.txt"


@pytest.mark.skipif(not TEMPLATE.exists(), reason="../shared specs absent")
def test_template_is_byte_exact():
    assert EXTRACTION_TEMPLATE == TEMPLATE.read_text(encoding="utf-8")


@pytest.mark.skipif(not (EXAMPLE.exists() and REAL_FAMILYTOOL.exists()), reason="../shared absent")
def test_record_0_prompt_is_byte_exact_with_sorted_relations():
    kg = KnowledgeGraph.from_file(REAL_FAMILYTOOL / "familykg-b.txt")
    record = load_records(REAL_FAMILYTOOL / "familytool-b.jsonl", "b")[0]
    [message] = extraction_messages(record.query, kg.relations("sorted"), "single_user")
    assert message == {"role": "user", "content": EXAMPLE.read_text(encoding="utf-8")}


def test_layouts_and_relation_line():
    text = extraction_instruction(["father", "prefer_city"])
    assert "    - <relationship>father   - <relationship>prefer_city\n" in text
    assert extraction_messages("Q", ["r"], "system_user") == [
        {"role": "system", "content": extraction_instruction(["r"])},
        {"role": "user", "content": "Q"},
    ]
    assert extraction_messages("Q", ["r"], "single_user")[0]["content"].endswith("content.\n\nQ")
