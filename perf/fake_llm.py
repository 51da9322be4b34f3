"""A fixed-latency OpenAI-compatible chat server that plays ToolHop gold, for perf/run.py.

Raw HTTP/1.1 on stdlib ``asyncio`` streams (keep-alive, Content-Length bodies), so one process
holds hundreds of requests in flight for the price of a sleeping coroutine each; it can listen on
several ports at once (several "endpoints" of one model). Every chat request is answered after
``--latency`` seconds, gold-like:

* a request without tools (ToolHop Direct) gets ``<answer>{gold}</answer>``;
* a request with tools calls the record's tools one per turn, in ``sub_task`` order (the chain of
  the gold sub-questions; arguments: each required parameter gets the previous hop's gold answer,
  the first hop a word of the question), then answers with the gold, so a tool-using case takes
  its real number of turns (hops + 1), as ``--model oracle`` and the upstream gold chain would.

The record is found by its question inside the user message. ``GET /stats`` returns the
counters (requests per port, peak in flight, first/last arrival, and when each request arrived and
each reply left, for perf/run.py's turnaround); ``POST /reset`` clears them.

Run: python perf/fake_llm.py --data FILE.json [--latency 0.5] [--endpoints N]  (prints the ports)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any


class GoldPolicy:
    def __init__(self, records: list[dict[str, Any]]):
        self.by_question: dict[str, dict[str, Any]] = {}
        for r in records:
            self.by_question.setdefault(r["question"], r)

    def find(self, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
        for m in messages:
            if m.get("role") == "user" and isinstance(m.get("content"), str):
                text = m["content"]
                for q, r in self.by_question.items():
                    if q in text:
                        return r
        return None

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        record = self.find(messages)
        if record is None:
            return {"role": "assistant", "content": "<answer>unknown</answer>"}
        hops = list(record.get("sub_task", {}).items())
        done = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if body.get("tools") and done < len(hops):
            question, _ = hops[done]
            tool = record["tools"][question]
            prev = hops[done - 1][1] if done else record["question"].split()[-1].strip("?")
            required = tool.get("parameters", {}).get("required", [])
            args = {name: prev for name in required}
            return {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{done}", "type": "function",
                "function": {"name": tool["name"], "arguments": json.dumps(args)}}]}
        return {"role": "assistant", "content": f"<answer>{record['answer']}</answer>"}


class Stats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests: dict[int, int] = {}
        self.in_flight = 0
        self.peak = 0
        self.first: float | None = None
        self.last: float | None = None
        #: When each request arrived and each reply left (``time.time()``), in that order.
        self.arrivals: list[float] = []
        self.replies: list[float] = []

    def as_dict(self) -> dict[str, Any]:
        return {"requests": sum(self.requests.values()), "per_port": self.requests,
                "peak_in_flight": self.peak, "first": self.first, "last": self.last,
                "arrivals": self.arrivals, "replies": self.replies, "now": time.time()}


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           port: int, latency: float, policy: GoldPolicy, stats: Stats) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length", "0") or 0)
            raw = await reader.readexactly(length) if length else b""
            if path.endswith("/stats"):
                status, payload = 200, stats.as_dict()
            elif path.endswith("/reset"):
                stats.reset()
                status, payload = 200, {"ok": True}
            elif path.endswith("/chat/completions") and method == "POST":
                now = time.time()
                stats.first = stats.first or now
                stats.arrivals.append(now)
                stats.requests[port] = stats.requests.get(port, 0) + 1
                stats.in_flight += 1
                stats.peak = max(stats.peak, stats.in_flight)
                try:
                    body = json.loads(raw)
                    message = policy.reply(body)
                    await asyncio.sleep(latency)
                finally:
                    stats.in_flight -= 1
                stats.last = time.time()
                stats.replies.append(stats.last)
                status, payload = 200, {
                    "id": "chatcmpl-perf", "object": "chat.completion", "created": int(now),
                    "model": body.get("model", "perf-model"),
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }
            else:
                status, payload = 404, {"error": {"message": f"no route {path}"}}
            data = json.dumps(payload).encode()
            writer.write(
                f"HTTP/1.1 {status} {'OK' if status == 200 else 'Not Found'}\r\n"
                f"content-type: application/json\r\ncontent-length: {len(data)}\r\n"
                "connection: keep-alive\r\n\r\n".encode() + data
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main_async(ports: list[int], latency: float, policy: GoldPolicy) -> None:
    stats = Stats()
    servers = []
    for port in ports:
        servers.append(await asyncio.start_server(
            lambda r, w: serve_connection(r, w, w.get_extra_info("sockname")[1], latency, policy, stats),
            "127.0.0.1", port, backlog=4096, limit=2**24))
    print(",".join(str(s.sockets[0].getsockname()[1]) for s in servers), flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True, type=Path, help="ToolHop JSON file (the gold)")
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--endpoints", type=int, default=1)
    ns = parser.parse_args()
    policy = GoldPolicy(json.loads(ns.data.read_text(encoding="utf-8")))
    try:
        asyncio.run(main_async([0] * ns.endpoints, ns.latency, policy))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
