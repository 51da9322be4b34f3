"""Toy: one test per (question, scenario). Logic lives in toybench_toy.

Select with markers: -m "topic(name='arithmetic')", -m "scenario(name='terse')".
"""

import pytest

from pytest_toolbench.session.fixtures import assert_case_passed

pytestmark = pytest.mark.toolbench("toy")


def test_toy(case, case_result):
    assert_case_passed(case_result)
