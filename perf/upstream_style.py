"""The upstream evaluation approach, as a reference for perf/run.py: a thread pool, one request at
a time per thread, the synchronous openai client (as ToolHop's closed script, scaled out with
threads). ToolHop Direct only: one call per case, the harness's own prompt, results written to a
JSONL file one line per case as upstream appends its outputs. perf/run.py runs it with 64 and with
256 threads over the same data as the harness's run at that many requests in flight (issue 32:
never slower than it, at least 1.3x faster at 256, where its threads share one GIL). A call that
fails after the client's retries ends the script non-zero, so a dead run never reads as a fast one.

Run: python perf/upstream_style.py --data-dir D --base-url URL --threads 64 --out FILE
"""

from __future__ import annotations

import argparse
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

from pytest_toolbench.benchmarks.toolhop.prompts import build_messages


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--out", required=True, type=Path)
    ns = parser.parse_args()
    records = json.loads((ns.data_dir / "toolhop" / "ToolHop.json").read_text(encoding="utf-8"))
    client = openai.OpenAI(api_key="perf", base_url=ns.base_url, max_retries=3)
    lock = threading.Lock()

    with ns.out.open("w", encoding="utf-8") as out:
        def one(record: dict) -> None:
            reply = client.chat.completions.create(
                model="perf-model", messages=build_messages("direct", record["question"]),
                temperature=0.0,
            )
            line = json.dumps({"id": record["id"], "output": reply.choices[0].message.content})
            with lock:
                out.write(line + "\n")
                out.flush()

        with ThreadPoolExecutor(ns.threads) as pool:
            list(pool.map(one, records))


if __name__ == "__main__":
    main()
