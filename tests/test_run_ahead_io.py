"""Issue 11's cheap paths: xdist scheduling that keeps run-ahead windows full, cache writes with
bare syscalls, and the openai SDK imported only when a request is sent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_toolbench import fileio
from pytest_toolbench.fileio import atomic_write_bytes
from pytest_toolbench.runtime.xdist_scheduling import RunAheadScheduling

REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- scheduling
class FakeConfig:
    def __init__(self, workers: int):
        self.values = {"tx": [f"{workers}*popen"], "maxschedchunk": None}

    def getvalue(self, name: str):
        return self.values[name]

    getoption = getvalue


class FakeNode:
    def __init__(self, name: str):
        self.name = name
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def drive(n_items: int, workers: int, window: int, duration: float) -> tuple[list[FakeNode], list[int]]:
    """Run a whole schedule: nodes complete their oldest item in turn; returns the nodes and the
    smallest queue a node had while items were still unassigned."""
    sched = RunAheadScheduling(FakeConfig(workers), window=window)
    nodes = [FakeNode(f"gw{i}") for i in range(workers)]
    collection = [f"t{i}" for i in range(n_items)]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    lows: list[int] = []
    done = 0
    while done < n_items:
        progressed = False
        for node in nodes:
            queue = sched.node2pending[node]
            if queue:
                if sched.pending:
                    lows.append(len(queue))
                sched.mark_test_complete(node, queue[0], duration=duration)
                done += 1
                progressed = True
        assert progressed, "a node was left without work while items remained"
    return nodes, lows


@pytest.mark.parametrize("duration", [0.0, 0.6])  # 0.6 s: a test that waited for its model call
def test_every_worker_keeps_a_full_window_while_items_remain(duration: float) -> None:
    nodes, lows = drive(n_items=2000, workers=2, window=130, duration=duration)
    assert min(lows) >= 129  # one item just completed, the top-up follows at once
    sent = sorted(i for node in nodes for i in node.sent)
    assert sent == list(range(2000))  # every item exactly once
    assert all(node.shutting_down for node in nodes)


def test_plain_load_scheduling_starves_the_window_this_fixes() -> None:
    """The reason for the class: under --dist load a 'slow' test (>= 0.1 s) stops the refills."""
    from xdist.scheduler.load import LoadScheduling

    sched = LoadScheduling(FakeConfig(2))
    nodes = [FakeNode("gw0"), FakeNode("gw1")]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, [f"t{i}" for i in range(2000)])
    sched.schedule()
    lows = []
    while sched.pending:
        for node in nodes:
            queue = sched.node2pending[node]
            sched.mark_test_complete(node, queue[0], duration=0.6)
            lows.append(len(queue))
    assert min(lows) < 130


def test_small_suites_are_spread_and_finish() -> None:
    nodes, _ = drive(n_items=5, workers=2, window=130, duration=0.6)
    assert sorted(i for node in nodes for i in node.sent) == [0, 1, 2, 3, 4]
    assert all(node.sent for node in nodes)


# ----------------------------------------------------------------------------- atomic writes
def test_atomic_write_leaves_no_temporary_files(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "entry.json"
    atomic_write_bytes(target, b"one", durable=False)
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert os.listdir(target.parent) == ["entry.json"]


def test_atomic_write_recreates_a_folder_removed_under_it(tmp_path: Path) -> None:
    target = tmp_path / "shard" / "entry.json"
    atomic_write_bytes(target, b"1", durable=False)
    (target).unlink()
    target.parent.rmdir()  # e.g. `toolbench runs prune` while a run writes
    atomic_write_bytes(target, b"2", durable=False)
    assert target.read_bytes() == b"2"


def test_atomic_write_skips_a_stale_temporary_name(tmp_path: Path, monkeypatch) -> None:
    """A temporary file left by a killed process whose pid came back is not overwritten."""
    monkeypatch.setattr(fileio, "_counter", iter([7, 8]))
    stale = tmp_path / f".entry.json.{os.getpid()}.7.tmp"
    stale.write_bytes(b"stale")
    atomic_write_bytes(tmp_path / "entry.json", b"fresh", durable=False)
    assert (tmp_path / "entry.json").read_bytes() == b"fresh"
    assert stale.read_bytes() == b"stale"


def test_a_failed_write_removes_its_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "dir-in-the-way"
    target.mkdir()
    (target / "x").write_text("occupied")  # os.replace onto a non-empty folder fails
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"data", durable=False)
    assert sorted(os.listdir(tmp_path)) == ["dir-in-the-way"]


# ----------------------------------------------------------------------------- lazy SDK
def test_building_an_endpoint_model_does_not_import_the_sdk(tmp_path: Path) -> None:
    """A run answered from the cache never pays the SDK's import (~0.7 s); a request does."""
    code = f"""
import asyncio, sys
from pathlib import Path
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.factory import build_model
settings = RunSettings(model="m", backend="openai", base_url="http://127.0.0.1:9/v1",
                       api_key="k", cache_dir=Path({str(tmp_path)!r}))
model = build_model(settings)
assert "openai" not in sys.modules, "imported at build time"
from pytest_toolbench.models.openai_backend import error_kind
print(error_kind(ValueError("x")))
assert "openai" in sys.modules
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "bad_response"


def pytest_with_import_probe(tmp_path: Path, hook: str, modules: tuple[str, ...], args: list[str]) -> str:
    """pytest's stdout for ``args``, with a plugin that prints, at ``hook``, which of ``modules``
    the process has imported (``IMPORTED [...]``); the command must succeed."""
    (tmp_path / "import_probe.py").write_text(
        f"import sys\ndef {hook}:\n"
        f"    print('IMPORTED', [m for m in {modules!r} if m in sys.modules])\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "import_probe", "-s", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO, capture_output=True, text=True, env=env,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def test_collecting_every_suite_imports_neither_numpy_nor_the_sdk(tmp_path: Path) -> None:
    """Every pytest process (each xdist worker, --collect-only, --help) imports the plugin, the
    fixtures and every benchmark; numpy (~70 ms) waits for an index or a metric to be built."""
    stdout = pytest_with_import_probe(
        tmp_path, "pytest_collection_finish(session)", ("numpy", "openai", "faiss", "torch", "networkx"),
        ["--collect-only", "suites"])
    assert "IMPORTED []" in stdout, stdout[-2000:]
    code = """
import sys
from pytest_toolbench.results.bootstrap import bootstrap_mean
assert bootstrap_mean([0.0, 1.0, 1.0]).value == 2 / 3
assert "numpy" in sys.modules
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_toolhop_run_leaves_the_sandbox_side_imports_to_the_sandbox(tmp_path: Path) -> None:
    """The tool-execution module builds upstream's script globals at import (``requests``,
    ``tqdm``: ~75 ms), which the zygote needs once; the pytest process only reads its nesting
    limit, from a module of its own, and never imports it."""
    stdout = pytest_with_import_probe(
        tmp_path, "pytest_unconfigure(config)",
        ("pytest_toolbench.benchmarks.toolhop.execution", "requests", "tqdm"),
        ["suites/toolhop", "--data", "sample", "--model", "oracle", "-k", "direct",
         "--runs-dir", str(tmp_path / "runs")])
    assert "IMPORTED []" in stdout, stdout[-2000:]


# ----------------------------------------------------------------------------- the window a worker hands out
class WorkerInteractor:  # the name upcoming.py looks for among the plugins
    def __init__(self, queue: list[int], nxt: int | None):
        import contextlib
        from collections import deque

        self.nextitem_index = nxt
        self._queue = deque(queue)
        self.torun = SimpleNamespace(lock=lambda: contextlib.nullcontext(self._queue))


def test_an_xdist_worker_hands_out_each_upcoming_item_once() -> None:
    """Under xdist the window is read from the worker's queue; every test used to get all of it
    back (a case lookup and a submit per item, 128 items per test). Only new items come back now,
    in queue order, including those the controller appends later."""
    from xdist.remote import Marker

    from pytest_toolbench.runtime.upcoming import new_upcoming_items

    interactor = WorkerInteractor(queue=[3, 4, 5, 6], nxt=2)
    config = SimpleNamespace(workerinput={}, stash=pytest.Stash(),
                             pluginmanager=SimpleNamespace(get_plugins=lambda: [object(), interactor]))
    session = SimpleNamespace(config=config, stash=pytest.Stash(), items=[f"item{i}" for i in range(20)])
    assert new_upcoming_items(session, "item1", 3) == ["item2", "item3", "item4"]
    assert new_upcoming_items(session, "item1", 3) == []  # nothing new in the window
    interactor.nextitem_index = 3
    interactor._queue.popleft()
    interactor._queue.extend([9, 10, Marker.SHUTDOWN])
    assert new_upcoming_items(session, "item2", 3) == ["item5"]  # window 3, 4, 5
    assert new_upcoming_items(session, "item2", 10) == ["item6", "item9", "item10"]
    interactor.nextitem_index = Marker.SHUTDOWN  # the worker is done: nothing, and no error
    interactor._queue.clear()
    assert new_upcoming_items(session, "item2", 10) == []
