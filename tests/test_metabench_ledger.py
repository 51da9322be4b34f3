"""The Meta-Bench README quotes the paper's sentence beside each metric choice, and ends with
its fidelity ledger, which names every Meta-Bench option (issue 21 items 6 and 7)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks.metabench.options import MetaBenchOptions
from pytest_toolbench.benchmarks.options import flag_name

README = Path(__file__).resolve().parents[1] / "pytest_toolbench" / "benchmarks" / "metabench" / "README.md"

#: The paper's sentences (§3.3.2), verbatim, and the flag whose default follows each.
SENTENCES = {
    "--metabench-call-reading": "In such cases, the invocation of any tool is considered an error. "
    "Conversely, abstaining from tool invocation is deemed correct.",
    "--metabench-p-acc": "where a function calling is accurate only if all parameters of the invoked "
    "tool precisely match those of the ground truth in value.",
    "--metabench-fmd-unit": "We measure the success rate of this meta-tool function calling, which we "
    "define as Function Missing Detection (FMD).",
    "--metabench-hr-matching": "We then assess the hit rate of the ground truth tool within the "
    "retrieved tool set, denoted as HR@1, HR@3, and HR@5.",
}


def paragraphs() -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]


def ledger() -> str:
    text = README.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings[-1] == "Fidelity ledger", headings
    return text.split("## Fidelity ledger", 1)[1]


@pytest.mark.parametrize("flag", sorted(SENTENCES))
def test_each_choice_sits_beside_the_paper_sentence(flag: str) -> None:
    [paragraph] = [p for p in paragraphs() if SENTENCES[flag] in p.replace("*", "")]
    assert flag in paragraph


def test_ledger_is_the_last_section_and_one_numbered_table() -> None:
    text = ledger()
    assert "no upstream code" in " ".join(text.split())
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert rows[0] == "| # | difference from the paper | default | option that changes it |"
    numbers = [int(row.split("|")[1]) for row in rows[2:]]
    assert numbers == list(range(1, len(numbers) + 1))
    assert all(row.count("|") == 5 for row in rows)  # no stray pipe splits a cell


def test_every_metabench_option_is_in_the_ledger() -> None:
    text = ledger()
    for name, field in MetaBenchOptions.model_fields.items():
        flag = flag_name("metabench", name, field)
        assert flag and flag in text, flag
