"""Whether a pytest command runs tests at all, or only lists or shows something.

pytest configures every plugin for a listing command too, and most of them open a whole session
(``wrap_session``: session start, collection, session end) without running a test: the plugin
would then start the run's vLLM server and SDK process, open a run folder and, at the end, report
every selected case as missing (PARTIAL RESULTS, exit status 12) for a command that was only
asked to list. Every place that starts or ends a run asks this one question, so a listing mode
pytest adds needs one line here, not one in each of them.
"""

from __future__ import annotations

import pytest

#: The ``config.option`` names of pytest's modes that run no test, each with its flag:
#: ``--collect-only``/``--co``; ``--fixtures``/``--funcargs`` and ``--fixtures-per-test`` (collect,
#: then print); ``--setup-plan`` (its fixtures are stand-ins and no test body runs, so no case
#: gets a result); ``--cache-show`` (a session without collection); ``--markers`` and ``--help``
#: (configure, print, exit). ``--setup-only`` is not one of them: a case of this harness runs in
#: its ``case_result`` fixture's setup, so ``--setup-only`` calls the model and reports results
#: (on the set-up's report: session/transport.py ``ends_the_test``).
#: ``getattr`` with a default: a mode's option is absent when its plugin is disabled
#: (``-p no:cacheprovider`` removes ``--cache-show``).
LISTING_OPTIONS: tuple[str, ...] = (
    "collectonly", "showfixtures", "show_fixtures_per_test", "setupplan", "cacheshow",
    "markers", "help",
)


def runs_tests(config: pytest.Config) -> bool:
    """False for a command that only lists or shows (:data:`LISTING_OPTIONS`): it starts no
    server, SDK process or sandbox, writes no run folder and prints no toolbench summary."""
    return not any(getattr(config.option, name, None) for name in LISTING_OPTIONS)
