"""The shared SDK process (models/sdk_process): every call gives what the in-process backend gives.

Each scenario runs twice against the same kind of real local HTTP server: once with
:class:`OpenAIBackend` in this process, once through :class:`RemoteBackend` and a real SDK
process. The reply, the exception (class, kind, message) and the case's call log must match.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from fake_openai_server import (
    FakeOpenAIServer,
    completion,
    delayed,
    error_body,
    fail_then,
    reply,
    scripted,
    tool_call,
)
from refusing_port import refusing_url

from pytest_toolbench.models.base import (
    CallContext,
    ChatRequest,
    ChatResponse,
    ContextLengthExceeded,
    LostTurn,
    ModelCallError,
)
from pytest_toolbench.models.call_log import CURRENT_CALL_LOG, CaseCallLog
from pytest_toolbench.models.spec import BackendSpec
from pytest_toolbench.models.openai_backend import OpenAIBackend
from pytest_toolbench.models.reachability import EndpointUnreachable
from pytest_toolbench.models.sdk_process.client import RemoteBackend, SdkProcess
from pytest_toolbench.models.sdk_process.protocol import (
    FLUSH_AT_FRAMES,
    FrameLink,
    Hello,
    SdkAddress,
    SdkLink,
    decode_error,
    encode_error,
    frame,
)
from pytest_toolbench.models.sdk_process.server import STARTS_PER_TURN, SdkServer, _Connection
from state_probe import probe_env, write_probe

REPO = Path(__file__).resolve().parents[1]
TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "d",
                                           "parameters": {"type": "object", "properties": {}}}}]


@pytest.fixture(scope="module")
def sdk() -> Any:
    process = SdkProcess()
    yield process
    process.stop()


def link(process: SdkProcess, processes: int = 1) -> SdkLink:
    """How a pytest process reaches ``process`` (session/sdk.py builds the same)."""
    return SdkLink(address=SdkAddress.model_validate(process.address()), processes=processes)


def local_backend(urls: list[str], **kwargs: Any) -> OpenAIBackend:
    options = dict(timeout_s=5.0, max_retries=2, concurrency=8, backoff_initial_s=0.01,
                   backoff_max_s=0.02, retry_after_max_s=0.05)
    options.update(kwargs)
    return OpenAIBackend(BackendSpec(model="test-model", base_url=urls[0], api_key="sk-secret",
                         base_urls=urls if len(urls) > 1 else (), **options))


def call(model: Any, request: ChatRequest, turn: int = 1) -> tuple[Any, CaseCallLog]:
    """(response or exception, the case's call log) of one call in a fresh event loop."""
    log = CaseCallLog()

    async def go() -> Any:
        CURRENT_CALL_LOG.set(log)
        try:
            return await model.complete(request, CallContext(case_id="case-7", turn=turn))
        except ModelCallError as exc:
            return exc
        finally:
            await model.aclose()

    return asyncio.run(go()), log


def outcome(result: Any, log: CaseCallLog, url: str) -> dict[str, Any]:
    """What must agree: the reply (less its latency) or the error, and the call log (retry waits
    are jittered: their kinds and turns only). Each run has its own server: ``url`` is masked."""
    if isinstance(result, ModelCallError):
        shown: Any = {"class": type(result).__name__, "kind": result.kind,
                      "message": result.message.replace(url, "URL")}
    else:
        shown = result.model_dump(exclude={"latency_s"})
    details = log.details()
    for retry in details.get("endpoint_retries", {}).get("attempts", []):
        retry.pop("wait_s")
    details.get("endpoint_retries", {}).pop("wait_s", None)
    for lost in details.get("lost_turns", []):
        lost["message"] = lost["message"].replace(url, "URL")
    return {"result": shown, "log": details}


SCENARIOS: dict[str, tuple[Any, dict[str, Any], dict[str, Any]]] = {
    "text": (lambda: reply("Paris"), {}, {}),
    "tool call, null content, tools sent": (
        lambda: reply(None, [tool_call("lookup", {"q": "x"}, "call_1")]), {"tools": TOOLS}, {}),
    "explicit tools=None sent as null": (lambda: reply("ok"), {"tools": None}, {}),
    "429 then 503 then a reply": (lambda: scripted((429, {"Retry-After": "0"}, error_body(429)),
                                                   (503, {}, error_body(503)),
                                                   (200, {}, completion("late"))), {}, {}),
    "always 500": (lambda: fail_then(99, reply("never"), status=500), {}, {}),
    "401 at once": (lambda: fail_then(99, reply("never"), status=401), {}, {}),
    "context overflow": (lambda: fail_then(99, reply("x"), status=400, headers={}), {}, {}),
    "unreadable 200 then a reply": (lambda: scripted((200, {}, "not json"), (200, {}, completion("ok"))), {}, {}),
    "upstream lost turn": (lambda: fail_then(99, reply("never"), status=500), {},
                           {"upstream_lost_turns": True}),
    "reply cut by length": (lambda: reply("cut mid-", finish_reason="length"), {}, {}),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_sdk_process_answers_as_the_backend_in_process(sdk: SdkProcess, name: str) -> None:
    make_handler, request_fields, backend_options = SCENARIOS[name]
    if name == "context overflow":
        def make_handler():
            return lambda body, i: (400, {}, error_body(400, "This model's maximum context length is 8192 tokens"))
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}], **request_fields)
    seen = []
    for remote in (False, True):
        with FakeOpenAIServer(make_handler()) as server:
            local = local_backend([server.base_url], **backend_options)
            model = RemoteBackend(local, link(sdk)) if remote else local
            seen.append(outcome(*call(model, request), server.base_url))
            bodies = server.requests
        seen[-1]["requests"] = bodies
    assert seen[0] == seen[1]
    if name == "context overflow":
        assert seen[1]["result"]["class"] == ContextLengthExceeded.__name__
    if name == "upstream lost turn":
        assert seen[1]["result"]["class"] == LostTurn.__name__ and seen[1]["log"]["lost_turns"]
    if name == "reply cut by length":  # issue 23: the finish reason crosses the process boundary
        assert seen[1]["result"]["finish_reason"] == "length"


def test_the_sdk_process_calls_with_the_environment_the_pytest_process_has_when_it_calls(
        sdk: SdkProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK process starts before pytest reads the ini file or any conftest; a variable set
    since (``load_dotenv()`` in a conftest, pytest-env) reaches it with the first call, as it
    would reach an SDK in process, and a variable removed since is gone there too."""
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
    seen = []
    for org in ("org-from-a-conftest", None):
        if org is None:
            monkeypatch.delenv("OPENAI_ORG_ID")
        else:
            monkeypatch.setenv("OPENAI_ORG_ID", org)
        with FakeOpenAIServer(lambda body, i: reply("ok")) as server:
            call(RemoteBackend(local_backend([server.base_url]), link(sdk)), request)
            headers = server.headers
        seen.append(headers[0].get("openai-organization"))
    assert seen == ["org-from-a-conftest", None]


def test_several_endpoints_route_in_the_sdk_process_and_count_per_case(sdk: SdkProcess) -> None:
    with FakeOpenAIServer(reply("a")) as one, FakeOpenAIServer(reply("b")) as two:
        local = local_backend([one.base_url, two.base_url], concurrency=4)
        model = RemoteBackend(local, link(sdk))
        log = CaseCallLog()

        async def go() -> list[Any]:
            CURRENT_CALL_LOG.set(log)
            request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
            try:
                return await asyncio.gather(*(model.complete(request, CallContext(case_id=f"c{i}"))
                                              for i in range(8)))
            finally:
                await model.aclose()

        replies = asyncio.run(go())
        assert len(one.requests) + len(two.requests) == 8 and one.requests and two.requests
    assert sorted(r.content for r in replies) == sorted(["a"] * len(one.requests) + ["b"] * len(two.requests))
    assert {url: c["requests"] for url, c in log.endpoints.items()} == {
        one.base_url: len(one.requests), two.base_url: len(two.requests)}
    assert model.describe() == local.describe()  # the cache key's input is unchanged


def test_an_unreachable_endpoint_is_given_up_once_for_every_process_sharing_it(sdk: SdkProcess) -> None:
    """Two pytest processes (xdist workers) on one SDK process and a port nothing listens on:
    the verdict comes once, at the bound and before the call's retries are spent, and the other
    process's calls fail at once with the same line, without a request.

    Checked by attempts, not by a clock: the first call's time also holds the SDK process's
    start and its first client (importing openai), which beside four busy loops took the call
    to 4.7 s where 3 s was allowed, though the bound itself held."""
    url = refusing_url()
    options = dict(max_retries=6, backoff_initial_s=0.1, backoff_max_s=0.5, unreachable_after_s=1.0)
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
    started = time.monotonic()
    first, _ = call(RemoteBackend(local_backend([url], **options), link(sdk)), request)
    given_up_after = time.monotonic() - started
    other = RemoteBackend(local_backend([url], **options), link(sdk))
    second, _ = call(other, request)
    third, _ = call(other, request)  # known in this process now: no round trip at all
    assert isinstance(first, EndpointUnreachable) and first.kind == "connection_refused", first
    assert url in first.message and "timed out" not in first.message.lower()
    assert given_up_after >= 1.0, given_up_after  # never before the bound
    # Given up by the bound, not by the retries: 7 attempts would need 2.2 s of backoff alone.
    assert 1 <= first.attempts < options["max_retries"] + 1, first.attempts
    for later in (second, third):
        assert isinstance(later, EndpointUnreachable), later
        assert (later.kind, later.message, later.attempts) == (first.kind, first.message, 0)


def test_a_cancelled_call_is_cancelled_in_the_sdk_process_too(sdk: SdkProcess) -> None:
    with FakeOpenAIServer(delayed(0.5, reply("slow"), only_first=1)) as server:
        model = RemoteBackend(local_backend([server.base_url]), link(sdk))
        request = ChatRequest(messages=[{"role": "user", "content": "hi"}])

        async def go() -> Any:
            try:
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(model.complete(request, CallContext(case_id="c")), 0.1)
                return await model.complete(request, CallContext(case_id="c", turn=2))
            finally:
                await model.aclose()

        assert asyncio.run(go()).content == "slow"


def test_a_dead_sdk_process_is_an_infrastructure_error_not_a_hang() -> None:
    process = SdkProcess()
    try:
        with FakeOpenAIServer(delayed(30, reply("never"))) as server:
            model = RemoteBackend(local_backend([server.base_url]), link(process))
            request = ChatRequest(messages=[{"role": "user", "content": "hi"}])

            killed_at: list[float] = []

            async def go() -> Any:
                task = asyncio.ensure_future(model.complete(request, CallContext(case_id="c")))
                while not server.requests:
                    await asyncio.sleep(0.02)
                os.kill(process.proc.pid, signal.SIGKILL)
                killed_at.append(time.monotonic())
                try:
                    return await asyncio.wait_for(task, 10)
                except ModelCallError as exc:
                    return exc
                finally:
                    await model.aclose()

            error = asyncio.run(go())
            # From the kill: the SDK process's own start before its first request (openai's
            # import) took 10.7-11.8 s beside six busy loops on 2 cores, and is not what is bounded.
            assert time.monotonic() - killed_at[0] < 10
        assert isinstance(error, ModelCallError) and error.kind == "sdk_process_gone"
    finally:
        process.stop()


def test_the_sdk_process_builds_the_backend_from_the_same_spec() -> None:
    """The hello carries the BackendSpec whole (its key too, which no other dump shows); the SDK
    process validates it back into the same model, scales the request limit by the processes
    sharing it and keeps one backend per spec."""
    import json

    local = local_backend(["http://127.0.0.1:9/v1"], concurrency=3)
    sent = json.loads(json.dumps(Hello(backend=local.spec, processes=4).to_wire()))
    assert sent["backend"]["api_key"] == "sk-secret"
    assert "sk-secret" not in json.dumps(local.spec.model_dump(mode="json")) + repr(local.spec)
    server = SdkServer()
    built = server.backend_for(Hello.model_validate(sent))
    assert built.spec == local.spec.model_copy(update={"concurrency": 12})
    assert built.spec.key() == "sk-secret" and built.concurrency == 12
    assert server.backend_for(Hello.model_validate(sent)) is built
    other = json.loads(json.dumps(Hello(backend=local.spec, processes=4, server_pid=1).to_wire()))
    assert server.backend_for(Hello.model_validate(other)) is not built  # another server watched


def test_an_sdk_process_that_cannot_start_says_why(tmp_path: Path) -> None:
    process = SdkProcess()
    process.proc.kill()
    process.proc.wait()
    try:
        model = RemoteBackend(local_backend(["http://127.0.0.1:9/v1"]), link(process))
        result, _ = call(model, ChatRequest(messages=[{"role": "user", "content": "hi"}]))
        assert isinstance(result, ModelCallError) and result.kind == "sdk_process_gone"
        assert "did not start" in result.message
    finally:
        process.stop()


def _wait_for_socket(socket_path: str | Path) -> None:
    """Wait until an SDK process's socket exists: a wait for its start-up, not a bound on it (its
    imports took 11 s beside six busy loops)."""
    deadline = time.monotonic() + 120
    while not Path(socket_path).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_it_exits_when_its_parent_goes_and_cleans_up(tmp_path: Path) -> None:
    """A parent killed outright (no cleanup) must not leave the process behind."""
    code = ("import sys, time; from pytest_toolbench.models.sdk_process.client import SdkProcess; "
            "p = SdkProcess(); print(p.proc.pid, p.socket_path, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    pid_text, socket_path = parent.stdout.readline().split()  # type: ignore[union-attr]
    _wait_for_socket(socket_path)  # the bound under test is the 10 s after the kill, below
    assert Path(socket_path).exists()
    parent.kill()
    parent.wait()
    pid = int(pid_text)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the SDK process outlived its parent")
    assert not Path(socket_path).parent.exists()  # socket, log and folder


def test_stop_ends_the_process_and_removes_its_files() -> None:
    process = SdkProcess()
    _wait_for_socket(process.socket_path)
    process.stop()
    assert process.proc.returncode == 0
    assert not process.folder.exists()
    process.stop()  # twice is harmless (configure, cleanup and unconfigure may all stop it)


def _wait_dead(pid: int, timeout_s: float = 30) -> None:
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.02)
    pytest.fail(f"process {pid} outlived SIGKILL by {timeout_s} s")


def test_a_folder_left_by_a_killed_run_is_swept_by_the_next_one(tmp_path: Path, monkeypatch) -> None:
    """A run SIGKILLed with its SDK process (its group killed: the OOM killer, a CI timeout)
    leaves the folder, socket and log; the next run's SDK process removes it, never a live one's
    (the SDK process holds the lock too, so a live process whose parent died keeps its folder)."""
    base = Path(tempfile.mkdtemp(prefix="tb-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    try:
        code = ("import os, signal, time; from pathlib import Path\n"
                "from pytest_toolbench.models.sdk_process.launcher import SdkProcess\n"
                "p = SdkProcess(import_sdk_at_start=False)\n"
                "while not Path(p.socket_path).exists(): time.sleep(0.02)\n"
                "print(p.folder, p.proc.pid, flush=True); os.killpg(0, signal.SIGKILL)\n")
        killed = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                                timeout=60, env={**os.environ, "TMPDIR": str(base)}, start_new_session=True)
        assert killed.returncode == -signal.SIGKILL
        folder, pid = killed.stdout.split()
        left = Path(folder)
        _wait_dead(int(pid))  # SIGKILLed with the group, but its teardown may still be under way
        assert left.parent == base and sorted(p.name for p in left.iterdir()) == [".owner.lock", "sdk.log", "sdk.sock"]
        live = SdkProcess(import_sdk_at_start=False)
        try:
            assert not left.exists()
            assert [p.name for p in base.iterdir()] == [live.folder.name]
            later = SdkProcess(import_sdk_at_start=False)  # sweeps again: the live one stays
            assert live.folder.exists()
            later.stop()
        finally:
            live.stop()
        assert list(base.iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ----------------------------------------------------------------------------- protocol
@pytest.mark.parametrize("error", [
    ModelCallError("http_500", "m"), LostTurn("http_429", "lost"), ContextLengthExceeded("too long"),
    EndpointUnreachable("connection_refused", "endpoint u unreachable: x", attempts=3, hint="c | try: o")])
def test_errors_keep_their_class_kind_and_message(error: ModelCallError) -> None:
    back = decode_error(encode_error(error))
    assert (type(back), back.kind, back.message) == (type(error), error.kind, error.message)
    assert (back.attempts, back.hint) == (error.attempts, error.hint)


def test_a_harness_bug_in_the_sdk_process_is_an_error_of_its_own_kind() -> None:
    back = decode_error(encode_error(KeyError("x")))
    assert type(back) is ModelCallError and back.kind == "sdk_process_error"


def test_call_logs_merge_into_the_cases_own() -> None:
    log = CaseCallLog(endpoints={"u": {"requests": 1, "errors": 0}})
    log.add_wire_events({"retries": [{"turn": 1, "kind": "http_429", "wait_s": 0.1}],
                         "endpoints": {"u": {"requests": 2, "errors": 1}, "v": {"requests": 1, "errors": 0}}})
    log.add_wire_events(None)
    assert log.retries == [{"turn": 1, "kind": "http_429", "wait_s": 0.1}]
    assert log.endpoints == {"u": {"requests": 3, "errors": 1}, "v": {"requests": 1, "errors": 0}}
    copy = CaseCallLog()
    copy.add_wire_events(log.wire_events())  # what the SDK process sends is the whole log
    assert copy.details() == log.details()


class _Transport:
    """Records what a FrameLink writes (each write call apart) and whether it was closed."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def framed_link() -> tuple[FrameLink, _Transport, list[dict[str, Any]], list[Any]]:
    received: list[dict[str, Any]] = []
    lost: list[Any] = []
    link = FrameLink(received.append, lost.append)
    transport = _Transport()
    link.connection_made(transport)  # type: ignore[arg-type]
    return link, transport, received, lost


def test_frames_are_read_whole_however_the_bytes_arrive() -> None:
    """Several frames in one chunk, a frame split over chunks (its header too), non-ASCII text:
    each message is handed on once, whole, in order."""
    link, _, received, lost = framed_link()
    messages = [{"id": i, "text": "é" * i, "nested": {"n": [i, None, True]}} for i in range(5)]
    data = b"".join(frame(m) for m in messages)
    link.data_received(data[:3])  # not even a header yet
    assert received == []
    cut = len(frame(messages[0])) + 2  # the second frame's header split in two
    link.data_received(data[3:cut])
    assert received == messages[:1]
    link.data_received(data[cut:-1])
    assert received == messages[:4]
    link.data_received(data[-1:])
    assert received == messages and lost == []


@pytest.mark.parametrize("bad", [
    struct.pack(">I", 256 * 1024 * 1024 + 1),  # a frame over MAX_FRAME: a broken peer
    struct.pack(">I", 3) + b"{x}",  # not JSON
    struct.pack(">I", 2) + b"\xff\xfe",  # not UTF-8 JSON
])
def test_a_broken_frame_ends_the_connection_with_why_and_nothing_after_it_is_read(bad: bytes) -> None:
    link, transport, received, lost = framed_link()
    link.data_received(frame({"id": 1}) + bad + frame({"id": 2}))
    assert received == [{"id": 1}]
    assert transport.closed and len(lost) == 1 and isinstance(lost[0], ValueError)
    link.connection_lost(None)  # the transport's own report follows: told once only
    assert len(lost) == 1


def test_frames_sent_in_one_turn_of_the_loop_leave_in_one_write() -> None:
    """A burst of replies (or requests) is one write, not one per message; what is sent after
    the connection ended is dropped (nobody reads it), and close() writes what was queued."""

    async def go() -> tuple[_Transport, _Transport, list[Any]]:
        link, transport, _, lost = framed_link()
        for i in range(3):
            link.send({"id": i})
        assert transport.writes == []  # queued until this turn of the loop is over
        await asyncio.sleep(0)
        link.send({"id": 3})
        await asyncio.sleep(0)
        other, other_transport, _, _ = framed_link()
        other.send({"id": 4})
        other.close()  # queued, then closed: written before the close
        link.connection_lost(ConnectionResetError())
        link.send({"id": 5})
        await asyncio.sleep(0)
        return transport, other_transport, lost

    transport, other_transport, lost = asyncio.run(go())
    assert transport.writes == [frame({"id": 0}) + frame({"id": 1}) + frame({"id": 2}), frame({"id": 3})]
    assert other_transport.writes == [frame({"id": 4})] and other_transport.closed
    assert len(lost) == 1 and isinstance(lost[0], ConnectionResetError)


def test_a_burst_of_frames_leaves_in_batches_before_the_turn_ends() -> None:
    """A run's first turn queues a request per case it starts: FLUSH_AT_FRAMES of them leave at
    once, so the SDK process starts on them while the rest are built; the remainder leaves at
    the turn's end."""

    async def go() -> _Transport:
        link, transport, _, _ = framed_link()
        for i in range(FLUSH_AT_FRAMES * 2 + 3):
            link.send({"id": i})
        assert transport.writes == [b"".join(frame({"id": i}) for i in range(FLUSH_AT_FRAMES)),
                                    b"".join(frame({"id": i}) for i in range(FLUSH_AT_FRAMES, 2 * FLUSH_AT_FRAMES))]
        await asyncio.sleep(0)
        return transport

    transport = asyncio.run(go())
    assert len(transport.writes) == 3  # no empty write from the cancelled end-of-turn flush
    assert transport.writes[2] == b"".join(frame({"id": i}) for i in range(2 * FLUSH_AT_FRAMES, 2 * FLUSH_AT_FRAMES + 3))


class _StartOrder:
    """An SdkServer stand-in whose ``complete`` records which calls started, turn by turn."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.release = asyncio.Event()

    async def complete(self, backend: Any, message: dict[str, Any], link: FrameLink) -> None:
        self.started.append(message["id"])
        await self.release.wait()
        link.send({"id": message["id"], "response": "ok"})


def test_the_sdk_process_starts_a_burst_of_calls_a_few_a_turn_in_order() -> None:
    """A burst of calls is started STARTS_PER_TURN a turn of the loop, in the order they came:
    the first ones' connections and requests go on between the later ones' building."""

    async def go() -> tuple[list[list[int]], list[int]]:
        server = _StartOrder()
        conn = _Connection(server)  # type: ignore[arg-type]
        conn.link.connection_made(_Transport())  # type: ignore[arg-type]
        conn.backend = object()  # type: ignore[assignment]  # the hello is done
        calls = STARTS_PER_TURN * 2 + 1
        for i in range(calls):
            conn.on_message({"op": "complete", "id": i})
        conn.on_message({"op": "cancel", "id": calls - 1})  # cancelled before it started
        turns = []
        for _ in range(4):
            await asyncio.sleep(0)
            turns.append(list(server.started))
        server.release.set()
        for _ in range(3):
            await asyncio.sleep(0)
        return turns, sorted(conn.tasks)

    turns, still_running = asyncio.run(go())
    assert turns[0] == []  # the starter runs in the next turn, then a task's first step the one after
    assert turns[1] == list(range(STARTS_PER_TURN))
    assert turns[2] == list(range(2 * STARTS_PER_TURN))
    assert turns[3] == turns[2]  # the cancelled call never started
    assert still_running == []


def test_calls_not_started_when_the_connection_ends_are_dropped() -> None:
    async def go() -> tuple[list[int], dict[int, Any]]:
        server = _StartOrder()
        conn = _Connection(server)  # type: ignore[arg-type]
        conn.link.connection_made(_Transport())  # type: ignore[arg-type]
        conn.backend = object()  # type: ignore[assignment]
        for i in range(STARTS_PER_TURN * 3):
            conn.on_message({"op": "complete", "id": i})
        await asyncio.sleep(0)  # the starter makes the first few tasks
        await asyncio.sleep(0)  # they start
        conn.link.connection_lost(ConnectionResetError())
        for _ in range(5):
            await asyncio.sleep(0)
        return server.started, conn.waiting

    started, waiting = asyncio.run(go())
    assert started == list(range(STARTS_PER_TURN)) and waiting == {}


# ----------------------------------------------------------------------------- when it starts


@pytest.mark.parametrize("extra,ini,started", [
    ([], "", True),  # started at the plugin's import, kept by the decision at configure
    (["--collect-only"], "", False),
    (["--sdk-process", "inline"], "", False),
    ([], "toolbench_sdk_process = inline\n", False),  # started at import, stopped at configure
    ([], "addopts = --collect-only\n", False),  # likewise: the import-time guess sees argv only
    (["--model", "oracle"], "", False),
    (["--cache-only"], "", False),
])
def test_the_sdk_process_starts_early_only_for_runs_that_may_send_requests(
        tmp_path: Path, extra: list[str], ini: str, started: bool) -> None:
    """One SDK process at most, decided at configure: a process the plugin's import started on a
    guess is the run's, or stopped (its folder gone) by the time pytest has configured."""
    import json

    write_probe(tmp_path, "early_probe", "pytest_configure", "trylast")
    inifile = tmp_path / "pytest.ini"
    inifile.write_text("[pytest]\n" + ini)
    out = tmp_path / "out.json"
    env, short_tmp = probe_env(tmp_path, out, dict(os.environ))
    try:
        subprocess.run([sys.executable, "-m", "pytest", str(REPO / "suites" / "toolhop"), "-c", str(inifile),
                        "--rootdir", str(REPO), "-p", "early_probe", "-q", "-p", "no:cacheprovider",
                        "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--api-key", "k",
                        "--model", "m", "-k", "matches_no_case", *extra],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        probe = json.loads(out.read_text())
        assert (probe["sdk"], probe["sdk_folders"]) == (started, int(started))
        assert not list(short_tmp.glob("toolbench-sdk-*"))  # and it is gone after the run
    finally:
        shutil.rmtree(short_tmp, ignore_errors=True)


@pytest.mark.parametrize("args,wants", [
    (["suites/toolhop", "-n", "8", "--model", "gpt-4o"], True),
    (["suites/toolhop::test_case", "--model=gpt-4o"], True),
    (["tests"], False),  # no suite named
    ([], False),  # the ini's testpaths: configure decides
    (["suites/toolhop", "--co"], False),
    (["suites/toolhop", "--collect-only"], False),
    (["suites/toolhop", "--fixtures-per-test"], False),
    (["suites/toolhop", "--setup-plan"], False),  # its fixtures are stand-ins: no case runs
    (["suites/toolhop", "--cache-show=lastfailed"], False),
    (["suites/toolhop", "--setup-only"], True),  # a case runs in its fixture's setup
    (["suites/toolhop", "--help"], False),
    (["suites/toolhop", "--cache-only"], False),
    (["suites/toolhop", "--model", "oracle"], False),
    (["suites/toolhop", "--model=replay:run.jsonl"], False),
    (["suites/toolhop", "--sdk-process", "inline"], False),
    (["suites/toolhop", "--sdk-process=shared"], True),
    (["suites/toolhop", "--model", "oracle", "--model", "gpt-4o"], True),  # the last one wins
    (["suites/toolhop", "--model=gpt-4o", "--model=oracle"], False),
])
def test_the_import_time_guess_reads_the_raw_command_line(args: list[str], wants: bool) -> None:
    from pytest_toolbench.models.sdk_process.launcher import command_line_wants_sdk

    old = os.getcwd()
    os.chdir(REPO)  # the suites' paths are relative to the repository
    try:
        assert command_line_wants_sdk(args) is wants
    finally:
        os.chdir(old)


@pytest.mark.parametrize("argv,is_pytest", [
    (["/venv/bin/pytest", "suites"], True),
    (["/venv/lib/python3.11/site-packages/pytest/__main__.py", "suites"], True),  # python -m pytest
    (["-c"], False),  # an xdist worker (execnet runs python -c)
    (["/venv/bin/toolbench", "runs"], False),
    ([], False),
])
def test_only_a_pytest_command_starts_the_sdk_process_at_import(argv: list[str], is_pytest: bool) -> None:
    from pytest_toolbench.models.sdk_process.launcher import is_pytest_command

    assert is_pytest_command(argv) is is_pytest


def test_only_the_variables_the_sdk_reads_travel_in_the_hello() -> None:
    """Not the whole environment: xdist workers differ in theirs (``PYTEST_XDIST_WORKER``...), and
    one backend per model must serve them all (its endpoint pool routes the whole run)."""
    from pytest_toolbench.models.sdk_process.protocol import sdk_environment

    environ = {"OPENAI_ORG_ID": "o", "OPENAI_PROJECT_ID": "p", "https_proxy": "http://proxy:3128",
               "NO_PROXY": "localhost", "SSL_CERT_FILE": "/ca.pem", "REQUESTS_CA_BUNDLE": "/ca.pem",
               "PATH": "/bin", "PYTEST_XDIST_WORKER": "gw0", "PYTEST_CURRENT_TEST": "t", "HOME": "/root",
               "MY_OPENAI_KEY": "not the SDK's"}
    assert sdk_environment(environ) == {
        "OPENAI_ORG_ID": "o", "OPENAI_PROJECT_ID": "p", "https_proxy": "http://proxy:3128",
        "NO_PROXY": "localhost", "SSL_CERT_FILE": "/ca.pem", "REQUESTS_CA_BUNDLE": "/ca.pem"}


def test_an_sdk_process_that_imports_the_sdk_on_first_call_answers_and_fails_alike() -> None:
    """A re-run whose cache holds replies starts the SDK process without the SDK's import
    (launcher.SdkProcess): its first request imports it, and a reply, a 401 and a port nothing
    listens on come back as from the process that imported it at start."""
    dead = refusing_url()
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
    options = dict(max_retries=6, backoff_initial_s=0.1, backoff_max_s=0.5, unreachable_after_s=1.0)
    seen: dict[bool, list[dict[str, Any]]] = {}
    for at_start in (True, False):
        process = SdkProcess(import_sdk_at_start=at_start)
        try:
            seen[at_start] = []
            for handler in (lambda: reply("fine"), lambda: fail_then(99, reply("never"), status=401)):
                with FakeOpenAIServer(handler()) as server:
                    model = RemoteBackend(local_backend([server.base_url]), link(process))
                    seen[at_start].append(outcome(*call(model, request), server.base_url))
            refused, _ = call(RemoteBackend(local_backend([dead], **options), link(process)), request)
            assert isinstance(refused, EndpointUnreachable) and refused.kind == "connection_refused"
            # How many attempts fit in the give-up window is timing, not behaviour.
            seen[at_start].append({"class": type(refused).__name__, "kind": refused.kind,
                                   "message": refused.message.split(" attempts")[0].rsplit("(", 1)[0]})
        finally:
            process.stop()
    assert seen[True] == seen[False]
    assert "fine" in repr(seen[False][0]["result"]), seen[False][0]
    assert seen[False][1]["result"]["class"] != "SdkProcessGone", seen[False][1]


def test_the_sdk_import_waits_for_the_first_call_only_where_the_cache_holds_replies(
        tmp_path: Path) -> None:
    from pytest_toolbench.models.sdk_process.launcher import cache_holds_replies, command_line_cache_empty

    cache = tmp_path / "cache"
    assert not cache_holds_replies(cache)  # missing
    cache.mkdir()
    assert not cache_holds_replies(cache)  # empty
    assert command_line_cache_empty(["suites/toolhop", "--cache-dir", str(cache)])
    (cache / "ab").mkdir()
    assert cache_holds_replies(cache)
    assert not command_line_cache_empty(["suites/toolhop", "--cache-dir", str(cache)])
    assert not command_line_cache_empty(["suites/toolhop", f"--cache-dir={cache}"])
    assert command_line_cache_empty(["suites/toolhop", "--cache-dir", str(cache), "--no-cache"])
    assert command_line_cache_empty(["suites/toolhop", "--cache-dir", str(tmp_path / "other")])


def test_the_cache_guess_from_a_subfolder_finds_the_project_s_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run from ``suites/x`` uses the project's ``.toolbench/cache`` (options.py
    ``project_root``); the guess looked for one in the subfolder, found none, and took every
    such run for a cold one."""
    from pytest_toolbench.models.sdk_process.launcher import command_line_cache_empty

    (tmp_path / ".toolbench" / "cache" / "ab").mkdir(parents=True)
    sub = tmp_path / "suites" / "x"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert not command_line_cache_empty(["."])
    assert command_line_cache_empty([".", "--cache-dir", "c"])


# ----------------------------------------------------------------------------- the first request


def _read_frame(conn: socket.socket) -> dict[str, Any]:
    import json

    header = b""
    while len(header) < 4:
        header += conn.recv(4 - len(header))
    (size,) = struct.unpack(">I", header)
    body = b""
    while len(body) < size:
        body += conn.recv(size - len(body))
    return json.loads(body)


def _listening(path: str) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    server.settimeout(5)
    return server


def _remote_at(path: str, tmp_path: Path) -> RemoteBackend:
    address = SdkAddress(socket=path, pid=os.getpid(), log=str(tmp_path / "sdk.log"))
    return RemoteBackend(local_backend(["http://127.0.0.1:9/v1"]), SdkLink(address=address))


def test_connect_soon_says_hello_before_the_loop_runs_and_the_first_call_uses_that_connection(
        tmp_path: Path) -> None:
    """The hello is written by connect_soon itself, before the loop has run once (a task would
    run only after the cases' first steps); the first call then goes over that connection."""
    path = str(tmp_path / "s.sock")
    with _listening(path) as server:
        model = _remote_at(path, tmp_path)
        loop = asyncio.new_event_loop()
        try:
            model.connect_soon(loop)
            conn, _ = server.accept()  # connected already: the loop has not run
            with conn:
                conn.settimeout(5)
                hello = _read_frame(conn)
                assert hello["op"] == "hello" and hello["backend"]["model"] == "test-model"
                conn.sendall(frame({"op": "ready"}))
                request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
                call_task = loop.create_task(model.complete(request, CallContext(case_id="c")))

                def answer() -> None:
                    message = _read_frame(conn)
                    assert message["op"] == "complete"
                    response = ChatResponse(message={"role": "assistant", "content": "over it"})
                    conn.sendall(frame({"id": message["id"], "response": response.model_dump(mode="json"),
                                        "log": None}))

                loop.run_until_complete(asyncio.sleep(0.05))
                with pytest.raises(OSError):
                    server.settimeout(0.01)
                    server.accept()  # no second connection was made
                answer()
                result = loop.run_until_complete(asyncio.wait_for(call_task, 5))
                loop.run_until_complete(model.aclose())
        finally:
            loop.close()
    assert result.content == "over it"


def test_the_case_runtime_connects_its_model_to_the_sdk_process_when_it_is_built(tmp_path: Path) -> None:
    """Through the layers a run puts around the model (the cache, the reply log)."""
    from pytest_toolbench.config import RunSettings
    from pytest_toolbench.models.cache import CachedModel
    from pytest_toolbench.runtime.case_runtime import CaseRuntime

    path = str(tmp_path / "s.sock")
    with _listening(path) as server:
        model = CachedModel(_remote_at(path, tmp_path), tmp_path / "cache")
        runtime = CaseRuntime(RunSettings(concurrency=4), model)
        conn, _ = server.accept()  # raises (timeout) if nothing connected
        with conn:
            conn.settimeout(5)
            assert _read_frame(conn)["op"] == "hello"
            runtime.close()


def test_a_managed_server_not_started_yet_is_not_connected_early(tmp_path: Path) -> None:
    """Its template's URL is not known before the server has started: the first call connects
    (through the backend the server's answer builds), as before."""
    from pytest_toolbench.config import RunSettings
    from pytest_toolbench.models.lazy_server import LazyServerModel
    from pytest_toolbench.runtime.case_runtime import CaseRuntime

    path = str(tmp_path / "s.sock")
    with _listening(path) as server:
        lazy = LazyServerModel(_remote_at(path, tmp_path), lambda answer: _remote_at(path, tmp_path),
                               tmp_path / "rv", 1.0)
        runtime = CaseRuntime(RunSettings(concurrency=4), lazy)
        server.settimeout(0.2)
        with pytest.raises(OSError):
            server.accept()
        runtime.close()


def test_connect_soon_before_the_sdk_process_listens_leaves_the_connection_to_the_first_call(
        tmp_path: Path) -> None:
    model = _remote_at(str(tmp_path / "nobody.sock"), tmp_path)
    loop = asyncio.new_event_loop()
    try:
        model.connect_soon(loop)
        assert model._connecting is None and model._loop is None
    finally:
        loop.close()


def test_a_run_that_never_calls_closes_an_early_connection_quietly(tmp_path: Path) -> None:
    """A cached re-run connects early and never calls: closing the loop (as the scheduler does,
    cancelling what is pending) closes the connection, logs nothing and leaks no socket."""
    import gc
    import warnings

    path = str(tmp_path / "s.sock")
    logged: list[Any] = []
    with _listening(path) as server:
        for answered in (False, True):  # cancelled before it ran, and while awaiting the greeting
            model = _remote_at(path, tmp_path)
            loop = asyncio.new_event_loop()
            loop.set_exception_handler(lambda _loop, context: logged.append(context))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model.connect_soon(loop)
                conn, _ = server.accept()
                if answered:
                    loop.run_until_complete(asyncio.sleep(0.02))  # the task runs, awaits "ready"
                pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for task in pending:
                    task.cancel()
                loop.run_until_complete(asyncio.wait(pending))
                loop.run_until_complete(model.aclose())
                loop.close()
                del model, pending
                gc.collect()
            with conn:
                conn.settimeout(5)
                _read_frame(conn)  # the hello
                assert conn.recv(1) == b""  # then the end of stream: the socket was closed
            assert not [w for w in caught if issubclass(w.category, ResourceWarning)], caught
    assert logged == []


def test_the_sdk_process_builds_the_client_at_the_hello_before_any_call() -> None:
    import openai  # noqa: F401  (as in the SDK process, which imported it at start)

    async def go() -> Any:
        conn = _Connection(SdkServer())
        conn.link.connection_made(_Transport())  # type: ignore[arg-type]
        hello = Hello(backend=local_backend(["http://127.0.0.1:9/v1"]).spec)
        conn.on_message(hello.to_wire())
        assert conn.backend is not None and conn.backend._client is None
        await asyncio.sleep(0)
        built = conn.backend._client
        await conn.backend.aclose()
        return built

    assert asyncio.run(go()) is not None


@pytest.mark.pinned_versions  # the control: openai 2.0.0's client imports nothing more when built
def test_the_sdk_process_imports_what_a_client_needs_before_its_first_hello() -> None:
    """After warm_client_imports, building the SDK's client imports nothing more (without it,
    it does: the control). Fails when an SDK version moves what its client imports."""
    code = ("import sys, openai, aiohttp\n"
            "from pytest_toolbench.models.sdk_process.server import warm_client_imports\n"
            "if sys.argv[1] == 'warm':\n    warm_client_imports()\n"
            "before = set(sys.modules)\n"
            "openai.AsyncOpenAI(api_key='k', base_url='http://127.0.0.1:9/v1', "
            "http_client=openai.DefaultAioHttpClient())\n"
            "print(len(set(sys.modules) - before))\n")
    counts = {mode: int(subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True,
                                       check=True, cwd=REPO).stdout.strip()) for mode in ("warm", "cold")}
    assert counts["warm"] == 0 and counts["cold"] > 0, counts


class _CountingClient:
    def __init__(self, url: str, built: list[str], closed: list[str]) -> None:
        self.url, self.closed = url, closed
        built.append(url)

    async def post(self, path: str, *, body: dict[str, Any], cast_to: Any) -> dict[str, Any]:
        return completion(self.url)

    async def close(self) -> None:
        self.closed.append(self.url)


def test_pool_clients_are_built_on_each_endpoints_first_request_and_closed_once(monkeypatch) -> None:
    urls = ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1", "http://127.0.0.1:3/v1"]
    model = local_backend(urls)
    built: list[str] = []
    closed: list[str] = []
    monkeypatch.setattr(model, "_new_client", lambda url: _CountingClient(url, built, closed))

    async def go() -> None:
        model.prepare()
        assert built == [urls[0]]  # the base URL's client, which is also its endpoint's
        request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
        await asyncio.gather(*(model.complete(request, CallContext(case_id=f"c{i}")) for i in range(6)))
        await model.aclose()

    asyncio.run(go())
    assert sorted(built) == urls and sorted(closed) == urls


def test_a_client_that_cannot_be_built_at_the_hello_fails_the_first_call_as_before(monkeypatch) -> None:
    model = local_backend(["http://127.0.0.1:9/v1"])
    attempts: list[str] = []

    def refuse(url: str) -> Any:
        attempts.append(url)
        raise RuntimeError("no client")

    monkeypatch.setattr(model, "_new_client", refuse)

    async def go() -> Any:
        model.prepare()  # swallowed: nothing is built
        request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
        try:
            return await model.complete(request, CallContext(case_id="c"))
        except Exception as exc:  # noqa: BLE001  (whatever the call raised before prepare existed)
            return exc

    error = asyncio.run(go())
    assert len(attempts) == 2 and isinstance(error, RuntimeError) and str(error) == "no client"
