"""A real local HTTP server that speaks the OpenAI chat API, for tests of the HTTP path.

Usage::

    with FakeOpenAIServer(reply(content="hi")) as server:
        backend = OpenAIBackend("m", server.base_url, "key")
        ...
        assert server.requests[0]["model"] == "m"

A *handler* is ``handler(body: dict, index: int) -> (status, headers, json_body)``: ``body`` is the
parsed request, ``index`` the 0-based number of the chat request (arrival order). ``json_body`` may
be a ``str``/``bytes`` to send raw (malformed replies). Builders:

- :func:`completion` / :func:`tool_call`: a chat.completion JSON body;
- :func:`reply`: a handler that always answers with one completion;
- :func:`scripted`: a handler that plays steps in order (the last one repeats);
- :func:`fail_then`: fail N times (default: 429 with ``Retry-After``), then delegate;
- :func:`delayed`: sleep before delegating (simulates a slow model or a timeout).

``port`` (default: a free one) fixes the port, e.g. to start a server where one was refused;
``ssl_context`` serves HTTPS (``base_url`` then starts with ``https://``).

The server records ``requests`` (parsed bodies), ``arrivals`` (``time.monotonic()`` per request)
and ``max_in_flight`` (most chat requests handled at the same time).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from urllib.parse import urlsplit
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import ssl

HandlerResult = tuple[int, dict[str, str], Any]
Handler = Callable[[dict[str, Any], int], HandlerResult]


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None) -> dict:
    """One OpenAI tool call; ``arguments`` as a dict is JSON-encoded, a str is sent verbatim."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": call_id or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


def completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    model: str = "fake-model",
    finish_reason: str | None = None,
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
) -> dict[str, Any]:
    """A chat.completion body with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def error_body(status: int, message: str = "fake error") -> dict[str, Any]:
    return {"error": {"message": message, "type": "fake_error", "code": status}}


def reply(content: str | None = None, tool_calls: list[dict[str, Any]] | None = None,
          **kwargs: Any) -> Handler:
    """Handler answering every request with the same completion."""
    return lambda body, index: (200, {}, completion(content, tool_calls, **kwargs))


def scripted(*steps: HandlerResult | Handler) -> Handler:
    """Play ``steps`` in request order; each is a result tuple or a handler. The last repeats."""

    def handler(body: dict[str, Any], index: int) -> HandlerResult:
        step = steps[min(index, len(steps) - 1)]
        return step(body, index) if callable(step) else step

    return handler


def fail_then(
    times: int,
    then: Handler,
    *,
    status: int = 429,
    headers: dict[str, str] | None = None,
) -> Handler:
    """Fail the first ``times`` requests with ``status`` (429 + ``Retry-After: 0`` by default)."""
    fail_headers = {"Retry-After": "0"} if headers is None and status == 429 else (headers or {})

    def handler(body: dict[str, Any], index: int) -> HandlerResult:
        if index < times:
            return status, fail_headers, error_body(status)
        return then(body, index)

    return handler


def delayed(seconds: float, then: Handler, *, only_first: int | None = None) -> Handler:
    """Sleep ``seconds`` before answering (only for the first ``only_first`` requests if set)."""

    def handler(body: dict[str, Any], index: int) -> HandlerResult:
        if only_first is None or index < only_first:
            time.sleep(seconds)
        return then(body, index)

    return handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler still sleeping must not block shutdown
    request_queue_size = 256  # many parallel connects must not hit the listen backlog

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out close sockets mid-reply; that is expected here


class FakeOpenAIServer:
    """Context manager running the server on 127.0.0.1 (free port) in a background thread."""

    def __init__(self, handler: Handler, *, model_id: str = "fake-model", port: int = 0,
                 ssl_context: "ssl.SSLContext | None" = None):
        self.handler = handler
        self.port = port
        self.ssl_context = ssl_context
        self.model_id = model_id
        self.requests: list[dict[str, Any]] = []
        #: Each chat request's HTTP headers, names lower-cased (in arrival order, as ``requests``).
        self.headers: list[dict[str, str]] = []
        self.arrivals: list[float] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"{'https' if self.ssl_context else 'http'}://{host}:{port}/v1"

    def __enter__(self) -> "FakeOpenAIServer":
        self._httpd = _Server(("127.0.0.1", self.port), self._request_handler_class())
        if self.ssl_context is not None:
            self._httpd.socket = self.ssl_context.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # -- request handling ---------------------------------------------------------------------

    def _handle_chat(self, body: dict[str, Any]) -> HandlerResult:
        with self._lock:
            index = len(self.requests)
            self.requests.append(body)
            self.arrivals.append(time.monotonic())
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            return self.handler(body, index)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _request_handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, headers: dict[str, str], payload: Any) -> None:
                if isinstance(payload, bytes):
                    data = payload
                elif isinstance(payload, str):
                    data = payload.encode("utf-8")
                else:
                    data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {}, {"object": "list", "data": [
                        {"id": server.model_id, "object": "model", "owned_by": "fake"}]})
                else:
                    self._send(404, {}, error_body(404, f"no route {self.path}"))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                # (absolute-form, "http://host/v1/...", when it plays a proxy: HTTP_PROXY)
                path = urlsplit(self.path).path if "://" in self.path else self.path
                if path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {}, error_body(404, f"no route {self.path}"))
                    return
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    self._send(400, {}, error_body(400, "request body is not JSON"))
                    return
                with server._lock:
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                status, headers, payload = server._handle_chat(body)
                self._send(status, headers, payload)

        return RequestHandler
