"""Test-suite settings: real-server tests share one xdist worker so two vLLM servers never
compete for the two CPU cores, and the sandbox attacks run one after another on one worker
(``xdist_group``, kept by xdist_groups.py however ``-n`` is given)."""

import atexit
import os
import shutil
import tempfile

import pytest
from xdist_groups import (  # noqa: F401  (hooks: pytest finds them here by name)
    pytest_configure,
    pytest_configure_node,
    pytest_report_header,
    pytest_xdist_make_scheduler,
    write_groups,
)

# Suite runs a test starts without --runs-dir write their run folders here, not into the
# developer's own .toolbench/runs (the default is relative to where pytest runs). Made once, by
# the process that finds none (xdist workers inherit it), and removed when that process ends:
# every test run used to leave one in the temporary folder per process.
if "TOOLBENCH_RUNS_DIR" not in os.environ:
    os.environ["TOOLBENCH_RUNS_DIR"] = tempfile.mkdtemp(prefix="toolbench-test-runs-")
    atexit.register(shutil.rmtree, os.environ["TOOLBENCH_RUNS_DIR"], ignore_errors=True)
# Suite runs a test starts without --data or --data-dir read the bundled samples (data/), as they
# did before the real data became the default: $TOOLBENCH_DATA is the default of --data, as
# $TOOLBENCH_RUNS_DIR is of --runs-dir. The real-data tests (test_real_data.py) drop it and serve
# the files from a local server; nothing a test starts downloads from the internet.
os.environ.setdefault("TOOLBENCH_DATA", "sample")


@pytest.fixture(scope="session", autouse=True)
def _started_pytest_runs_as_its_command_says():
    """A pytest a test starts would read the developer's PYTEST_ADDOPTS too (``-rs`` there
    replaced the FAILED lines a test reads from its run's summary): hidden from the first
    fixture on (session scope: before any module fixture that starts a run). Not dropped at
    import: xdist workers, started later, read it (``-p`` plugins) as they start."""
    addopts = os.environ.pop("PYTEST_ADDOPTS", None)
    yield
    if addopts is not None:
        os.environ["PYTEST_ADDOPTS"] = addopts


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The real-vLLM tests form one group; a worker then hands every test's group to the
    controller (xdist_groups.py), last of all collection hooks."""
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.xdist_group("real-vllm"))
    write_groups(config, items)


@pytest.fixture(scope="session")
def real():
    """The 80 real ToolHop records of ../shared, by id (skips where shared/ is absent)."""
    import warnings

    from shared_data import REAL_TOOLHOP

    from pytest_toolbench.benchmarks.dataset_errors import DatasetWarning
    from pytest_toolbench.benchmarks.toolhop.schema import load_toolhop_file

    if not REAL_TOOLHOP.exists():
        pytest.skip(f"real ToolHop sample not available at {REAL_TOOLHOP}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        return {r.id: r for r in load_toolhop_file(REAL_TOOLHOP)}
