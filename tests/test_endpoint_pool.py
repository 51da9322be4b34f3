"""Several endpoints for one model: least-loaded routing, health cool-down, per-endpoint counts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, error_body, reply
from pytest_toolbench.models.base import CallContext, ChatRequest
from pytest_toolbench.models.call_log import CURRENT_CALL_LOG, CaseCallLog
from pytest_toolbench.models.endpoint_pool import EndpointPool, read_urls_file
from pytest_toolbench.models.spec import BackendSpec
from pytest_toolbench.models.openai_backend import OpenAIBackend


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_least_loaded_then_least_used() -> None:
    pool = EndpointPool(["http://a/v1", "http://b/v1", "http://c/v1"])
    a = pool.acquire()
    b = pool.acquire()
    c = pool.acquire()
    assert [e.url for e in (a, b, c)] == ["http://a/v1", "http://b/v1", "http://c/v1"]
    pool.release(b)
    assert pool.acquire() is b  # the only one with nothing in flight
    pool.release(a)
    pool.release(c)
    assert pool.acquire() is a  # a and c idle with one request each: a comes first


def test_failing_endpoint_cools_down_and_comes_back() -> None:
    clock = Clock()
    pool = EndpointPool(["http://a/v1", "http://b/v1"], failure_threshold=2, cooldown_s=10, clock=clock)
    a = pool.endpoints[0]
    for _ in range(2):
        e = pool.acquire()
        pool.release(e if e is a else e)
    # Two failures in a row on a take it out.
    for _ in range(2):
        a.in_flight += 1
        pool.release(a, "connection")
    assert a.cooldowns == 1 and a.errors["connection"] == 2
    assert all(pool.acquire().url == "http://b/v1" for _ in range(5))
    clock.now += 10.5
    assert pool.acquire() is a  # back after the cool-down, and the least loaded
    # A 400-like failure says nothing about health.
    for _ in range(5):
        a.in_flight += 1
        pool.release(a, "http_400", health=False)
    assert a.cooldowns == 1


def test_all_down_uses_the_first_to_come_back() -> None:
    clock = Clock()
    pool = EndpointPool(["http://a/v1", "http://b/v1"], failure_threshold=1, cooldown_s=10, clock=clock)
    a, b = pool.endpoints
    b.in_flight += 1
    pool.release(b, "http_503")
    clock.now += 1
    a.in_flight += 1
    pool.release(a, "http_503")
    assert pool.acquire() is b


def test_urls_file(tmp_path: Path) -> None:
    path = tmp_path / "urls.txt"
    path.write_text("# replicas\nhttp://10.0.0.1:8000/v1\n\nhttp://10.0.0.2:8000/v1  # second\n")
    assert read_urls_file(path) == ["http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"]
    path.write_text("http://a/v1\nnot a url\n")
    with pytest.raises(ValueError, match=r"urls\.txt:2: not an http\(s\) URL"):
        read_urls_file(path)
    # a file named by mistake (a .env) shows the start of its line only, never the secret
    path.write_text("OPENAI_API_KEY=sk-0123456789abcdef\n")
    with pytest.raises(ValueError) as shown:
        read_urls_file(path)
    assert str(shown.value) == f"{path}:1: not an http(s) URL: 'OPENAI_API_K...'"


def test_a_url_with_credentials_is_refused_its_password_masked(tmp_path: Path) -> None:
    """aiohttp refuses such a URL (every call an unreadable reply), the SDK sends the key as a
    Bearer token anyway, and the URL went into every report, JUnit file and Allure result."""
    from pytest_toolbench.models.endpoint_pool import credentials_problem
    from pytest_toolbench.options import check_base_url

    assert credentials_problem("http://10.0.0.1:8000/v1", "--base-url") is None
    with pytest.raises(ValueError) as refused:
        check_base_url("http://alice:s3cret@10.0.0.1:8000/v1", "--base-url")
    assert str(refused.value).startswith("--base-url 'http://alice:***@10.0.0.1:8000/v1': a user "
                                         "name or password in the URL")
    assert "s3cret" not in str(refused.value)
    for broken in ("http://alice:s3cret@10.0.0.1:80x/v1", "http://alice:s3/cret@10.0.0.1/v1"):
        with pytest.raises(ValueError) as refused:  # no URL, but a password all the same
            check_base_url(broken, "--base-url")
        assert "not an http(s) URL" in str(refused.value) and "s3" not in str(refused.value)
    path = tmp_path / "urls.txt"
    path.write_text("http://10.0.0.1:8000/v1\nhttps://bob@10.0.0.2/v1\n")
    with pytest.raises(ValueError, match=r"urls\.txt:2: 'https://bob@10\.0\.0\.2/v1': a user name"):
        read_urls_file(path)


def test_requests_avoid_a_broken_endpoint_over_http() -> None:
    broken = lambda body, i: (500, {}, error_body(500, "replica down"))  # noqa: E731
    with FakeOpenAIServer(reply(content="ok")) as good, FakeOpenAIServer(broken) as bad:
        backend = OpenAIBackend(BackendSpec(model="m", base_url=None, api_key="k", max_retries=3, concurrency=4,
                                backoff_initial_s=0.0, backoff_max_s=0.0,
                                base_urls=[bad.base_url, good.base_url]))
        backend.pool.failure_threshold = 2

        async def main() -> list[CaseCallLog]:
            logs = []
            for i in range(6):
                log = CaseCallLog()
                CURRENT_CALL_LOG.set(log)
                r = await backend.complete(ChatRequest(messages=[{"role": "user", "content": "q"}]),
                                           CallContext(case_id=f"c{i}", turn=0))
                assert r.message["content"] == "ok"
                logs.append(log)
            await backend.aclose()
            return logs

        logs = asyncio.run(main())
        assert backend.describe()["endpoints"] == [bad.base_url, good.base_url]
        snap = backend.pool.snapshot()
        assert snap[bad.base_url]["errors"] == {"http_500": 2}
        assert snap[bad.base_url]["cooldowns"] == 1
        assert snap[good.base_url]["requests"] == 6
        assert len(bad.requests) == 2  # out of rotation after two failures in a row
        assert logs[0].details()["endpoints"] == {bad.base_url: {"requests": 1, "errors": 1},
                                                  good.base_url: {"requests": 1, "errors": 0}}


@pytest.mark.parametrize("bad_200", [
    "<html>502 Bad Gateway</html>",  # not JSON: the SDK hands the text back
    {"object": "chat.completion", "choices": []},  # no choices
    {"object": "chat.completion", "choices": {"first": {}}},  # another shape (no choices[0])
], ids=["not_json", "no_choices", "other_shape"])
def test_a_replica_answering_bad_200s_is_taken_out_like_a_failing_one(bad_200: object) -> None:
    """Every kind of 200 that is no chat completion counts against its replica, as a 5xx does:
    once only the reply without choices did, and a replica behind a proxy answering HTML kept
    its share of every call's attempts."""
    with FakeOpenAIServer(reply(content="ok")) as good, \
            FakeOpenAIServer(lambda body, i: (200, {}, bad_200)) as bad:
        backend = OpenAIBackend(BackendSpec(model="m", base_url=None, api_key="k", max_retries=3, concurrency=4,
                                backoff_initial_s=0.0, backoff_max_s=0.0,
                                base_urls=[bad.base_url, good.base_url]))
        backend.pool.failure_threshold = 2

        async def main() -> None:
            for i in range(6):
                r = await backend.complete(ChatRequest(messages=[{"role": "user", "content": "q"}]),
                                           CallContext(case_id=f"c{i}", turn=0))
                assert r.message["content"] == "ok"
            await backend.aclose()

        asyncio.run(main())
        snap = backend.pool.snapshot()
        assert snap[bad.base_url]["errors"] == {"bad_response": 2}
        assert snap[bad.base_url]["cooldowns"] == 1
        assert len(bad.requests) == 2  # out of rotation after two bad replies in a row
        assert backend.stats.errors == {"bad_response": 2}


@pytest.mark.parametrize("how", ["repeated", "file"])
def test_a_suite_run_spreads_cases_over_every_endpoint(tmp_path: Path, how: str) -> None:
    """The whole command as a user types it (xdist workers, each with its own pool): both
    endpoints serve requests, every case scores, and the summary and JSON report per-endpoint
    counts that add up to what the servers saw."""
    import json
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    with FakeOpenAIServer(reply(content="<answer>x</answer>")) as a, \
            FakeOpenAIServer(reply(content="<answer>x</answer>")) as b:
        if how == "file":
            urls = tmp_path / "urls.txt"
            urls.write_text(f"# two replicas\n{a.base_url}\n\n{b.base_url}\n")
            where = ["--base-urls-file", str(urls)]
        else:
            where = ["--base-url", a.base_url, "--base-url", b.base_url]
        report = tmp_path / "run.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly", "-n", "2",
             "--scenario", "direct", "--model", "m", "--api-key", "k", "--no-cache",
             "--concurrency", "2", "--toolbench-json", str(report),
             "-o", f"cache_dir={tmp_path / 'pc'}", *where],
            cwd=repo, capture_output=True, text=True, timeout=300, env=env)
        seen = {a.base_url: len(a.requests), b.base_url: len(b.requests)}
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    data = json.loads(report.read_text())
    assert len(data["cases"]) == 6 and all(c["outcome"] != "error" for c in data["cases"])
    endpoints = data["run"]["endpoints"]
    assert {url: c["requests"] for url, c in endpoints.items()} == seen
    assert all(n > 0 for n in seen.values()) and sum(seen.values()) == 6, seen
    assert f"endpoint {a.base_url}: {seen[a.base_url]} requests, 0 errors" in proc.stdout
