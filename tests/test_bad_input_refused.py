"""Bad input is refused up front: one line, exit 4, before any model call.

Options that parse but cannot work (a timeout of 0 or ``inf``, zero turns, a billion repeats, an
empty model name, a temperature no API takes, flags that contradict each other) are refused at
configure with a line naming the option and what it allows; the unit tests check every flag's
bound, a few whole runs check the exit status, the single line and that no request was sent.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from fake_openai_server import FakeOpenAIServer, completion

from pytest_toolbench.benchmarks import registry
from pytest_toolbench.benchmarks.options import benchmark_options_from, flag_name
from pytest_toolbench.benchmarks.toolhop.options import ToolHopOptions
from pytest_toolbench.config import MAX_REPEATS, RunSettings
from pytest_toolbench.option_sources import setting_flags, settings_values

REPO = Path(__file__).resolve().parents[1]


def core_error(flag: str, value: Any) -> str:
    with pytest.raises(ValueError) as raised:
        settings_values(RunSettings, {flag: value}.get, Path)
    assert "\n" not in str(raised.value)
    return str(raised.value)


def toolhop_error(field: str, value: Any) -> str:
    with pytest.raises(ValueError) as raised:
        benchmark_options_from({f"toolbench_toolhop_{field}": value}.get, "toolhop", ToolHopOptions)
    assert "\n" not in str(raised.value)
    return str(raised.value)


@pytest.mark.parametrize(("value", "message"), [
    (0.0, "--toolhop-tool-timeout 0.0: must be positive and at most 3600"),
    (-1.0, "--toolhop-tool-timeout -1.0: must be positive and at most 3600"),
    (math.inf, "--toolhop-tool-timeout inf: must be a finite number, positive and at most 3600"),
    (math.nan, "--toolhop-tool-timeout nan: must be a finite number, positive and at most 3600"),
    (1e9, "--toolhop-tool-timeout 1000000000.0: must be positive and at most 3600"),
])
def test_tool_timeout_is_bounded(value: float, message: str):
    assert toolhop_error("tool_timeout_s", value) == message


def test_tool_timeout_and_turns_in_range_are_kept():
    options = benchmark_options_from({"toolbench_toolhop_tool_timeout_s": 3600.0,
                                      "toolbench_toolhop_max_turns": 1}.get, "toolhop", ToolHopOptions)
    assert (options.tool_timeout_s, options.max_turns) == (3600.0, 1)


def test_zero_turns_is_refused():
    assert toolhop_error("max_turns", 0) == "--toolhop-max-turns 0: must be at least 1"


def test_a_field_validators_rule_is_one_line_naming_the_flag():
    from pytest_toolbench.benchmarks.metabench.options import MetaBenchOptions

    with pytest.raises(ValueError) as raised:
        benchmark_options_from({"toolbench_metabench_keyword_text": "{x}"}.get, "metabench", MetaBenchOptions)
    assert str(raised.value).startswith("--metabench-keyword-text {x}: ")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--request-timeout", math.inf, "--request-timeout inf: must be a finite number, positive"),
    ("--request-timeout", math.nan, "--request-timeout nan: must be a finite number, positive"),
    ("--request-timeout", -1.0, "--request-timeout -1.0: must be positive"),
    ("--repeats", 1_000_000_000, f"--repeats 1000000000: must be between 1 and {MAX_REPEATS}"),
    ("--repeats", 0, f"--repeats 0: must be between 1 and {MAX_REPEATS}"),
    ("--max-tokens", -5, "--max-tokens -5: must be at least 1"),
    ("--max-tokens", 0, "--max-tokens 0: must be at least 1"),
    ("--temperature", -1.0, "--temperature -1.0: must be between 0 and 2"),
    ("--temperature", 2.5, "--temperature 2.5: must be between 0 and 2"),
    ("--temperature", math.nan, "--temperature nan: must be a finite number, between 0 and 2"),
    ("--temperature", math.inf, "--temperature inf: must be a finite number, between 0 and 2"),
    ("--case-timeout", math.inf, "--case-timeout inf: must be a finite number, positive"),
    ("--model", "", "--model '': must not be empty (leave --model out for the default, smollm2-135m)"),
    ("--model", "  ", "--model '  ': must not be empty (leave --model out for the default, smollm2-135m)"),
    ("--scenario", [""], "--scenario '': must not be empty (leave --scenario out to run every scenario)"),
    ("--scenario", [" , "], "--scenario ' , ': must not be empty (leave --scenario out to run every scenario)"),
])
def test_core_option_bounds(flag: str, value: Any, message: str):
    assert core_error(flag, value) == message


def test_values_at_the_bounds_are_kept():
    given = {"--temperature": 2.0, "--max-tokens": 1, "--repeats": MAX_REPEATS, "--model": "m",
             "--scenario": ["direct"]}
    settings = RunSettings(**settings_values(RunSettings, given.get, Path))
    assert (settings.temperature, settings.max_tokens, settings.repeats) == (2.0, 1, MAX_REPEATS)
    assert settings.scenarios == ("direct",) and settings.model == "m"


def _float_flags() -> list[tuple[str, Any]]:
    flags = [(s.flag, s.info) for s in setting_flags(RunSettings)]
    for benchmark in registry().values():
        for field, info in benchmark.options_model.model_fields.items():
            flag = flag_name(benchmark.name, field, info)
            if flag is not None:
                flags.append((flag, info))
    return [(flag, info) for flag, info in flags
            if float in (info.annotation, *typing.get_args(info.annotation))]


def test_no_float_option_takes_inf_or_nan():
    """Every float flag, core or benchmark, is refused inf and nan, and its field says so too
    (a setting built in code is checked by pydantic the same way)."""
    from pytest_toolbench.option_sources import check_value

    floats = _float_flags()
    assert {"--request-timeout", "--temperature", "--toolhop-tool-timeout"} <= {f for f, _ in floats}
    for flag, info in floats:
        for value in (math.inf, -math.inf, math.nan):
            with pytest.raises(ValueError, match="must be a finite number"):
                check_value(flag, value, info)
        assert any(getattr(m, "allow_inf_nan", True) is False for m in info.metadata), flag


# --- whole runs: exit 4, one line, no request -----------------------------------------------

BAD_COMMANDS = [
    (["--toolhop-tool-timeout", "0"], "--toolhop-tool-timeout 0.0: must be positive"),
    (["--toolhop-tool-timeout", "-1"], "--toolhop-tool-timeout -1.0: must be positive"),
    (["--toolhop-tool-timeout", "inf"], "--toolhop-tool-timeout inf: must be a finite number"),
    (["--toolhop-max-turns", "0"], "--toolhop-max-turns 0: must be at least 1"),
    (["--cache-only", "--no-cache"], "--cache-only with --no-cache:"),
    (["--request-timeout", "inf"], "--request-timeout inf: must be a finite number"),
    (["--repeats", "1000000000"], "--repeats 1000000000: must be between 1 and 1000"),
    (["--scenario="], "--scenario '': must not be empty"),
    (["--model="], "--model '': must not be empty"),
    (["--max-tokens", "-5"], "--max-tokens -5: must be at least 1"),
    (["--temperature", "-1"], "--temperature -1.0: must be between 0 and 2"),
]


@pytest.mark.parametrize(("args", "message"), BAD_COMMANDS, ids=[" ".join(a) for a, _ in BAD_COMMANDS])
def test_bad_option_stops_the_run_before_any_model_call(tmp_path: Path, args: list[str], message: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    with FakeOpenAIServer(lambda body, i: (200, {}, completion(content="x"))) as server:
        # --model comes first so that a later --model= replaces it, as a user's would.
        cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider", "-q",
               "-p", "no:randomly", "-n", "0", "--model", "m", "--base-url", server.base_url,
               "--api-key", "t", "--runs-dir", str(tmp_path / "runs"),
               "--cache-dir", str(tmp_path / "cache"), *args]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
        assert server.requests == []
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out[-3000:]
    errors = [line for line in out.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: pytest-toolbench: {message}"), out[-3000:]
    assert "Traceback" not in out
