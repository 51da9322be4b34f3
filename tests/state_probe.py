"""A plugin a test writes into its folder to see, from inside a pytest run, whether the run holds
a model server and an SDK process at one hook, and how many SDK processes' folders exist (each
SDK process has one under TMPDIR while it lives, launcher.SdkProcess): what a listing command or
a configure-time decision started, which the command's output alone cannot show."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_PLUGIN = '''
import json, os, pathlib, pytest
@pytest.hookimpl({order}=True)
def {hook}(config):
    from pytest_toolbench.session.state import STATE_KEY
    st = config.stash.get(STATE_KEY, None)
    folders = len(list(pathlib.Path(os.environ["TMPDIR"]).glob("toolbench-sdk-*")))
    with open(os.environ["PROBE_OUT"], "w") as f:
        json.dump({{"server": bool(st and st.server), "sdk": bool(st and st.sdk),
                   "sdk_folders": folders}}, f)
'''


def write_probe(folder: Path, name: str, hook: str, order: str) -> None:
    """``folder/<name>.py``, a plugin (``-p <name>``) recording at ``hook`` (``pytest_configure``
    or ``pytest_unconfigure``), run ``tryfirst`` or ``trylast`` (``order``)."""
    (folder / f"{name}.py").write_text(_PLUGIN.format(hook=hook, order=order))


def probe_env(folder: Path, out: Path, base: dict[str, str]) -> tuple[dict[str, str], Path]:
    """The run's environment (``base`` with the probe's folder on PYTHONPATH, its output file and
    a TMPDIR of its own, short enough for a Unix socket path) and that TMPDIR."""
    short_tmp = Path(tempfile.mkdtemp(prefix="tb-", dir="/tmp"))
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {**base, "PROBE_OUT": str(out), "PYTHONPATH": path, "TMPDIR": str(short_tmp)}, short_tmp
