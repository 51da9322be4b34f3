"""An environment for a pytest a test starts, with a plugin of the test's own loaded through
``PYTEST_PLUGINS``, so that xdist workers load it too (``-p`` would reach the controller only)."""

from __future__ import annotations

import os
import textwrap
import uuid
from pathlib import Path


def plugin_env(tmp_path: Path, source: str) -> dict[str, str]:
    """This process's environment with ``source`` (dedented) as a plugin module on the path.
    Left out: ``OPENAI_*`` (the run must not reach a real endpoint) and ``PYTEST_XDIST_*`` (this
    test may itself run in an xdist worker; the run's controller would inherit the worker's name,
    and a plugin that acts in workers only would act there too)."""
    name = f"toolbench_test_plugin_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "plugin"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(source))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PYTEST_XDIST_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    env["PYTEST_PLUGINS"] = name
    return env
