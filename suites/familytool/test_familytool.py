"""FamilyTool: one test per (record, step/mode). Logic lives in pytest_toolbench.benchmarks.familytool.

Select with flags (--familytool-split e, --familytool-kg-mode golden, --familytool-extraction gs)
or markers: -m "split(name='b')", -m "hops(n=3)", -m "step(name='extract')",
-m "kg(mode='extracted')", -m "extraction(method='rr')".
"""

import pytest

from fixtures.toolbench import assert_case_passed

pytestmark = pytest.mark.toolbench("familytool")


def test_familytool(case, case_result):
    assert_case_passed(case_result)
