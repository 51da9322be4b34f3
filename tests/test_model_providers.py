"""Model providers (models/providers.py): ``--backend NAME`` finds its model in a registry that a
package fills without editing the factory, through code or an entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from installed_folder import write_dist_info
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import CallContext, ChatRequest, ChatResponse
from pytest_toolbench.models.cache import CachedModel
from pytest_toolbench.models.factory import build_model
from pytest_toolbench.models.providers import (
    ENTRY_POINT_GROUP,
    ModelConfigError,
    ProviderContext,
    find_provider,
    providers,
    register_provider,
    unregister_provider,
)

REPO = Path(__file__).resolve().parents[1]

#: An outside package's provider: the benchmark's own reference policy behind the model's name,
#: so every case it runs is known to pass.
OUTSIDE_PROVIDER = '''
from pytest_toolbench.models.base import ChatResponse


class GoldEcho:
    def __init__(self, spec):
        self.spec, self.name = spec, spec.name or spec.model

    async def complete(self, request, ctx):
        return ChatResponse(message=ctx.oracle(request), model=self.name)

    async def aclose(self):
        pass

    def describe(self):
        return {"backend": self.spec.label, "model": self.spec.model, "base_url": None}


def provider(ctx):
    return GoldEcho(ctx.spec)
'''


class Constant:
    """A model of a test's own: one fixed answer."""

    def __init__(self, ctx: ProviderContext):
        self.ctx, self.name = ctx, ctx.spec.name or ctx.spec.model

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        return ChatResponse(message={"role": "assistant", "content": "constant"}, model=self.name)

    async def aclose(self) -> None:
        pass

    def describe(self) -> dict:
        return {"backend": self.ctx.spec.label, "model": self.name, "base_url": None}


def test_the_bundled_providers_are_registered_like_any_other() -> None:
    assert {"openai", "vllm", "oracle", "replay"} <= set(providers())
    assert not find_provider("oracle").cached and find_provider("openai").cached


def test_a_provider_registered_in_code_builds_the_model_behind_the_cache(tmp_path: Path) -> None:
    register_provider("constant-test", Constant)
    try:
        settings = RunSettings(model="mine", backend="constant-test", cache_dir=tmp_path,
                               request_timeout_s=7, max_retries=1)
        model = build_model(settings)
        assert isinstance(model, CachedModel) and isinstance(model.inner, Constant)
        spec = model.inner.ctx.spec  # built once from the settings, as for the bundled ones
        assert (spec.model, spec.label, spec.timeout_s, spec.max_retries) == ("mine", "constant-test", 7, 1)
        assert model.describe()["backend"] == "constant-test"
    finally:
        unregister_provider("constant-test")


def test_an_unknown_backend_names_the_known_ones() -> None:
    with pytest.raises(ModelConfigError) as info:
        build_model(RunSettings(model="m", backend="no-such-provider"))
    assert "no-such-provider" in str(info.value)
    assert "expected one of auto, openai, oracle, replay, vllm" in str(info.value)
    assert ENTRY_POINT_GROUP in str(info.value)


def outside_package(folder: Path) -> Path:
    """An installed distribution (a dist-info on the path) declaring the provider ``gold-echo``."""
    folder.mkdir()
    (folder / "toolbench_gold_echo.py").write_text(OUTSIDE_PROVIDER, encoding="utf-8")
    write_dist_info(folder, "toolbench-gold-echo", "1.0",
                    {ENTRY_POINT_GROUP: {"gold-echo": "toolbench_gold_echo:provider"}})
    return folder


def run_toolhop(tmp_path: Path, *args: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider", "-q",
           "-p", "no:randomly", "--data", "sample", "--limit", "2",
           "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"), *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


def test_an_outside_package_adds_a_provider_and_runs_cases_with_it(tmp_path: Path) -> None:
    """No edit of the factory: an entry point names the provider, ``--backend`` picks it, the
    cases run through it (and its replies through the response cache, as any endpoint's)."""
    package = outside_package(tmp_path / "site")
    report = tmp_path / "report.json"
    proc = run_toolhop(tmp_path, "--backend", "gold-echo", "--model", "my-model",
                       "--toolbench-json", str(report), pythonpath=package)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["cases"] and {c["outcome"] for c in data["cases"]} == {"passed"}
    assert {c["model"] for c in data["cases"]} == {"my-model"}
    assert data["run"]["settings"]["backend"] == "gold-echo"
    assert data["run"]["cache"]["model_calls"] > 0 and data["run"]["cache"]["replies_from_cache"] == 0

    again = tmp_path / "again.json"
    proc = run_toolhop(tmp_path, "--backend", "gold-echo", "--model", "my-model",
                       "--toolbench-json", str(again), pythonpath=package)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cache = json.loads(again.read_text(encoding="utf-8"))["run"]["cache"]
    assert cache["replies_from_cache"] == cache["model_calls"] > 0  # every reply from the cache


def test_an_unknown_backend_stops_the_run_before_any_case(tmp_path: Path) -> None:
    proc = run_toolhop(tmp_path, "--backend", "gold-echo")  # the package is not installed here
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert ("--backend gold-echo: no such model provider (expected one of auto, openai, oracle, replay, vllm)"
            in proc.stdout + proc.stderr)
