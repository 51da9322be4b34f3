"""Test-suite settings: real-server tests share one xdist worker so two vLLM servers never
compete for the two CPU cores, and the sandbox attacks run one after another on one worker
(``xdist_group``); ``-n N`` alone gives ``--dist loadgroup`` here, as `make test` asks for."""

import atexit
import os
import shutil
import tempfile

import pytest

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


#: xdist's modes that would spread one ``xdist_group`` over several workers.
_GROUP_BLIND_DIST = ("load", "worksteal")
_DIST_ASKED = pytest.StashKey[str]()
#: What the controller hands its workers: they parse the command line afresh (so they read
#: ``load``) and decide whether to tag each test with its group before any conftest runs.
_WORKER_LOADGROUP = "tests_conftest_loadgroup"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """``-n N`` without ``--dist`` (xdist's ``load``) or ``--dist worksteal`` becomes ``loadgroup``.

    The groups are what these tests need, not a speed-up: spread over two workers, one attack's
    decoy counts the SIGURG that another worker's ``kill_all_probe`` (run with its layers off)
    sends to every process, and two attacks can draw the same watched file, so a plain
    ``pytest tests -n 2`` failed an attack test about one run in two."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # a worker: tag each test with its group, as loadgroup's do
        if workerinput.get(_WORKER_LOADGROUP):
            config.option.loadgroup = True
    elif getattr(config.option, "dist", "no") in _GROUP_BLIND_DIST:
        config.stash[_DIST_ASKED] = config.option.dist
        config.option.dist = "loadgroup"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # type: ignore[no-untyped-def]  # pytest-xdist, controller
    if _DIST_ASKED in node.config.stash:
        node.workerinput[_WORKER_LOADGROUP] = True


def pytest_report_header(config: pytest.Config) -> str | None:
    was = config.stash.get(_DIST_ASKED, None)
    return f"xdist: --dist {was} -> loadgroup (tests/conftest.py: xdist_group is needed)" if was else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The real-vLLM tests form one group; on a worker, each grouped test's id then ends in
    ``@<group>``, which is how the controller's ``loadgroup`` scheduler sees the group.

    xdist 3.8 writes that suffix into ``item._nodeid``, which pytest 9.2's structured node ids no
    longer read (pytest-xdist#1386, still open): every group was silently spread over the workers,
    in `make test` too. xdist also tags before a conftest's hook adds a group. Last of all hooks,
    this tags what is still untagged, and leaves alone what xdist tagged."""
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.xdist_group("real-vllm"))
    if not getattr(config.option, "loadgroup", False):  # set on xdist workers only
        return
    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group")})
        if names and not item.nodeid.endswith("@" + "_".join(names)):
            _tag_with_group(item, "_".join(names))


def _tag_with_group(item: pytest.Item, group: str) -> None:
    tagged = f"{item.nodeid}@{group}"
    structured = getattr(item, "_id", None)
    if structured is not None and hasattr(type(structured), "parse"):  # pytest >= 9.2
        item._id = type(structured).parse(tagged)  # type: ignore[attr-defined]
    else:
        item._nodeid = tagged  # type: ignore[attr-defined]


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
