"""Which data a run reads, decided once on the controller at configure, before xdist starts its
workers: ``--data-dir`` as given; ``--data sample`` the bundled samples; ``--data real`` (the
default) every pinned file of the targeted suites fetched into the Hugging Face cache (once per
machine, file-locked), checked against its pin and laid out as a data folder
(pytest_toolbench/datasets). A file that cannot be had, or is not the pinned one, stops the run
here with one line (exit 4), before any model call. Each worker is handed the folder
(``toolbench_data_dir``) and only reads it.
"""

from __future__ import annotations

from pathlib import Path
import pytest

from pytest_toolbench.benchmarks.data_source import BUNDLED_DATA_DIR
from pytest_toolbench.config import RunSettings
from pytest_toolbench.options import project_root
from pytest_toolbench.results.safe_text import safe_text
from pytest_toolbench.session.data_warning import issue_config_warning
from pytest_toolbench.session.selection import has_toolbench_tests, targeted_benchmarks
from pytest_toolbench.session.state import is_worker

WORKER_KEY = "toolbench_data_dir"


def resolve_run_data(config: pytest.Config, settings: RunSettings) -> RunSettings:
    """The settings with ``data_dir`` pointing at the run's data (unchanged where it already
    does, or where the run targets no suite with real data). ValueError (one line) for a
    --data-revision that cannot apply; pytest.UsageError (one line) for data that cannot be had."""
    if is_worker(config):
        given = config.workerinput.get(WORKER_KEY)  # type: ignore[attr-defined]
        return settings.model_copy(update={"data_dir": Path(given)}) if given else settings
    if not settings.data_revisions and (settings.data == "sample" or settings.data_dir is not None
                                        or _informational(config) or not has_toolbench_tests(config)):
        return settings  # nothing to fetch (unit-test runs never fetch)
    # the pins and the fetch code load only for a run that may read real data
    from pytest_toolbench.datasets.download import Progress
    from pytest_toolbench.datasets.fetch import DataRefused
    from pytest_toolbench.datasets.resolve import parse_revisions, resolve

    revisions = parse_revisions(settings.data_revisions) if settings.data_revisions else {}
    if revisions and (settings.data == "sample" or settings.data_dir is not None):
        other = "--data sample" if settings.data == "sample" else "--data-dir"
        raise ValueError(f"--data-revision chooses a revision of the real data, which {other} "
                         f"does not read: give one of them")
    if settings.data != "real" or settings.data_dir is not None or _informational(config):
        return settings
    if not has_toolbench_tests(config):
        return settings  # unit-test runs never fetch
    names = targeted_benchmarks(config)
    if not names:
        return settings
    try:
        resolution = resolve(names, revisions, fallback_dirs=[project_root(config) / "data", BUNDLED_DATA_DIR],
                             progress=Progress, on_wait=_waiting)
    except DataRefused as exc:
        raise pytest.UsageError(f"pytest-toolbench: {safe_text(str(exc))}") from None
    for warning in dict.fromkeys(resolution.warnings):
        issue_config_warning(config, pytest.PytestWarning(f"pytest-toolbench: {warning}"))
    if resolution.data_dir is None:
        return settings
    return settings.model_copy(update={"data_dir": resolution.data_dir})


def _waiting() -> None:
    import sys

    sys.stderr.write("toolbench data: another process is downloading the same file; waiting\n")


def _informational(config: pytest.Config) -> bool:
    """``--help``, ``--version``, ``--markers``: pytest configures, but reads no data."""
    opt = config.option
    return bool(getattr(opt, "help", False) or getattr(opt, "version", False)
                or getattr(opt, "markers", False))


def worker_data_dir(settings: RunSettings) -> str | None:
    """What a worker is told: the controller's data folder."""
    return str(settings.data_dir) if settings.data_dir is not None else None
