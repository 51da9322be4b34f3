"""Meta-Bench: one test per judged assistant turn. Logic lives in pytest_toolbench.benchmarks.metabench.

Select with markers: -m "category(name='function_missing')", -m "difficulty(name='hard')",
-m "world(name='open')", -m "scenario(name='simple-open-chat')".
"""

import pytest

from fixtures.toolbench import assert_case_passed

pytestmark = pytest.mark.toolbench("metabench")


def test_metabench(case, case_result):
    assert_case_passed(case_result)
