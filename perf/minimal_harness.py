"""The simplest pytest harness on the real openai SDK: a reference for perf/run.py's goal 2.

Goal 2 asks that efficiency fall by no more than 0.05 from 64 to 128 to 256 in flight. Whether
any pytest harness can do that on this machine is a measurement, not a guess: this writes a test
folder whose ``conftest.py`` is all the harness there is. At ``pytest_configure`` a loop thread
imports openai and builds the client (``AsyncOpenAI`` over ``DefaultAioHttpClient``,
``max_retries=0``, ``client.post(..., cast_to=object)``, as perf/sdk_floor.py and the harness's
SDK process send); at ``pytest_collection_finish`` (the earliest a harness that honours ``-k`` and
``-m`` knows its cases) it sends every case's request, ``in flight`` at a time; each parametrised
test waits for its own reply and checks it has a choice. No prompt building, parsing, scoring,
cache, journal, report or second process: what is left is pytest's own per-test work and the
SDK's per-call work sharing one process, which is what sets the pace when a burst of replies
lands at once. perf/run.py runs it against the same fake endpoint and data as the harness.
"""

from __future__ import annotations

from pathlib import Path

CONFTEST = '''
import asyncio
import concurrent.futures
import json
import os
import threading

import pytest

RECORDS = json.loads(open(os.environ["MINIMAL_DATA"], encoding="utf-8").read())
FUTURES = [concurrent.futures.Future() for _ in RECORDS]
_GO = threading.Event()


def _body(record):
    return {"model": "perf-model", "temperature": 0.0,
            "messages": [{"role": "user", "content": record["question"]}]}


async def _drive(in_flight):
    import openai

    client = openai.AsyncOpenAI(api_key="perf", base_url=os.environ["MINIMAL_URL"], max_retries=0,
                                timeout=60, http_client=openai.DefaultAioHttpClient(timeout=60))
    await asyncio.get_running_loop().run_in_executor(None, _GO.wait)
    semaphore = asyncio.Semaphore(in_flight)

    async def one(i):
        async with semaphore:
            try:
                FUTURES[i].set_result(await client.post("/chat/completions", body=_body(RECORDS[i]),
                                                        cast_to=object))
            except Exception as exc:  # the test reports it
                FUTURES[i].set_exception(exc)

    await asyncio.gather(*(one(i) for i in range(len(RECORDS))))
    await client.close()


def pytest_configure(config):
    in_flight = int(os.environ["MINIMAL_IN_FLIGHT"])
    threading.Thread(target=lambda: asyncio.run(_drive(in_flight)), daemon=True).start()


def pytest_collection_finish(session):
    _GO.set()
'''

TEST_FILE = '''
import pytest

from conftest import FUTURES


@pytest.mark.parametrize("i", range(len(FUTURES)))
def test_case(i):
    assert FUTURES[i].result(timeout=120)["choices"]
'''


def write_suite(folder: Path) -> Path:
    """The test folder (``conftest.py`` and one test file); run it with ``MINIMAL_DATA`` (a
    ToolHop JSON file), ``MINIMAL_URL`` and ``MINIMAL_IN_FLIGHT`` in the environment."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "conftest.py").write_text(CONFTEST.lstrip(), encoding="utf-8")
    (folder / "test_minimal.py").write_text(TEST_FILE.lstrip(), encoding="utf-8")
    return folder
