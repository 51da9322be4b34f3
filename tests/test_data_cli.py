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


def test_the_listing_fits_80_columns_and_keeps_every_place_whole(capsys) -> None:
    """Every line fits 80 columns but a place (URL or path) alone on its line, kept whole so it
    can be copied; the eight-column table it replaces was 147-267 wide."""
    from pytest_toolbench.datasets.cli import rows
    from pytest_toolbench.datasets.registry import load_registry

    assert cli.main(["data", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    wide = [line for line in lines if len(line) > 80 or line != line.rstrip()]
    assert all(len(line.split()) == 1 for line in wide), wide
    places = [line.strip() for line in lines]
    for row in rows(load_registry()):
        if row["file"] == "-":  # bundled: "bundled (<folder>)", wrapped between words
            assert row["where"] in " ".join(places), row
        else:  # a URL or a cached file's path: whole, alone on its line
            assert row["where"] in places, row
    assert any("  data/ToolHop.json  " in line and "sha256 0a51f71a44b7" in line for line in lines)
