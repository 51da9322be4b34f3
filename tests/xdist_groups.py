"""``xdist_group`` that holds in this test suite, however ``-n`` is given (hooks that
tests/conftest.py takes in).

The groups are what these tests need, not a speed-up: the sandbox attacks must run one after
another (with its layers off, ``kill_all_probe`` signals every process, another worker's decoy
included, and two attacks can draw the same watched file), and two real vLLM servers must not
share the two CPU cores. Two things spread them over the workers:

- xdist 3.8 tells the controller a test's group by rewriting ``item._nodeid`` on the worker, which
  pytest 9.2's structured node ids no longer read (pytest-xdist#1386, open): ``--dist loadgroup``
  silently grouped nothing, in `make test` too, and an attack test failed about one run in two
  under load. (Rewriting ``item._id`` instead works, but a parametrised id then reads
  ``test[x]@group]`` in JUnit and the failure summary.)
- ``-n N`` alone is xdist's ``load``, which ignores groups, as ``worksteal`` does.

So the groups go to the controller beside the ids, untouched: each worker writes what it
collected (id -> group) into a folder the controller made, before it reports its collection;
the controller's ``loadgroup`` scheduler reads them. ``load`` and ``worksteal`` become
``loadgroup``, as the header says.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pytest_toolbench.fileio import atomic_write_bytes

#: xdist's modes that would spread one ``xdist_group`` over several workers.
GROUP_BLIND_DIST = ("load", "worksteal")
_DIST_ASKED = pytest.StashKey[str]()
_GROUPS_DIR = pytest.StashKey[str]()
#: The workerinput key that carries the controller's folder.
WORKER_KEY = "tests_xdist_groups_dir"


def group_of(item: pytest.Item) -> str | None:
    """The item's group as xdist names it (several marks: their names joined by ``_``)."""
    names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                    for mark in item.iter_markers("xdist_group")})
    return "_".join(names) or None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or getattr(config.option, "dist", "no") == "no":
        return
    if config.option.dist in GROUP_BLIND_DIST:
        config.stash[_DIST_ASKED] = config.option.dist
        config.option.dist = "loadgroup"
    if config.option.dist == "loadgroup":
        folder = tempfile.mkdtemp(prefix="toolbench-test-groups-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        config.stash[_GROUPS_DIR] = folder


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # pytest-xdist, controller side
    folder = node.config.stash.get(_GROUPS_DIR, None)
    if folder is not None:
        node.workerinput[WORKER_KEY] = folder


def pytest_report_header(config: pytest.Config) -> str | None:
    was = config.stash.get(_DIST_ASKED, None)
    return f"xdist: --dist {was} -> loadgroup (tests/xdist_groups.py: the groups are needed)" if was else None


def write_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: id -> group of what it collected, in the controller's folder (the last hook
    of collection; the worker reports its collection after it)."""
    workerinput = getattr(config, "workerinput", None) or {}
    folder = workerinput.get(WORKER_KEY)
    if folder is None:
        return
    groups = {item.nodeid: group for item in items if (group := group_of(item)) is not None}
    path = Path(folder) / f"{workerinput['workerid']}.json"
    atomic_write_bytes(path, json.dumps(groups).encode(), durable=False)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    folder = config.stash.get(_GROUPS_DIR, None)
    if folder is None:
        return None
    from xdist.scheduler import LoadGroupScheduling

    class GroupsBesideIds(LoadGroupScheduling):  # type: ignore[misc]
        """xdist's ``loadgroup``, reading each test's group from the workers' files."""

        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # every worker has reported its collection by now
                self._groups = {}
                for path in sorted(Path(folder).glob("*.json")):
                    self._groups.update(json.loads(path.read_text()))
            group = self._groups.get(nodeid)
            return f"group:{group}" if group is not None else super()._split_scope(nodeid)

    return GroupsBesideIds(config, log)
