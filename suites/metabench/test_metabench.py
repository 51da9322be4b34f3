"""Meta-Bench: one test per case of the benchmark ``metabench``; the harness loads, runs and scores
them (pytest_toolbench.benchmarks.metabench.benchmark).

Select with -m "scenario(name='simple-open-function_missing')", -m "category(name=...)",
-m "difficulty(name=...)", -m "world(name=...)"; `toolbench list metabench` prints the values, and
`pytest --help` its own flags under "pytest-toolbench: Meta-Bench".

Written by `toolbench init`, which rewrites it only with --overwrite.
"""

import pytest

from pytest_toolbench.session.fixtures import assert_case_passed

pytestmark = pytest.mark.toolbench("metabench")


def test_metabench(case, case_result):
    assert_case_passed(case_result)
