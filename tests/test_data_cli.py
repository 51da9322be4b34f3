"""``toolbench data``: exit statuses as the other subcommands give them, and a listing that fits
the terminal (datasets/cli.py)."""

from __future__ import annotations

import pytest

from pytest_toolbench import cli


@pytest.mark.parametrize("action", ["fetch", "verify"])
def test_an_unknown_name_is_a_command_line_error_as_for_list_and_init(action, capsys) -> None:
    """Exit 2, as ``toolbench list nosuch`` and ``toolbench init --benchmark nosuch`` (not 4,
    which stays for data that cannot be had); nothing is fetched or checked."""
    assert cli.main(["data", action, "toolhop", "nosuch"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("toolbench data: unknown benchmark 'nosuch' (one of toolhop")
    assert cli.main(["list", "nosuch"]) == 2
