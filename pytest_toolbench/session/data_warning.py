"""A dataset's warning (or an installed package's entry point left out) in pytest's warnings
summary, without the harness's source line.

``Config.issue_config_time_warning`` locates a warning at the frame that issued it, so the
summary printed ``session/selection.py:110`` and, under it, that line of the harness's code
(``config.issue_config_time_warning(w.message, stacklevel=2)  # type: ignore``): noise that
reads like a bug in the harness. The warning is about the user's data, whose file its message
already names. This does what pytest's method does (_pytest/config/__init__.py,
``Config.issue_config_time_warning``: the same ``-W`` and ``filterwarnings`` filters, so
``-W error::...DatasetWarning`` still fails the run; the same ``pytest_warning_recorded`` hook)
but issues the warning at :data:`SOURCE`, a place with no source line to print."""

from __future__ import annotations

import warnings

import pytest
from _pytest.config import apply_warning_filters

from pytest_toolbench.results.safe_text import safe_text

#: Where the summary says the warning comes from: the data, line 0 (linecache has no line 0).
SOURCE = "<dataset>"
#: ... or the installed packages, for an entry point left out.
INSTALLED = "<installed packages>"


def made_an_error(exc: Warning) -> pytest.UsageError:
    """A warning of the run's start that an error filter (``-W error``, or ``filterwarnings =
    error`` in a project's settings, common in CI) raised: one line and exit 4, where it was
    pytest's INTERNALERROR, a traceback through the harness, exit 3."""
    text = str(exc).removeprefix("pytest-toolbench: ")
    category = f"{type(exc).__module__}.{type(exc).__qualname__}"
    return pytest.UsageError(f"pytest-toolbench: {text} (a warning, made an error by -W or "
                             f"filterwarnings; -W 'default::{category}' lets the run go on)")


def issue_config_warning(config: pytest.Config, warning: Warning, stacklevel: int = 2) -> None:
    """``Config.issue_config_time_warning`` (located ``stacklevel`` frames above the caller),
    with an error filter's raise as :func:`made_an_error`'s one line."""
    try:
        config.issue_config_time_warning(warning, stacklevel=stacklevel + 1)
    except Warning as exc:
        raise made_an_error(exc) from None


def issue_data_warning(config: pytest.Config, warning: Warning, source: str = SOURCE) -> None:
    """Report ``warning`` in pytest's warnings summary (or stop the run in one line where an
    error filter says so, :func:`made_an_error`), as coming from ``source`` (the data, or
    another place outside the harness's code)."""
    if config.pluginmanager.is_blocked("warnings"):
        return
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always", type(warning))
        apply_warning_filters(config.getini("filterwarnings"),
                              config.known_args_namespace.pythonwarnings or [])
        try:
            warnings.warn_explicit(warning, type(warning), source, 0, module="pytest_toolbench.data")
        except Warning as exc:
            raise made_an_error(exc) from None
    if records:
        config.hook.pytest_warning_recorded.call_historic(kwargs=dict(
            warning_message=records[0], when="config", nodeid="", location=(source, 0, "<data>")))


def warn_left_out_entry_points(config: pytest.Config) -> None:
    """Each installed entry point left out (entry_points.load_group), once, in the warnings
    summary: the run goes on without it, and its owner should know why. The data pins and the
    model providers load late or not at all in a run that does not need them, so the groups that
    have an installed entry point are loaded here first (a run with none pays nothing): a broken
    one is named before any case runs. ``-W error::...EntryPointWarning`` stops the run here."""
    from pytest_toolbench.entry_points import EntryPointWarning, entry_points_of, left_out

    if entry_points_of("pytest_toolbench.data"):  # datasets/registry.py DATA_ENTRY_POINT_GROUP
        from pytest_toolbench.datasets.registry import installed_pins

        installed_pins()
    if entry_points_of("pytest_toolbench.models"):  # models/providers.py ENTRY_POINT_GROUP
        from pytest_toolbench.models.providers import providers

        providers()
    for refused in left_out():  # (an error filter stops the run here, in one line)
        issue_data_warning(config, EntryPointWarning(safe_text(refused.text())), INSTALLED)
