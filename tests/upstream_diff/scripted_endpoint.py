"""An OpenAI-compatible chat endpoint on 127.0.0.1 that upstream's script and the harness both call.

Its reply is a function of the request's conversation and tools (``request_key``), so where the two
sides send the same requests they get the same replies and end the same; every request is logged
per side (the bearer token names it) before any scripted failure, and
:func:`request_differences` says which requests one side sent and the other did not, and where a
request first differs from its twin (the same turn of the same conversation).
"""

from __future__ import annotations

import collections
import difflib
import hashlib
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: (status, content type, body) of a scripted failure
Failure = tuple[int, str, bytes]


def request_key(body: dict[str, Any]) -> str:
    """What a reply depends on: the conversation and the tools, nothing else of the request."""
    text = json.dumps([body.get("messages"), body.get("tools")], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def completion(message: dict[str, Any], key: str, model: str) -> dict[str, Any]:
    """A ``chat.completion`` object around ``message``."""
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {"id": f"chatcmpl-{key[:16]}", "object": "chat.completion", "created": 1700000000, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


class ScriptedEndpoint:
    """``reply(body) -> chat.completion`` served over HTTP; ``fail(side, body)`` may answer with a
    :data:`Failure` first. Use as a context manager; ``base_url`` ends in ``/v1``."""

    def __init__(self, reply: Callable[[dict[str, Any]], dict[str, Any]],
                 fail: Callable[[str, dict[str, Any]], Failure | None] | None = None):
        self.reply, self.fail = reply, fail
        self.lock = threading.Lock()
        self.requests: dict[str, list[str]] = collections.defaultdict(list)  # side -> request JSONs
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                side = self.headers.get("Authorization", "").removeprefix("Bearer ")
                with endpoint.lock:
                    endpoint.requests[side].append(json.dumps(body, sort_keys=True, ensure_ascii=False))
                failure = endpoint.fail(side, body) if endpoint.fail else None
                status, kind, data = failure or (200, "application/json", json.dumps(endpoint.reply(body)).encode())
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedEndpoint:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def request_differences(label: str, theirs: list[str], ours: list[str]) -> list[str]:
    """Requests (logged JSON) upstream sent and the harness did not, or sent more often, and the
    other way round; each with where it first differs from the harness's request for the same
    turn of the same conversation, when there is one."""
    upstream, harness = collections.Counter(theirs), collections.Counter(ours)
    only_ours = list((harness - upstream).elements())
    found, unmatched = [], 0
    for body in (upstream - harness):
        if body in harness:  # the same request, sent more often (a retry)
            found.append(f"{label}: upstream sent a request {upstream[body]} times, the harness "
                         f"{harness[body]}: {body[-300:]}")
            continue
        unmatched += upstream[body] - harness[body]
        request = json.loads(body)
        twin = next((json.loads(b) for b in only_ours if same_conversation(request, json.loads(b))), None) \
            or closest(body, only_ours)
        where = "; the harness sent none for that conversation" if twin is None else \
            ": " + first_difference(request, twin, "request")
        found.append(f"{label}: a request upstream sent differs{where}")
    if len(only_ours) > unmatched:
        found.append(f"{label}: the harness sent {len(only_ours)} requests upstream did not")
    return found


def same_conversation(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two requests are the same turn of one conversation (first message, length)."""
    ma, mb = a.get("messages") or [], b.get("messages") or []
    return len(ma) == len(mb) and bool(ma) and ma[0] == mb[0]


def closest(body: str, others: list[str]) -> dict[str, Any] | None:
    """The request of ``others`` most like ``body`` (a prompt that differs in a few characters),
    if one is at least 90% alike."""
    scored = [(difflib.SequenceMatcher(None, body, other, autojunk=False).quick_ratio(), other) for other in others]
    best = max(scored, default=(0.0, ""))
    return json.loads(best[1]) if best[0] >= 0.9 else None


def first_difference(a: Any, b: Any, path: str) -> str:
    """Where two JSON values first differ, and how: ``path: upstream ... harness ...``."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in b:
                return f"{path}.{key} upstream {json.dumps(a[key])[:300]}, absent from the harness's"
            if key not in a:
                return f"{path}.{key} absent from upstream's, harness {json.dumps(b[key])[:300]}"
            if a[key] != b[key]:
                return first_difference(a[key], b[key], f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    if isinstance(a, str) and isinstance(b, str) and len(a) > 300:  # a long prompt: where it differs
        at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return f"{path} from character {at}: upstream {json.dumps(a[at - 40:at + 80])}, harness {json.dumps(b[at - 40:at + 80])}"
    return f"{path} upstream {json.dumps(a)[:300]}, harness {json.dumps(b)[:300]}"
