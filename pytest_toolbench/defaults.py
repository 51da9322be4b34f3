"""Where the plugin keeps its files by default, relative to the project's top (pytest's rootdir
when a settings file, ``--rootdir`` or a setup.py marks it and pytest runs in it or below it,
else the folder pytest runs in: options.py ``project_root``).

One definition for the options (config.py), the CLIs (runs/store.py) and the SDK process's start
(models/sdk_process/launcher.py, which may import nothing but the standard library: so neither
may this module).
"""

from __future__ import annotations

from pathlib import Path

#: ``--cache-dir``'s default: the response cache.
DEFAULT_CACHE_DIR = ".toolbench/cache"
#: ``--runs-dir``'s default (``$TOOLBENCH_RUNS_DIR`` overrides it): one folder per run.
DEFAULT_RUNS_DIR = ".toolbench/runs"
#: ``toolbench view``'s site, beside the runs folder it reads (``--out`` another).
DEFAULT_VIEW_DIR = ".toolbench/view"
#: Written into every site folder the view builds (view/site_folder.py): the folder is the
#: view's to clear on the next build, and ``toolbench prune`` knows a site by it.
VIEW_MARKER = ".toolbench-view"


def nearest(relative: str | Path, start: Path | None = None) -> Path:
    """``relative`` under the nearest folder at or above ``start`` (cwd) that has it, else under
    ``start``: ``toolbench runs`` works from any subfolder of the project, and the SDK process's
    early cache guess finds the cache a run from a subfolder uses (options.py
    ``project_root``)."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / relative).is_dir():
            return folder / relative
    return here / relative
