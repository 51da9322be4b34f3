"""Toolbox: one test per question. Logic lives in toolbox_bench; its tools in toolbox_tools."""

import pytest

from pytest_toolbench.session.fixtures import assert_case_passed

pytestmark = pytest.mark.toolbench("toolbox")


def test_toolbox(case, case_result):
    assert_case_passed(case_result)
