"""A dataset's warning in pytest's warnings summary, without the harness's source line.

``Config.issue_config_time_warning`` locates a warning at the frame that issued it, so the
summary printed ``session/selection.py:110`` and, under it, that line of the harness's code
(``config.issue_config_time_warning(w.message, stacklevel=2)  # type: ignore``): noise that
reads like a bug in the harness. The warning is about the user's data, whose file its message
already names. This does what pytest's method does (_pytest/config/__init__.py,
``Config.issue_config_time_warning``: the same ``-W`` and ``filterwarnings`` filters, so
``-W error::...DatasetWarning`` still fails the run; the same ``pytest_warning_recorded`` hook)
but issues the warning at :data:`SOURCE`, a place with no source line to print.
"""

from __future__ import annotations

import warnings

import pytest
from _pytest.config import apply_warning_filters

#: Where the summary says the warning comes from: the data, line 0 (linecache has no line 0).
SOURCE = "<dataset>"


def issue_data_warning(config: pytest.Config, warning: Warning) -> None:
    """Report ``warning`` in pytest's warnings summary (or raise it, as the filters say)."""
    if config.pluginmanager.is_blocked("warnings"):
        return
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always", type(warning))
        apply_warning_filters(config.getini("filterwarnings"),
                              config.known_args_namespace.pythonwarnings or [])
        warnings.warn_explicit(warning, type(warning), SOURCE, 0, module="pytest_toolbench.data")
    if records:
        config.hook.pytest_warning_recorded.call_historic(kwargs=dict(
            warning_message=records[0], when="config", nodeid="", location=(SOURCE, 0, "<data>")))
