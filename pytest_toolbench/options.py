"""The core flags, derived from :class:`RunSettings`' declarations, and the settings built from them."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_toolbench.config import EMBEDDED_MODEL, RunSettings
from pytest_toolbench.benchmarks import declarations
from pytest_toolbench.benchmarks.options import add_benchmark_options, benchmark_options_from
from pytest_toolbench.option_sources import (
    ToolbenchGroup,
    add_setting_flags,
    from_command_line,
    ini_name,
    resolve_option_sources,
    setting_flags,
    settings_values,
)
from pytest_toolbench.runs.store import RUNS_DIR_ENV, default_runs_dir
from pytest_toolbench.secret_args import masked_url


def add_options(parser: pytest.Parser) -> None:
    """The core flags, as ``RunSettings`` declares them (``config.option``), then each
    benchmark's (``benchmarks/options.py``). Every option shows its default in --help and has an
    ini key (option_sources.py)."""
    g = ToolbenchGroup(parser, parser.getgroup("toolbench", "pytest-toolbench: LLM tool-use benchmarks"))
    add_setting_flags(g, RunSettings, defaults={"--runs-dir": default_runs_dir()})
    for benchmark in declarations().values():
        add_benchmark_options(parser, benchmark.name, benchmark.title, benchmark.options_model)


def _split(values: list[str] | None) -> tuple[str, ...] | None:
    if not values:
        return None
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def _check_urls_and_ids(config: pytest.Config) -> None:
    """An empty --sample-ids, a --base-url that is no URL: one ValueError line."""
    opt = config.getoption
    if opt("--sample-ids") is not None and not _split([opt("--sample-ids")]):
        raise ValueError("--sample-ids: no sample id given")
    for url in opt("--base-url") or []:
        check_base_url(url, "--base-url")


def _check_contradictions(values: dict[str, object]) -> None:
    """Flags that each work alone but not together: one ValueError line, not a silent winner
    (--cache-only with --no-cache made every call to the model that --cache-only forbids)."""
    if values.get("cache_only") and values.get("use_cache") is False:
        raise ValueError("--cache-only with --no-cache: --cache-only answers only from the "
                         "response cache that --no-cache turns off; give one of them")


def _check_model_name(values: dict[str, object]) -> None:
    """An endpoint's URL given as --model (``--model http://host:8000/v1``) would be sent as the
    model's name to api.openai.com and end in a key error that never names the mix-up."""
    model = str(values.get("model") or "")
    if model.lower().startswith(("http://", "https://")):
        raise ValueError(f"--model {model!r}: that is an endpoint's URL, not a model's name; pass "
                         "it as --base-url and the served model's name as --model")


def check_base_url(url: str, source: str) -> None:
    """An http(s) URL with a host (and a valid port, if any): one ValueError line otherwise, so a
    typo is a usage error at configure, not an infrastructure error in every case."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError on a port out of range or not a number
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and " " not in url.strip()
    except ValueError:
        ok = False
    if not ok:  # shown with its password masked: a broken URL may still carry one
        raise ValueError(f"{source} {masked_url(url)!r}: not an http(s) URL with a host "
                         "(e.g. http://localhost:8000/v1)")
    from pytest_toolbench.models.endpoint_pool import credentials_problem

    problem = credentials_problem(url, source)
    if problem is not None:
        raise ValueError(problem)


def settings_from_config(config: pytest.Config) -> RunSettings:
    """The run's settings from the resolved flags (command line > ini file > default); a value
    that cannot work (a number outside its field's constraints, an empty --sample-ids, a
    --base-url that is no URL) is one ValueError line, before anything starts."""
    resolve_option_sources(config)
    values = settings_values(RunSettings, _anchored_paths(config), lambda p: _absolute(config, p))
    _check_urls_and_ids(config)
    _check_contradictions(values)
    _check_model_name(values)
    values["model"] = values.get("model") or EMBEDDED_MODEL
    _baseline_run_id(config, values)
    urls = _base_urls(values.get("base_urls", ()), values.get("base_urls_file"))
    values["base_urls"] = tuple(urls)
    values["base_url"] = urls[0] if urls else None
    values["data"] = _data_choice(config, values.get("data", "real"))
    if "data_dir" not in values and values["data"] == "sample":
        values["data_dir"] = project_samples(config)
    values["benchmark_options"] = {
        b.name: benchmark_options_from(config.getoption, b.name, b.options_model)
        for b in declarations().values()
    }
    return RunSettings(**values)


#: Sets the default of --data (real, sample) where neither the command line nor the ini file
#: does; the test suite sets it to sample for the suite runs it starts (tests/conftest.py).
DATA_ENV = "TOOLBENCH_DATA"


def project_samples(config: pytest.Config) -> Path | None:
    """``--data sample``'s folder: the project's ``data/`` where it has a benchmark's folder (a
    checkout's samples, as edited there, read on a wheel install too), else None: the bundled
    ones. Any ``data/`` was taken: a project keeping its own files there ran no sample at all
    ("cannot load toolhop data: data/toolhop ... does not exist")."""
    folder = project_root(config) / "data"
    return folder if any((folder / name).is_dir() for name in declarations()) else None


def _data_choice(config: pytest.Config, value: str) -> str:
    """--data: the command line, else the ini key, else $TOOLBENCH_DATA, else real."""
    if from_command_line(config, "--data") or config.getini("toolbench_data"):
        return value
    env = os.environ.get(DATA_ENV, "").strip()
    if env and env not in ("real", "sample"):
        raise ValueError(f"${DATA_ENV} {env!r}: must be real or sample")
    return env or value


def _absolute(config: pytest.Config, path: str) -> Path:
    """Relative paths are taken from where pytest was invoked, as users expect."""
    p = Path(os.path.expanduser(path))
    return p if p.is_absolute() else Path(config.invocation_params.dir) / p


def project_root(config: pytest.Config) -> Path:
    """Where a run's default folders go (``.toolbench/cache``, ``.toolbench/runs``): pytest's
    rootdir, as its own ``.pytest_cache``, when pytest runs in it or below it; else where pytest
    runs. From a subfolder of the project (``cd suites/toolhop; pytest .``, an IDE running one
    file) they went into that subfolder: every reply the project's cache held was asked for
    again, and ``toolbench runs`` at the project's top did not list the run.

    Only a rootdir something marks as the project's top (a settings file, ``--rootdir``, a
    ``setup.py``): with none, pytest takes the common folder of every argument that names an
    existing path, option values included (``--data-dir /data/x``, a ``--toolbench-json`` file
    an earlier run wrote). A project ``toolbench init`` made (no settings file) then put its runs
    and cache in ``/.toolbench`` (refused as a user: "cannot write in /"), and ``--data sample``
    read ``/data`` where a machine has one."""
    here = Path(config.invocation_params.dir).resolve()
    root = Path(config.rootpath).resolve()
    # (``-c /dev/null``, a way to run with no settings, marks nothing)
    marked = ((config.inipath is not None and config.inipath.is_file())
              or bool(config.getoption("rootdir", None)) or (root / "setup.py").is_file())
    return root if marked and (here == root or root in here.parents) else here


def _anchored_paths(config: pytest.Config) -> Callable[[str], Any]:
    """``config.getoption`` with the relative paths that came from the settings file taken from
    that file's folder (pytest's rule for paths in its ini file) and the default folders from
    :func:`project_root`; a path on the command line (or in ``$TOOLBENCH_RUNS_DIR``) stays
    relative to where pytest runs (:func:`_absolute`)."""
    paths = {f.flag for f in setting_flags(RunSettings) if f.kind is Path}
    ini_dir = config.inipath.parent if config.inipath is not None else None

    def getoption(flag: str) -> Any:
        value = config.getoption(flag)
        if flag not in paths or not isinstance(value, str) or not value or from_command_line(
                config, flag):
            return value
        if Path(os.path.expanduser(value)).is_absolute():
            return value
        if config.getini(ini_name(flag)):
            return str(ini_dir / value) if ini_dir is not None else value
        if flag == "--runs-dir" and os.environ.get(RUNS_DIR_ENV):
            return value
        return str(project_root(config) / value)

    return getoption


def _baseline_run_id(config: pytest.Config, values: dict[str, Any]) -> None:
    """``--baseline ID``: a run id (or a unique prefix of one) as ``toolbench runs`` prints it
    and ``toolbench compare`` takes it, the report of that run under the run's --runs-dir. It
    was taken for a file in the current folder ("cannot read run report (No such file or
    directory)"). A path stays a path (compare/run_refs.py ``names_a_path``)."""
    path, raw = values.get("baseline_path"), config.getoption("--baseline")
    if path is None or not isinstance(raw, str) or path.exists():
        return
    from pytest_toolbench.compare.run_refs import names_a_path, resolve_run

    if names_a_path(raw):  # a path: the baseline's loading says what is wrong with it
        return

    runs_dir = values.get("runs_dir", RunSettings.model_fields["runs_dir"].default)
    try:
        values["baseline_path"] = resolve_run(raw, runs_dir)
    except ValueError as exc:  # RunLoadError: one line naming the runs folder
        raise ValueError(f"--baseline {exc}") from None


def _base_urls(given: tuple[str, ...], path: Path | None) -> list[str]:
    """--base-url (repeatable) then --base-urls-file, duplicates dropped, order kept."""
    from pytest_toolbench.models.endpoint_pool import read_urls_file

    urls = list(given)
    if path:
        urls += read_urls_file(path)
    return list(dict.fromkeys(urls))
