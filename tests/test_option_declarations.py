"""The core run settings are declared once (``config.py``), and the flags, ini keys and ``--help``
text derived from them are the ones users already rely on.

The snapshots in ``tests/data/`` were taken from the hand-written flags before the declaration
moved into ``RunSettings``: a flag renamed, a default or type changed, or a help text reworded by
accident fails here. Regenerate them on purpose with ``python tests/test_option_declarations.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
HELP_SNAPSHOT = REPO / "tests" / "data" / "help_toolbench.txt"
OPTIONS_SNAPSHOT = REPO / "tests" / "data" / "options_toolbench.json"


def toolbench_help() -> str:
    """The core pytest-toolbench group and its ini keys in ``pytest --help``, at a fixed width."""
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLBENCH_RUNS_DIR", "TOOLBENCH_DATA")}
    env["COLUMNS"] = "120"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:randomly", "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=env,
    ).stdout
    kept: list[str] = []
    ini: list[list[str]] = []
    in_group = in_ini = False
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            in_group = line.startswith("pytest-toolbench: LLM tool-use benchmarks")
            in_ini = line.startswith("[pytest]")
            if in_group:
                kept.append(line)
            continue
        if in_group:
            kept.append(line)
        elif in_ini:
            if re.match(r"  \S", line):  # a key, its text ("same as --flag") on the next line
                ini.append([])
            if ini:
                ini[-1].append(line.rstrip())
    flags = set(re.findall(r"^  (--[a-z0-9-]+)", "\n".join(kept), flags=re.MULTILINE))
    for entry in ini:
        said = re.search(r"same as (--[a-z0-9-]+)", " ".join(entry))
        if said and said.group(1) in flags:
            kept.extend(entry)
    return "\n".join(kept) + "\n"


def option_table() -> dict[str, Any]:
    """Every core toolbench flag as argparse receives it, plus what the ini resolution knows of it."""
    from _pytest.config.argparsing import Parser

    from pytest_toolbench import option_sources
    from pytest_toolbench.options import add_options

    os.environ.pop("TOOLBENCH_RUNS_DIR", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Parser is pytest's own; its shape is what is compared
        parser = Parser()
    add_options(parser)
    table: dict[str, Any] = {}
    for group in parser._groups:
        if group.name != "toolbench":  # the core group (benchmark groups derive from their own models)
            continue
        for opt in group.options:
            # (Python 3.13's argparse adds ``deprecated`` to every action; none of ours is)
            attrs = {k: v for k, v in opt.attrs().items()
                     if k not in ("help", "container") and not (k == "deprecated" and v is False)}
            attrs = {k: (v.__name__ if isinstance(v, type) else v) for k, v in attrs.items()}
            table[opt.names()[-1]] = {"group": group.name, **json.loads(json.dumps(attrs, default=str))}
    for source in option_sources._SOURCES.values():
        if source.flag in table:
            table[source.flag]["source"] = {
                "ini": source.ini, "default": json.loads(json.dumps(source.default, default=str)),
                "action": source.action,
                "convert": source.convert.__name__ if source.convert else None,
                "choices": list(source.choices) if source.choices else None,
            }
    return table


@pytest.mark.pinned_versions  # pytest's help formatter wraps and orders differently across releases
def test_help_text_is_unchanged():
    assert toolbench_help() == HELP_SNAPSHOT.read_text(encoding="utf-8")


@pytest.mark.pinned_versions  # the argparse attributes pytest keeps on an option vary by release
def test_flags_types_defaults_and_ini_keys_are_unchanged():
    assert option_table() == json.loads(OPTIONS_SNAPSHOT.read_text(encoding="utf-8"))


def test_every_flag_says_what_it_does():
    """Each flag of the core and benchmark groups has a help text beyond its default:
    --vllm-startup-timeout's was "(default: 600.0)" alone, a number with no meaning."""
    from _pytest.config.argparsing import Parser

    from pytest_toolbench.options import add_options

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parser = Parser()
    add_options(parser)
    silent = [
        opt.names()[-1]
        for group in parser._groups
        for opt in group.options
        if not re.sub(r"\(default[^)]*\)", "", str(opt.attrs().get("help") or "")).strip()
    ]
    assert sum(len(group.options) for group in parser._groups) > 50
    assert silent == []


def test_settings_come_from_the_declared_flags(tmp_path: Path):
    from pytest_toolbench.config import RunSettings
    from pytest_toolbench.option_sources import settings_values

    given = {"--sandbox-disk-mb": 7, "--sandbox-disk-inodes": 9, "--no-cache": True,
             "--scenario": ["a,b", " c"], "--gate": ["g1", "g2"], "--record": "r.jsonl",
             "--vllm-arg": ["--x"], "--no-plots": False}
    values = settings_values(RunSettings, given.get, lambda p: tmp_path / p)
    settings = RunSettings(**values)
    assert (settings.sandbox.disk_mb, settings.sandbox.disk_inodes) == (7, 9)
    assert settings.use_cache is False and settings.plots is True
    assert settings.scenarios == ("a", "b", "c") and settings.gates == ("g1", "g2")
    assert settings.record_path == tmp_path / "r.jsonl" and settings.vllm.extra_args == ["--x"]
    # Reading the pytest side's flags does not change the run record's settings.
    assert "plots" not in settings.model_dump() and "base_urls_file" not in settings.model_dump()


def test_a_value_outside_its_constraints_is_one_line():
    import pytest

    from pytest_toolbench.config import RunSettings
    from pytest_toolbench.option_sources import settings_values

    for flag, value, message in [
        ("--sandbox-disk-mb", 0, "--sandbox-disk-mb 0: must be at least 1"),
        ("--max-error-rate", 2.0, "--max-error-rate 2.0: must be between 0 and 1"),
        ("--max-retries", -1, "--max-retries -1: must be 0 or more"),
        ("--request-timeout", 0.0, "--request-timeout 0.0: must be positive"),
    ]:
        with pytest.raises(ValueError) as raised:
            settings_values(RunSettings, {flag: value}.get, Path)
        assert str(raised.value) == message


if __name__ == "__main__":
    HELP_SNAPSHOT.write_text(toolbench_help(), encoding="utf-8")
    OPTIONS_SNAPSHOT.write_text(json.dumps(option_table(), indent=1) + "\n", encoding="utf-8")
