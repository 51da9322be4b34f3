"""``pytest ... --toolbench-view DIR``: rebuild the site at the end of the run, over every run in
the runs folder (this one included), so the leaderboard a team opens is never a run behind.

Registered by the plugin on the controller only (plugin.py), after the controller's own session
end has written this run's ``report.json``. Its folder is checked with the run's other outputs
at configure (writable, and one a build may clear: view/site_folder.py); a site that still
cannot be built at the end is one line in the terminal, never a changed exit status: the run's
results are already recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_toolbench.counting import counted


class ViewRefresh:
    """The pytest plugin object; ``view_dir`` and ``runs_dir`` from the run's settings."""

    def __init__(self, view_dir: Path, runs_dir: Path) -> None:
        self.view_dir = Path(view_dir)
        self.runs_dir = Path(runs_dir)
        self.line: str | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from pytest_toolbench.view.site import build_site

        try:
            result = build_site([self.runs_dir], self.view_dir)
        except Exception as exc:  # noqa: BLE001 - the run is recorded; the site is a convenience
            self.line = f"toolbench view: could not refresh {self.view_dir}: {type(exc).__name__}: {exc}"
        else:
            self.line = (f"toolbench view: {counted(result.runs, 'run')} in "
                         f"{Path(result.index).resolve().as_uri()}")
        reporter: Any = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.line:
            reporter.write_line(self.line)
