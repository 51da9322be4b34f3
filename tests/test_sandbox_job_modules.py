"""Jobs from a benchmark's own module (``sandbox_modules``): only declared modules run, each is
imported by the zygote from its folder outside this repository, and a call reads that module and
nothing beside it (the jail binds it read-only; Landlock allows it alone)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks.base import declared_sandbox_modules
from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import SandboxRunner, ToolSandbox
from pytest_toolbench.sandbox.pool import JobModule, check_job

TOOLBOX = Path(__file__).resolve().parent / "toolbox_benchmark"
RUN = "pytest_toolbench.sandbox.jobs:run_source"


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toolbox's tools module in a folder outside the repository, beside a file of that
    folder that no call may read, and a package whose job lives in a submodule."""
    folder = tmp_path_factory.mktemp("outside")
    shutil.copy(TOOLBOX / "toolbox_tools.py", folder / "toolbox_tools.py")
    (folder / "beside.txt").write_text("not the module's\n", encoding="utf-8")
    package = folder / "toolbox_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "data.txt").write_text("the package's own data\n", encoding="utf-8")
    (package / "jobs.py").write_text(
        "import os\n\n"
        "def read(payload):\n"
        "    here = os.path.dirname(__file__)\n"
        "    return open(os.path.join(here, payload['name']), encoding='utf-8').read()\n",
        encoding="utf-8")
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))
    for name in ("toolbox_tools", "toolbox_pkg", "toolbox_pkg.jobs"):
        sys.modules.pop(name, None)


@pytest.fixture(scope="module")
def sandbox(outside: Path):
    with ToolSandbox(SandboxLimits(workers=1, cpu_seconds=5), job_modules=("toolbox_tools", "toolbox_pkg.jobs")) as sb:
        yield sb


def test_a_declared_module_runs_in_the_sandbox_from_its_own_file(sandbox: ToolSandbox, outside: Path) -> None:
    assert isinstance(sandbox, SandboxRunner)
    outcome = sandbox.run("toolbox_tools:call", {"name": "add", "arguments": '{"a": 2, "b": 3}'}, 5.0)
    assert outcome.status == "ok", outcome.detail
    assert outcome.value["content"] == "5" and outcome.value["error"] is False
    where = outcome.value["where"]
    assert where["module"] == str(outside / "toolbox_tools.py")
    assert Path(where["cwd"]).parent.name.startswith("toolbench-sandbox-")


def test_a_call_reads_its_package_but_nothing_beside_it(sandbox: ToolSandbox, outside: Path) -> None:
    ok = sandbox.run("toolbox_pkg.jobs:read", {"name": "data.txt"}, 5.0)
    assert ok.status == "ok" and ok.value == "the package's own data\n", ok.detail
    # The folder that holds the module (and the harness's sys.path entry) is not readable.
    source = f"def f():\n    return open({str(outside / 'beside.txt')!r}).read()"
    refused = sandbox.run(RUN, {"source": source, "entry": "f", "kwargs": {}}, 5.0)
    assert refused.status == "ok" and refused.value["error"] is not None, refused
    assert refused.value["type"] in ("FileNotFoundError", "PermissionError")


def test_only_declared_modules_and_the_harness_are_jobs(sandbox: ToolSandbox) -> None:
    for job in ("toolbox_tools", "toolbox_tools:", "json:loads", "os:system", "toolbox_pkg:read",
                "toolbox_pkg.jobs.x:read", "x.toolbox_tools:call", "toolbox_tools:call()"):
        with pytest.raises(ValueError):
            sandbox.run(job, {}, 1.0)
    check_job("pytest_toolbench.sandbox.jobs:ping", ())
    check_job("toolbox_tools:call", ("toolbox_tools",))
    with pytest.raises(ValueError):
        check_job("toolbox_tools:call", ())


def test_a_module_that_cannot_serve_is_refused_before_any_start(outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, why in (("no_such_module_here", "not on the import path"), ("toolbox tools", "not a module name"),
                      ("pytest_toolbench.sandbox.jobs", "part of the harness")):
        with pytest.raises(ValueError, match=why):
            ToolSandbox(job_modules=(name,))
    with pytest.raises(ValueError, match="preload"):
        ToolSandbox(preload=("toolbox_tools",))
    # A module whose folder holds the project (the working directory) would open it to calls.
    monkeypatch.chdir(outside / "toolbox_pkg")
    with pytest.raises(ValueError, match="holds"):
        JobModule.locate("toolbox_pkg.jobs")


def test_the_benchmarks_declarations_are_collected_and_checked() -> None:
    class Declares:
        sandbox_modules = ("a_tools", "b_tools")

    class Again:
        sandbox_modules = ("b_tools",)

    assert declared_sandbox_modules({"x": Declares(), "y": Again(), "z": object()}) == ("a_tools", "b_tools")

    class Wrong:
        sandbox_modules = "a_tools"

    with pytest.raises(ValueError, match="tuple of module names"):
        declared_sandbox_modules({"w": Wrong()})


def test_the_environment_starts_the_sandbox_with_the_declared_modules(outside: Path) -> None:
    """``env.sandbox`` gets the registered benchmarks' ``sandbox_modules``; one that cannot
    serve stops the run with one line (EnvironmentUnavailable), before any model call."""
    from pytest_toolbench.benchmarks.base import EnvironmentUnavailable
    from pytest_toolbench.config import RunSettings
    from pytest_toolbench.runtime.environment import RunEnvironment

    class Declares:
        sandbox_modules = ("toolbox_tools",)

    env = RunEnvironment(RunSettings(model="oracle"), benchmarks=lambda: {"toolbox": Declares()})
    try:
        outcome = env.sandbox.run("toolbox_tools:call", {"name": "multiply", "arguments": '{"a": 6, "b": 7}'}, 5.0)
        assert outcome.status == "ok" and outcome.value["content"] == "42", outcome.detail
    finally:
        env.close()

    class Missing:
        sandbox_modules = ("no_such_tools_module",)

    env = RunEnvironment(RunSettings(model="oracle"), benchmarks=lambda: {"missing": Missing()})
    with pytest.raises(EnvironmentUnavailable, match="no_such_tools_module.*not on the import path"):
        env.sandbox


def test_an_undeclared_job_is_refused_before_its_module_is_imported(
        sandbox: ToolSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``arun`` resolves a job's reply check on the caller's thread (runtime/logger_registry.py)
    only once the job passed ``check_job``: the harness imports no module a refused job names."""
    import asyncio

    marker = tmp_path / "imported"
    (tmp_path / "toolbench_never_imported.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n\ndef call(payload):\n    return 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="declared modules"):
        asyncio.run(sandbox.arun("toolbench_never_imported:call", {}, 1.0))
    assert not marker.exists() and "toolbench_never_imported" not in sys.modules
    ok = asyncio.run(sandbox.arun("toolbox_tools:call", {"name": "add", "arguments": '{"a": 1, "b": 1}'}, 5.0))
    assert ok.status == "ok" and ok.value["content"] == "2", ok.detail
