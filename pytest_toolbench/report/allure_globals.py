"""A run's global attachments as one Allure ``*-globals.json``, in order, under its model.

``allure.global_attach`` writes one ``<uuid>-globals.json`` per attachment, and Allure lists them
in the order it reads those random names: with two runs in a results folder their metric tables
and plots interleaved. One file per run keeps a run's attachments together and in the order they
were given; each names the run's model environment (allure_run.environments), which Allure 3's
reader takes from a global attachment (@allurereport/reader allure2 ``convertGlobalAttachment``),
so a model's view holds its own tables and plots.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from pathlib import Path


from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.results.safe_text import safe_json


class GlobalItem(DeferredModel):
    name: str
    body: bytes
    mime: str
    ext: str


def write_globals(alluredir: str | Path, items: Sequence[GlobalItem], *,
                  environment: str | None = None, now_ms: int | None = None) -> Path:
    """Write each item as an attachment file and one globals file listing them; its path."""
    d = Path(alluredir)
    d.mkdir(parents=True, exist_ok=True)
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    listed = []
    for item in items:
        source = f"{uuid.uuid4()}-attachment.{item.ext}"
        (d / source).write_bytes(item.body)
        entry = {"name": item.name, "source": source, "type": item.mime, "timestamp": now}
        if environment:
            entry["environment"] = environment
        listed.append(entry)
    path = d / f"{uuid.uuid4()}-globals.json"
    path.write_text(safe_json(json.dumps({"attachments": listed}, indent=2,
                                         ensure_ascii=False)), encoding="utf-8")
    return path
