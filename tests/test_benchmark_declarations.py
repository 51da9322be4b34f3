"""What every pytest command reads of the benchmarks (flags, markers, option values) comes from
their declarations, without loading the benchmarks themselves (benchmarks/declaration.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pytest_toolbench.benchmarks import declarations, registry


def test_each_declaration_is_its_benchmarks_own() -> None:
    declared, benchmarks = declarations(), registry()
    assert list(declared) == list(benchmarks)  # the flags' and markers' order in --help
    for name, benchmark in benchmarks.items():
        d = declared[name]
        assert (d.name, d.title, d.options_model, d.label_markers) == (
            benchmark.name, benchmark.title, benchmark.options_model, dict(benchmark.label_markers))


def test_a_command_with_no_toolbench_test_loads_no_benchmark_server_or_sandbox(tmp_path: Path) -> None:
    """A project's own tests in an environment with the plugin: the flags, markers and settings
    are declared, and none of the modules only a toolbench run needs is loaded."""
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    code = (
        "import json, sys, pytest\n"
        "rc = pytest.main(['-q', '-p', 'no:cacheprovider', 'test_plain.py'])\n"
        "print(json.dumps([int(rc), sorted(m for m in sys.modules if m.startswith('pytest_toolbench'))]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    rc, loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rc == 0, proc.stdout + proc.stderr
    assert "pytest_toolbench.plugin" in loaded and "pytest_toolbench.config" in loaded
    for name in registry():
        assert f"pytest_toolbench.benchmarks.{name}.options" in loaded
        assert f"pytest_toolbench.benchmarks.{name}.benchmark" not in loaded
    for heavy in ("pytest_toolbench.servers.managed", "pytest_toolbench.sandbox.pool",
                  "pytest_toolbench.models.spec"):
        assert heavy not in loaded, heavy
