"""Issue 22 without vLLM: the managed server starts on the first cache miss (once, for every
caller), never for a fully cached run or --cache-only; its port is never in the cache key; a
timed-out request to it is not resent; infrastructure errors say cause, attempts and option."""

from __future__ import annotations

import asyncio
import io
import os
import re
import threading
import time
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, delayed, reply
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import CallContext, ChatRequest, ChatResponse, ModelCallError
from pytest_toolbench.models.cache import CachedModel
from pytest_toolbench.models.factory import build_model
from pytest_toolbench.models.spec import BackendSpec, ServerInfo
from pytest_toolbench.models.openai_backend import OpenAIBackend
from pytest_toolbench.results.aggregate import aggregate
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome
from pytest_toolbench.results.gates import error_rate_verdicts
from pytest_toolbench.results.infra_errors import describe_errors, summarize_errors
from pytest_toolbench.models.lazy_server import (
    REQUEST_FILE,
    LazyServerModel,
    ServerAnswer,
    wait_for_server,
)
from pytest_toolbench.servers.owner import ServerOwner
from pytest_toolbench.runtime.startup_progress import StartupProgress

CTX = CallContext(case_id="c1")


def request(text: str = "hi") -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}])


class FakeServer:
    """Stands for VLLMServer: counts starts, takes a moment to come up."""

    served_model_name = "m"

    def __init__(self, fail: bool = False, delay_s: float = 0.3):
        self.starts = 0
        self.fail, self.delay_s = fail, delay_s
        self.stopped = False
        self.base_url: str | None = None
        self.pid: int | None = None

    def start(self) -> str:
        self.starts += 1
        time.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("vLLM server exited with code 1 during startup")
        self.base_url, self.pid = "http://127.0.0.1:9/v1", 4242
        return self.base_url

    def stop(self) -> None:
        self.stopped = True


class Echo:
    """A backend that answers with the URL it was built for."""

    def __init__(self, url: str | None):
        self.name, self.url, self.calls = "m", url, 0

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        self.calls += 1
        return ChatResponse(message={"role": "assistant", "content": f"from {self.url}"})

    async def aclose(self) -> None:
        pass

    def describe(self) -> dict:
        return {"backend": "vllm", "model": "m", "base_url": self.url}


def lazy(folder: Path, built: list) -> LazyServerModel:
    def connect(answer: ServerAnswer) -> Echo:
        built.append(answer)
        return Echo(answer.base_url)

    return LazyServerModel(Echo(None), connect, folder, timeout_s=10)


def test_first_call_starts_the_server_once_for_every_caller(tmp_path: Path) -> None:
    server = FakeServer()
    owner = ServerOwner(server, tmp_path)
    owner.watch()
    time.sleep(0.5)
    assert server.starts == 0 and not owner.started  # nothing asked: nothing started
    built: list = []
    model = lazy(tmp_path, built)
    other_process = lazy(tmp_path, [])  # a second xdist worker: same folder, own model

    async def go():
        return await asyncio.gather(*(model.complete(request(), CTX) for _ in range(5)),
                                    other_process.complete(request(), CTX))

    replies = asyncio.run(go())
    assert {r.content for r in replies} == {"from http://127.0.0.1:9/v1"}
    assert server.starts == 1 and len(built) == 1 and owner.started
    assert owner.info()["startup_s"] is not None
    owner.stop()
    assert server.stopped


def test_a_run_that_never_asks_never_starts(tmp_path: Path) -> None:
    server = FakeServer()
    owner = ServerOwner(server, tmp_path)
    owner.watch()
    time.sleep(0.3)
    owner.stop()
    assert server.starts == 0 and not (tmp_path / REQUEST_FILE).exists()


def test_failed_start_is_an_infrastructure_error_with_its_cause(tmp_path: Path) -> None:
    out = io.StringIO()
    owner = ServerOwner(FakeServer(fail=True), tmp_path, progress=StartupProgress(out, tty=False))
    owner.watch()
    with pytest.raises(ModelCallError) as info:
        asyncio.run(lazy(tmp_path, []).complete(request(), CTX))
    owner.stop()
    assert info.value.kind == "server_start_failed" and "exited with code 1" in info.value.message
    assert "vllm.log" in info.value.hint and "could not start vLLM" in out.getvalue()


def test_waiting_gives_up_after_its_timeout(tmp_path: Path) -> None:
    with pytest.raises(ModelCallError, match="no vLLM server after"):
        asyncio.run(wait_for_server(tmp_path, timeout_s=0.3))


def test_cache_hits_and_cache_only_never_start_the_server(tmp_path: Path) -> None:
    server = FakeServer()
    owner = ServerOwner(server, tmp_path / "run")
    owner.watch()
    cache = tmp_path / "cache"
    stored = CachedModel(Echo("http://elsewhere/v1"), cache, {"server": "identity"},
                         include_base_url=False)
    asyncio.run(stored.complete(request("cached"), CTX))  # a reply from an earlier run
    model = CachedModel(lazy(tmp_path / "run", []), cache, {"server": "identity"},
                        include_base_url=False, cache_only=True)
    assert asyncio.run(model.complete(request("cached"), CTX)).cached
    with pytest.raises(ModelCallError) as info:
        asyncio.run(model.complete(request("never seen"), CTX))
    time.sleep(0.4)
    owner.stop()
    assert info.value.kind == "cache_miss" and server.starts == 0


def test_cache_key_has_no_port_of_the_managed_server(tmp_path: Path) -> None:
    """Two runs, two ports, one key; a user-given endpoint keeps its URL in the key."""
    settings = RunSettings(model="smollm2-135m", backend="vllm", cache_dir=tmp_path, decoding="closed")
    identity = {"server_args": ["--dtype", "float32"], "model_path": "/m"}
    keys = []
    for port in (41234, 41999):  # eagerly started (URL known) and lazily started (rendezvous)
        eager = build_model(settings, server=ServerInfo(
            base_url=f"http://127.0.0.1:{port}/v1", served_model="m", identity=identity))
        keys.append(eager.key_for(request()))
    lazy_model = build_model(settings, server=ServerInfo(
        served_model="m", identity=identity, rendezvous=str(tmp_path / "run")))
    keys.append(lazy_model.key_for(request()))
    assert len(set(keys)) == 1
    assert isinstance(lazy_model.inner, LazyServerModel)
    assert lazy_model.inner.describe()["retry_timeouts"] is False

    user = [build_model(RunSettings(model="m", backend="vllm", base_url=url, cache_dir=tmp_path,
                                    decoding="closed"))
            for url in ("http://gpu-a:8000/v1", "http://gpu-b:8000/v1")]
    assert user[0].key_for(request()) != user[1].key_for(request())
    assert user[0].inner.retry_timeouts is True  # someone else's server: load may pass


def test_timed_out_request_to_own_server_is_not_resent() -> None:
    with FakeOpenAIServer(delayed(1.0, reply(content="late"))) as server:
        model = OpenAIBackend(BackendSpec(model="m", base_url=server.base_url, api_key="k", timeout_s=0.3, max_retries=6,
                              retry_timeouts=False, max_tokens=96, backoff_initial_s=0.01))

        async def go():
            try:
                return await model.complete(request(), CTX)
            finally:
                await model.aclose()

        with pytest.raises(ModelCallError) as info:
            asyncio.run(go())
        assert len(server.requests) == 1
    err = info.value
    assert err.kind == "timeout" and err.attempts == 1
    assert "--request-timeout 0.3 s" in err.message and "--max-tokens (now 96)" in err.hint


def error_case(case_id: str, error: InfraError) -> CaseResult:
    return CaseResult(case_id=case_id, benchmark="toolhop", scenario="mandatory",
                      outcome=Outcome.ERROR, error=error)


def test_reports_say_cause_attempts_and_option() -> None:
    timeout = ModelCallError("timeout", "m failed", attempts=1,
                             hint="no reply within --request-timeout 60 s | try: raise --request-timeout")
    results = [
        error_case("a", InfraError.of(timeout)),
        error_case("b", InfraError(kind="http_503", message="x", attempts=7)),
        error_case("c", InfraError(kind="http_503", message="x", attempts=5)),
        CaseResult(case_id="d", benchmark="toolhop", scenario="mandatory", outcome=Outcome.PASSED,
                   values={"answer_correct": 1.0}),
    ]
    summaries = summarize_errors(r for r in results if r.is_error)
    text = describe_errors({"http_503": 2, "timeout": 1}, summaries)
    assert "timeout x1 (no reply within --request-timeout 60 s; 1 attempt per call; try: raise " \
           "--request-timeout)" in text
    assert "http_503 x2 (the endpoint returned a server error; 5-7 attempts per call; try: " \
           "raise --max-retries" in text
    metrics = aggregate(results, {"toolhop": []}, {"toolhop": []})
    assert metrics.scenarios[0].error_details["timeout"].attempts_max == 1
    verdict = error_rate_verdicts(metrics, 0.0)[0]
    assert "1 attempt per call; try: raise --request-timeout" in verdict.reason
    # an old report (no details) still says cause and option
    assert "try: run once without --cache-only" in describe_errors({"cache_miss": 3})


def test_startup_progress_log_lines_and_terminal_line() -> None:
    log = io.StringIO()
    progress = StartupProgress(log, tty=False)
    with progress.phase("starting vLLM", key="vLLM start"):
        time.sleep(0.05)
    lines = log.getvalue().splitlines()
    assert lines[0] == "pytest-toolbench: starting vLLM ..."
    assert lines[-1].startswith("pytest-toolbench: starting vLLM: done in ")
    assert "\r" not in log.getvalue() and progress.durations["vLLM start"] > 0

    term = io.StringIO()
    progress = StartupProgress(term, tty=True)
    with progress.phase("converting"):
        time.sleep(1.3)
    assert "\r\x1b[Kpytest-toolbench: converting ... 0:01" in term.getvalue()
    # The phase's own time, to a tenth: at least the 1.3 s slept, more on a busy machine (a make
    # test beside four busy loops read 1.4 s), and the same figure the run records.
    done = re.search(r"\r\x1b\[Kpytest-toolbench: converting: done in (\d+\.\d) s\n\Z", term.getvalue())
    assert done, term.getvalue()
    assert 1.3 <= float(done.group(1)) == round(progress.durations["converting"], 1)


def test_redrawn_line_fits_the_terminal() -> None:
    from pytest_toolbench.runtime.startup_progress import _fit

    text = "pytest-toolbench: converting X.gguf once per machine into /a/very/long/path ... 0:42"
    fitted = _fit(text, 40)
    assert len(fitted) == 39 and fitted.startswith("pytest-toolbench") and fitted.endswith("0:42")
    assert _fit("short", 40) == "short"


def test_a_terminal_that_reports_no_width_is_taken_as_80_columns() -> None:
    # a pseudo-terminal whose size was never set reads 0 columns: the redrawn line was cut to 20
    master, slave = os.openpty()
    try:
        with open(slave, "w", closefd=False) as stream:
            progress = StartupProgress(stream)
            assert progress.tty and os.get_terminal_size(slave).columns == 0
            with progress.phase("converting X.gguf once per machine into the cache"):
                time.sleep(1.3)
            progress.close()
        shown = os.read(master, 65536).decode()
        line = "pytest-toolbench: converting X.gguf once per machine into the cache ... 0:01"
        assert "\x1b[K" + line in shown
    finally:
        os.close(master)
        os.close(slave)


def test_startup_progress_never_fails_the_step() -> None:
    progress = StartupProgress(io.StringIO(), tty=False)
    with pytest.raises(ValueError):
        with progress.phase("x"):
            raise ValueError("boom")
    assert "x" in progress.durations
    assert threading.active_count() >= 1


def test_server_starts_at_once_only_when_a_miss_is_certain(tmp_path: Path) -> None:
    """A fresh cache (for this model served this way) or --no-cache: the first call will miss, so
    the start overlaps pytest's own; once any reply is stored, a re-run waits for a real miss."""
    from pytest_toolbench.models.cache import served_marker
    from pytest_toolbench.servers.managed import first_call_will_miss

    identity = {"server_args": ["--dtype", "float32"]}
    settings = RunSettings(model="m", backend="vllm", cache_dir=tmp_path, decoding="closed")
    assert first_call_will_miss(settings, identity)
    assert not first_call_will_miss(settings.model_copy(update={"cache_only": True}), identity)
    model = build_model(settings, server=ServerInfo(
        served_model="m", identity=identity, rendezvous=str(tmp_path / "run")))
    model.inner = Echo("http://127.0.0.1:1/v1")  # answer without a server
    asyncio.run(model.complete(request(), CTX))
    assert served_marker(tmp_path, "m", identity).exists()
    assert not first_call_will_miss(settings, identity)
    assert first_call_will_miss(settings, {"server_args": ["--dtype", "bfloat16"]})
    assert first_call_will_miss(settings.model_copy(update={"use_cache": False}), identity)
