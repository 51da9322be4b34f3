"""ToolBeHonest: one test per (record, level, variant). Logic lives in
pytest_toolbench.benchmarks.toolbehonest.

Select with markers: -m "scenario(name='MNT')", -m "level(n=3)", -m "subtask(name='os')",
-m "solvable(value=False)" (the leaderboard's variant).
"""

import pytest

from fixtures.toolbench import assert_case_passed

pytestmark = pytest.mark.toolbench("toolbehonest")


def test_toolbehonest(case, case_result):
    assert_case_passed(case_result)
