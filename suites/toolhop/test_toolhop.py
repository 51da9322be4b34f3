"""ToolHop: one test per (sample, scenario). Logic lives in pytest_toolbench.benchmarks.toolhop.

Select with markers: -m "hops(n=3)", -m "scenario(name='mandatory')", -m "domain(name='Film')".
"""

import pytest

from fixtures.toolbench import assert_case_passed

pytestmark = pytest.mark.toolbench("toolhop")


def test_toolhop(case, case_result):
    assert_case_passed(case_result)
