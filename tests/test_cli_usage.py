"""The ``toolbench`` dispatcher (cli.py): an argument a subcommand does not take is refused
with that subcommand's usage, which lists what it does take, not the top-level one."""

from __future__ import annotations

import pytest

from pytest_toolbench import cli


@pytest.mark.parametrize(("argv", "usage", "refused"), [
    (["list", "--runs-dir", "R"], "usage: toolbench list [-h]", "--runs-dir"),
    (["data", "list", "--bogus"], "usage: toolbench data list [-h] [--json]", "--bogus"),
    (["data", "--bogus"], "usage: toolbench data [-h] ACTION", "--bogus"),
    (["--bogus"], "usage: toolbench [-h] [--version] COMMAND", "--bogus"),
])
def test_an_unknown_argument_gets_its_subcommands_usage(argv, usage, refused, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    prog = usage.split(" [")[0].removeprefix("usage: ")
    assert err.startswith(usage), err
    assert err.endswith(f"{prog}: error: unrecognized arguments: {refused}\n"), err


def test_version_names_the_versions_a_bug_report_needs(capsys) -> None:
    """``toolbench --version`` was refused ("unrecognized arguments: --version")."""
    import platform

    from pytest_toolbench import __version__

    assert cli.main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out == (f"toolbench (pytest-toolbench {__version__}, Python "
                   f"{platform.python_version()}, pytest {pytest.__version__})\n")
