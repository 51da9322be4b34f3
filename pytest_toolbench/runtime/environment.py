"""The one environment every benchmark's ``make_runner`` gets (``BenchmarkEnv`` in
benchmarks/base.py): the run's settings, each benchmark's options, and the resources shared by
the benchmarks of a process (sentence-transformer embedders, the tool sandbox, the run folder),
each built on first use so a benchmark pays only for what it uses.

One per pytest process (the controller with ``-n 0``, else each xdist worker). pytest-free: the
pytest side hands in what only it knows (the collected cases, the run folder, where the
sandbox's isolation state is recorded), and tests build one directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_toolbench.benchmarks import registry
from pytest_toolbench.benchmarks.base import (
    Benchmark,
    Case,
    CaseRunner,
    EnvironmentUnavailable,
    declared_sandbox_modules,
    run_open_protocols,
)
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.open_protocol import OpenProtocols
from pytest_toolbench.results import case_store
from pytest_toolbench.sandbox.interface import SandboxRunner


class RunEnvironment:
    def __init__(
        self,
        settings: RunSettings,
        *,
        run_dir: Path | Callable[[], Path] | None = None,
        cases: Callable[[str], Sequence[Case]] | None = None,
        sandbox: SandboxRunner | None = None,
        embedders: Any = None,
        on_sandbox_state: Callable[[dict[str, Any]], None] | None = None,
        benchmarks: Callable[[], dict[str, Benchmark]] = registry,
    ):
        """``cases``: benchmark name -> the cases this process may run (None: every case of the
        benchmark's data, as loaded with the run's options). ``sandbox``/``embedders``: given
        ones are used as they are (tests), otherwise started/created on first use.
        ``on_sandbox_state``: told the isolation the started sandbox really has (the report
        states it, not only whether ``--sandbox-insecure`` was passed)."""
        self.settings = settings
        self._run_dir = run_dir
        self._cases = cases
        self._sandbox: Any = sandbox  # a ToolSandbox (closed by close()) or a test's runner
        self._own_sandbox = False
        self._embedders = embedders
        self._on_sandbox_state = on_sandbox_state
        self._benchmarks = benchmarks
        self._runners: dict[str, CaseRunner] = {}
        self._loaded: dict[str, list[Case]] = {}

    # --- BenchmarkEnv -------------------------------------------------------------------------
    def options(self, benchmark: Benchmark) -> Any:
        return self.settings.options_for(benchmark.name, benchmark.options_model)

    @property
    def embedders(self) -> Any:
        if self._embedders is None:
            # Keyed by embedder identity and texts, so the cache lives once per machine in the
            # user cache folder (as converted models do), not beside a run's --cache-dir.
            from pytest_toolbench.environments.retrieval import Embedders
            from pytest_toolbench.servers.embedded import user_cache_root

            self._embedders = Embedders(user_cache_root() / "embeddings")
        return self._embedders

    @property
    def sandbox(self) -> SandboxRunner:
        if self._sandbox is None:
            self._sandbox = self._start_sandbox()
            self._own_sandbox = True
        return self._sandbox

    @property
    def run_dir(self) -> Path:
        if self._run_dir is None:
            raise LookupError("this environment was built without a run folder")
        if callable(self._run_dir):
            self._run_dir = self._run_dir()
        return self._run_dir

    def scratch_dir(self, name: str) -> Path:
        return case_store.scratch_dir(self.run_dir, name)

    def cases(self, benchmark: str) -> Sequence[Case]:
        if self._cases is not None:
            return self._cases(benchmark)
        if benchmark not in self._loaded:
            bench = self._benchmarks()[benchmark]
            self._loaded[benchmark] = bench.load_cases(
                self.settings.data_dir, bench.scenarios, self.options(bench))
        return self._loaded[benchmark]

    @property
    def open_protocols(self) -> OpenProtocols:
        return run_open_protocols(self._benchmarks())

    # --- the harness's side -------------------------------------------------------------------
    def runner(self, benchmark: str) -> CaseRunner:
        """The benchmark's runner, built by its ``make_runner`` the first time it is asked for;
        raises :class:`EnvironmentUnavailable` where a resource it needs cannot be had."""
        if benchmark not in self._runners:
            self._runners[benchmark] = self._benchmarks()[benchmark].make_runner(self)
        return self._runners[benchmark]

    def close(self) -> None:
        """Stop what this environment started (a sandbox handed in stays its owner's)."""
        if self._own_sandbox and self._sandbox is not None:
            self._sandbox.close()
        self._sandbox = None

    def _start_sandbox(self) -> SandboxRunner:
        """A warm pool of isolated processes for untrusted tool code, started now so a machine
        without the kernel isolation layers stops the run before any model call. Its jobs may
        be the modules the registered benchmarks declare (``sandbox_modules``), and no other
        module outside the package."""
        from pytest_toolbench.sandbox.pool import SandboxStartError, ToolSandbox

        try:
            sandbox = ToolSandbox(self.settings.sandbox,
                                  job_modules=declared_sandbox_modules(self._benchmarks()))
        except ValueError as exc:  # a declared module that cannot serve (not found, misplaced)
            raise EnvironmentUnavailable(f"sandbox: {exc}") from exc
        try:
            isolation = sandbox.isolation_state()
        except SandboxStartError as exc:
            sandbox.close()
            raise EnvironmentUnavailable(str(exc)) from exc
        if self._on_sandbox_state is not None:
            self._on_sandbox_state(isolation)
        return sandbox
