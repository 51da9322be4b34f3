"""The sandbox with ``bwrap`` (bubblewrap) in front of the zygote. CI has no bwrap: the tests that
start it skip with why; the logic they rest on (the argv, the probe's checks) is tested here
without it too."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import ToolSandbox, policy, pool

RUN = "pytest_toolbench.sandbox.jobs:run_source"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) not installed")


def run(sb: ToolSandbox, source: str) -> dict:
    outcome = sb.run(RUN, {"source": source, "entry": "f"}, 10.0)
    assert outcome.status == "ok", outcome.detail
    return outcome.value


def test_bwrap_root_shows_the_symlinks_on_the_way_to_its_binds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe found bwrap never ran: its root held ``/usr/lib64`` but not ``/lib64 ->
    usr/lib64``, the loader path written in every program, so exec of the interpreter failed
    (ENOENT) and the pool fell back without it. The links are mirrored as ``--symlink``."""
    real = tmp_path / "usr" / "lib64"
    real.mkdir(parents=True)
    (tmp_path / "lib64").symlink_to("usr/lib64")
    loader = tmp_path / "lib64" / "ld.so"
    bound = [str(real)]
    links = policy.links_on_the_way(str(loader), bound)
    assert links == [(str(tmp_path / "lib64"), "usr/lib64")]
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/bwrap")
    argv = pool.bubblewrap_argv(str(tmp_path / "folder"), bound, links)
    assert argv is not None
    i = argv.index("--symlink")
    assert argv[i: i + 3] == ["--symlink", "usr/lib64", str(tmp_path / "lib64")]
    # A link already inside a bound tree is the host's own, seen through the bind: not repeated.
    assert policy.links_on_the_way(str(real / "x"), bound) == []


def test_the_pools_bwrap_links_lead_to_the_interpreters_loader() -> None:
    """On this machine: every symlink on the way to the interpreter and the system paths that
    lies outside the binds is in bwrap's argv (``/lib64``, ``/lib`` on a merged-/usr system)."""
    bound = pool._bwrap_read_paths()
    links = dict(pool._bwrap_links(bound))
    for path in ("/lib", "/lib64", sys.executable):
        cur = "/"
        for part in os.path.abspath(path).strip("/").split("/"):
            cur = os.path.join(cur, part)
            if any(cur == b or cur.startswith(b + "/") for b in bound):
                break
            if os.path.islink(cur):
                assert links.get(cur) == os.readlink(cur), cur
                cur = os.path.realpath(cur)
