"""No "unknown" tear-down steps on the case pages.

From pytest 9.1, ``FixtureDef.execute`` puts a finalizer of pytest's own (a lambda that calls the
``pytest_fixture_post_finalizer`` hook) on every fixture. allure-pytest wraps *every* finalizer
of a fixture as an Allure "after" fixture; that one closes the fixture's Allure container while
its own "after" is still open, so each fixture used by a case ends the case page with an
``<fixture>::<lambda>`` step of status *unknown* (allure-python issue 918). We hand pytest's own
finalizers back unwrapped, after allure-pytest wrapped them; real tear-downs (a yield fixture's
code, ``request.addfinalizer``) keep their Allure step.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest


def is_pytest_internal(func: Any) -> bool:
    """A callable defined inside pytest itself (not by a fixture's author)."""
    module = getattr(func, "__module__", None) or ""
    return module == "_pytest" or module.startswith("_pytest.")


def unwrap_internal_finalizers(fixturedef: Any) -> int:
    """Replace allure-pytest's wrapper around pytest-internal finalizers with the finalizer
    itself; return how many were unwrapped. Leaves every other finalizer alone."""
    finalizers = getattr(fixturedef, "_finalizers", None)
    if not isinstance(finalizers, list):
        return 0
    unwrapped = 0
    for i, fin in enumerate(finalizers):
        inner = getattr(fin, "_fixture_function", None)  # allure_commons' fixture wrapper
        if inner is not None and is_pytest_internal(inner):
            finalizers[i] = inner
            unwrapped += 1
    return unwrapped


class InternalFinalizerFilter:
    """pytest plugin: runs around allure-pytest's ``pytest_fixture_setup`` wrapper (tryfirst,
    so its code after ``yield`` runs last) and unwraps what that wrapper just wrapped."""

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Generator[None, Any, None]:
        yield
        unwrap_internal_finalizers(fixturedef)


PLUGIN_NAME = "toolbench-allure-finalizers"


def register(config: pytest.Config) -> None:
    """Install the filter once per process (controller and xdist workers)."""
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(InternalFinalizerFilter(), PLUGIN_NAME)
