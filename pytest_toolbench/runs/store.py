"""Where runs live and how to list them: ``<runs-dir>/<run_id>/`` (the plugin's layout).

The runs folder is its own setting (``--runs-dir``, ``TOOLBENCH_RUNS_DIR``), not a sibling of
``--cache-dir``: pointing the response cache elsewhere must not scatter the run history. The CLIs
find the default from any subfolder of a project, as git finds its repository, and read the
pytest settings file the plugin reads (``toolbench_runs_dir``, ``toolbench_cache_dir``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pytest_toolbench import defaults
from pytest_toolbench.defaults import nearest
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.runs.record import Headline, RunIndex, read_index

#: The plugin's default ``--cache-dir`` and ``--runs-dir`` (relative to where pytest runs).
DEFAULT_CACHE_DIR = Path(defaults.DEFAULT_CACHE_DIR)
DEFAULT_RUNS_DIR = Path(defaults.DEFAULT_RUNS_DIR)
#: Overrides the default runs folder (the plugin's and the CLIs').
RUNS_DIR_ENV = "TOOLBENCH_RUNS_DIR"


def default_runs_dir() -> str:
    """The plugin's ``--runs-dir`` default: ``$TOOLBENCH_RUNS_DIR``, else ``.toolbench/runs``."""
    return os.environ.get(RUNS_DIR_ENV) or str(DEFAULT_RUNS_DIR)


#: Where the CLIs look for the runs folder, in :func:`locate_runs_dir`'s order (their help).
RUNS_DIR_DEFAULT_TEXT = (f"the settings file's toolbench_runs_dir, else ${RUNS_DIR_ENV}, else "
                         f"the nearest {DEFAULT_RUNS_DIR} at or above the current folder")
RUNS_DIR_HELP = f"the plugin's --runs-dir (default {RUNS_DIR_DEFAULT_TEXT})"
#: The same for --cache-dir (:func:`find_cache_dir`).
CACHE_DIR_HELP = ("the plugin's --cache-dir (default: the settings file's toolbench_cache_dir, "
                  f"else the nearest {DEFAULT_CACHE_DIR} at or above the current folder)")


def settings_file_path(key: str, start: Path | None = None) -> Path | None:
    """The path ``key`` (``toolbench_runs_dir``) has in the pytest settings file pytest finds
    from ``start`` (the current folder): pytest.ini, pyproject.toml's pytest table, tox.ini,
    setup.cfg. Taken from that file's folder, as the plugin takes it (options.py), so ``toolbench
    runs`` lists the runs a project keeps where its settings say; it looked in
    ``.toolbench/runs`` only ("no runs found"). None where no file gives it. pytest's own search
    (a private function): should it change, the CLIs keep their defaults, never a traceback."""
    try:
        from _pytest.config.findpaths import locate_config

        found = locate_config(Path(start or Path.cwd()), [])
        inifile, raw = found[1], found[2].get(key)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - pytest.fail (a setup.cfg [pytest]) is one too
        return None
    value = getattr(raw, "value", raw)  # pytest 9 wraps each value (ConfigValue)
    if inifile is None or not isinstance(value, str) or not value.strip():
        return None
    path = Path(os.path.expanduser(value.strip()))
    return path if path.is_absolute() else Path(inifile).parent / path


def locate_runs_dir(given: Path | None = None) -> tuple[Path, bool]:
    """The CLIs' runs folder, in the plugin's order (the variable sets the default, which the
    settings file overrides: options.py): ``--runs-dir``, else the settings file's
    ``toolbench_runs_dir``, else ``$TOOLBENCH_RUNS_DIR``, else the nearest ``.toolbench/runs``;
    and whether the user named it (any but the last): a named folder that does not exist is
    worth a note, an absent default is only a project with no runs yet. One reading of the
    settings file for both."""
    if given is not None:
        return Path(given), True
    named = settings_file_path("toolbench_runs_dir")
    if named is not None:
        return named, True
    env = os.environ.get(RUNS_DIR_ENV)
    return (Path(env), True) if env else (nearest(DEFAULT_RUNS_DIR), False)


def find_runs_dir(given: Path | None = None) -> Path:
    """The runs folder of :func:`locate_runs_dir`."""
    return locate_runs_dir(given)[0]


def find_cache_dir(given: Path | None = None) -> Path:
    """The CLIs' response cache: ``--cache-dir``, else the settings file's
    ``toolbench_cache_dir``, else the nearest ``.toolbench/cache``."""
    if given is not None:
        return Path(given)
    return settings_file_path("toolbench_cache_dir") or nearest(DEFAULT_CACHE_DIR)


def list_runs(runs_dir: Path) -> list[RunIndex]:
    """Every run found under the runs folder, newest first (folders with nothing readable are
    skipped)."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    found = [index for d in root.iterdir() if d.is_dir() and (index := read_index(d)) is not None]
    return sorted(found, key=lambda r: (r.started or 0.0, r.run_id), reverse=True)


def _value(h: Headline) -> str:
    if h.value is None:
        return "n/a"
    return f"{100 * h.value:.1f}%" if h.is_rate else f"{h.value:.4g}"


def format_headlines(headlines: list[Headline]) -> str:
    """``toolhop accuracy direct=83.3% mandatory=50.0%; familytool ...``: one group per
    (benchmark, metric), scenarios in the report's order."""
    groups: dict[tuple[str, str], list[str]] = {}
    for h in headlines:
        groups.setdefault((h.benchmark, h.metric), []).append(f"{h.scenario}={_value(h)}")
    return "; ".join(f"{b} {m} {' '.join(cells)}" for (b, m), cells in groups.items())


def status_text(index: RunIndex) -> str:
    if index.status == "finished":
        return "no case ran" if index.n_runs == 0 else "complete"
    if index.status == "interrupted":
        return f"partial ({index.interrupted_by})" if index.interrupted_by else "partial"
    if index.status == "incomplete" and index.report is None and index.start is not None:
        # its start is kept: session/killed_run.py
        if index.stopped_by:  # its end could not write the report (runs/record.py mark_unreported)
            return f"{stopped_reason(index.stopped_by.error)} (toolbench finish scores it)"
        return "killed (toolbench finish scores it)"
    if index.status == "incomplete" and index.pytest_stop:
        return "stopped early"  # by -x: the block's "reason" says so (runs/listing.py)
    return index.status  # running / incomplete


def stopped_reason(error: str) -> str:
    """``disk full`` from an output failure's error (output_errors.describe_os_error), in a few
    words: a run's status fits an 80-column line (``toolbench runs --json`` has the whole)."""
    found = re.search(r"\((E[A-Z0-9]+)\)\s*$", error)
    name = found.group(1) if found else None
    return {"ENOSPC": "disk full", "EDQUOT": "over disk quota"}.get(name or "", "output failed")


def gates_text(index: RunIndex) -> str:
    """``passed 3/3``, ``FAILED 1/4``, or ``-`` for a run without gates."""
    total = index.gates_passed + len(index.gates_failed)
    if not total:
        return "-"
    if index.gates_failed:
        return f"FAILED {len(index.gates_failed)}/{total}"
    return f"passed {total}/{total}"


def exit_text(index: RunIndex) -> str:
    """``0 OK``, ``10 GATE_FAILED``...; ``?`` when the run did not record it."""
    if index.exit_status is None:
        return "?"
    try:
        return f"{index.exit_status} {ToolbenchExit(index.exit_status).name}"
    except ValueError:
        return str(index.exit_status)
