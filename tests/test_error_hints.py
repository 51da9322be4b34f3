"""Every infrastructure error the harness raises by name has its own cause and remedy in the
summary's ``infrastructure errors`` line, not the fallback "see the case's error message"."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_toolbench.models.errors import kind_hint

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_toolbench"
#: ``ModelCallError("kind", ...)`` and ``InfraError(kind="kind", ...)``, over lines too.
RAISED = re.compile(r'ModelCallError\(\s*"([a-z][a-z0-9_]*)"|InfraError\(\s*kind="([a-z][a-z0-9_]*)"')


def raised_kinds() -> set[str]:
    return {a or b for path in PACKAGE.rglob("*.py")
            for a, b in RAISED.findall(path.read_text(encoding="utf-8"))}


def test_every_kind_the_harness_raises_has_its_own_hint():
    """A replay file recorded on other data failed 240 cases with "infrastructure error of kind
    replay_missing_case; try: see the case's error message"."""
    kinds = raised_kinds()
    assert {"replay_missing_case", "case_timeout", "sandbox_failed"} <= kinds, kinds
    fallback = {k for k in kinds if kind_hint(k)[1] == "see the case's error message"}
    assert not fallback, f"no hint for {sorted(fallback)} (models/errors.py KIND_HINTS)"


def test_a_replay_of_other_cases_points_at_the_selection_it_was_recorded_on():
    cause, option = kind_hint("replay_missing_case")
    assert "no recording" in cause and "--sample-ids" in option and "--record" in option
