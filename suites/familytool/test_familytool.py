"""FamilyTool: one test per case of the benchmark ``familytool``; the harness loads, runs and scores
them (pytest_toolbench.benchmarks.familytool.benchmark).

Select with -m "scenario(name='extract-gs')", -m "split(name=...)", -m "hops(n=...)",
-m "step(name=...)", -m "kg(mode=...)", -m "extraction(method=...)"; `toolbench list familytool`
prints the values, and `pytest --help` its own flags under "pytest-toolbench: FamilyTool".

Written by `toolbench init`, which rewrites it only with --overwrite.
"""

import pytest

from pytest_toolbench.session.fixtures import assert_case_passed

pytestmark = pytest.mark.toolbench("familytool")


def test_familytool(case, case_result):
    assert_case_passed(case_result)
