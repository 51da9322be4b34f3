"""The reference agent for ToolBeHonest: answers every prompt from the gold (each level's ground truth in ``test_en.json``).

L1 says the variant's label; L2 lists the gold plan as given (its final Finish included, which
the scorer drops); L3 writes one ``Subgoal i: <description> Planned tool: <tool>`` line per gold
step, where an UnsolvableQuery step is described by the removed tool's own description from
``tools``, so the matching score finds that tool. A correct harness scores 100 on L1 EM, L2 PR,
L3 PR and L3 MS with it.
"""

from __future__ import annotations

from typing import Any, Callable

from pytest_toolbench.benchmarks.toolbehonest.schema import UNSOLVABLE, ToolBHRecord
from pytest_toolbench.models.base import ChatRequest


def oracle_answer(record: ToolBHRecord, level: int, solvable: bool) -> str:
    if level == 1:
        return f"<answer>{'solvable' if solvable else 'unsolvable'}</answer>"
    plan = list(record.planning_tools if solvable else record.planning_tools_unsolvable)
    if level == 2:
        return "<answer>" + "\n".join(plan) + "</answer>"
    provided = record.provided_tools()
    solvable_plan = record.gold(True)
    lines = []
    for i, tool in enumerate(plan):
        target = solvable_plan[i] if tool == UNSOLVABLE and i < len(solvable_plan) else tool
        lines.append(f"Subgoal {i + 1}: {provided.get(target, target)} Planned tool: {tool}")
    return "<answer>" + "\n".join(lines) + "</answer>"


def toolbehonest_oracle(
    record: ToolBHRecord, level: int, solvable: bool
) -> Callable[[ChatRequest], dict[str, Any]]:
    content = oracle_answer(record, level, solvable)

    def policy(request: ChatRequest) -> dict[str, Any]:
        return {"role": "assistant", "content": content}

    return policy
