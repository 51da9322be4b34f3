"""The ToolBeHonest record (HF ``Joelzhang/ToolBeHonest``) and a loader that accepts the real ``test_en.json`` unchanged.

Upstream reads seven keys and ignores the rest, so unknown keys are tolerated (kept on the model).
Every result upstream is positional (``results[subtask][level][k]``, upstream ``convert_hf_data``): records are
grouped by ``subtask`` in file order and ``k`` is the index within that group; the case ids carry
it, so a selection (``-m``, ``--limit``, ``-k``) still names and scores each case as the full run.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, ValidationError

from pytest_toolbench.counting import counted
from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.benchmarks.data_paths import check_data_file, listed_entries
from pytest_toolbench.benchmarks.data_source import file_sha256
from pytest_toolbench.benchmarks.dataset_errors import (
    DatasetError,
    DatasetWarning,
    data_text,
    describe_validation_error,
    json_value,
)
from pytest_toolbench.benchmarks.parsed_files import parsed_once

#: Upstream ``utils/calculate_metrics.py`` ``subtask_groups``: subtask -> paper scenario.
SUBTASK_SCENARIO: dict[str, str] = {
    "single_step": "MNT",
    "multi_step_wo_rep": "MNT",
    "multi_step_w_rep": "MNT",
    "os": "PT",
    "web": "PT",
    "iter": "LFT",
    "best": "LFT",
}
SUBTASKS: tuple[str, ...] = tuple(SUBTASK_SCENARIO)
SCENARIOS: tuple[str, ...] = ("MNT", "PT", "LFT")
REQUIRED_KEYS = (
    "subtask",
    "task",
    "tools",
    "unsolvable_task",
    "unsolvable_tools",
    "planning_tools",
    "planning_tools_unsolvable",
)
UNSOLVABLE = "UnsolvableQuery"
#: Upstream's default entry of ``provided_tool_dict`` before the parsed pairs (``_process_task_eval``).
UNSOLVABLE_DEFAULT_DESC = "Used to determine that the Query or Subgoal can not be completed"

#: Soft integrity pin for HF test_en.json (a third-party download script's hash, unverified): warn on a mismatch, never fail.
UPSTREAM_RECORD_COUNT = 350
UPSTREAM_EN_SHA256 = "51495dc14e5403ccc56d7430253cf41a1e5aa30ce7e35ae9b207fce667ea7a2a"

_TOOL_LINE = re.compile(r"\d+\.\s*([^\:：]+)[:：]\s*(.*)")


def parse_tool_string(tools: str) -> list[tuple[str, str]]:
    """(name, description) pairs exactly as upstream's regex finds them: names not stripped,
    duplicates and the Finish/UnsolvableQuery lines kept (``_process_task_eval``, ``get_tools_embeddings``)."""
    return [(name, desc) for name, desc in _TOOL_LINE.findall(tools)]


def remove_finish_if_last(tools: list[str]) -> list[str]:
    """Drop one trailing ``finish`` (case-insensitive), as upstream does to gold and prediction."""
    if tools and tools[-1].lower() == "finish":
        return tools[:-1]
    return tools


class ToolBHRecord(DeferredModel):
    """One upstream record (both variants). Frozen: records are shared by six cases each."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    subtask: str
    task: str
    tools: str
    unsolvable_task: str
    unsolvable_tools: str
    planning_tools: list[str]
    planning_tools_unsolvable: list[str]

    @property
    def scenario(self) -> str:
        return SUBTASK_SCENARIO[self.subtask]

    def provided_tools(self) -> dict[str, str]:
        """Upstream ``provided_tool_dict``: from ``tools`` (the solvable string) for BOTH
        variants, seeded with the UnsolvableQuery default that a parsed line overrides."""
        provided = {UNSOLVABLE: UNSOLVABLE_DEFAULT_DESC}
        provided.update(parse_tool_string(self.tools))
        return provided

    def gold(self, solvable: bool) -> list[str]:
        """The stripped gold plan of one variant (as upstream ``_process_task_eval`` strips it)."""
        return remove_finish_if_last(
            list(self.planning_tools if solvable else self.planning_tools_unsolvable)
        )

    def validation_warnings(self) -> list[str]:
        """Conditions under which upstream would crash or give NaN: reported once at load time
        (a DatasetWarning, never a file-level error: upstream loads such a file and only fails
        on the record), then each affected case is scored as upstream scores it, or is an
        ERROR case exactly where upstream raises (see ``scoring.ScoringError``)."""
        out: list[str] = []
        gold_u, gold_s, provided = self.gold(False), self.gold(True), self.provided_tools()
        for name, gold in (("planning_tools", gold_s), ("planning_tools_unsolvable", gold_u)):
            if not gold:
                out.append(f"{name} is empty after dropping the final Finish (upstream divides "
                           "by zero scoring its L2/L3 progress rate)")
        if UNSOLVABLE not in gold_u:
            out.append("planning_tools_unsolvable has no UnsolvableQuery (its L3 MS is nan, and "
                       "so are L3-MS and the Overall, as upstream; --toolbehonest-empty-ms skip "
                       "leaves it out)")
        for i, tool in enumerate(gold_u):
            if tool != UNSOLVABLE:
                continue
            if i >= len(gold_s):
                out.append(f"UnsolvableQuery at {i} has no solvable tool at that index")
            elif gold_s[i] not in provided:
                out.append(f"solvable tool {gold_s[i]!r} at {i} is not in 'tools' (upstream's L3 "
                           "MS crashes unless the nearest tool of the subtask is that one)")
        return out


def parse_record(raw: Any, path: Path, index: int) -> ToolBHRecord:
    """Validate one raw record; a problem raises a one-line :class:`DatasetError` (file + index)."""
    if not isinstance(raw, dict):
        raise DatasetError(path, f"record must be a JSON object, got {type(raw).__name__}", index=index)
    missing = [k for k in REQUIRED_KEYS if k not in raw]
    if missing:
        raise DatasetError(path, f"missing keys {missing}", index=index)
    if raw["subtask"] not in SUBTASK_SCENARIO:
        raise DatasetError(
            path, f"unknown subtask {raw['subtask']!r}; expected one of {list(SUBTASKS)}", index=index
        )
    try:
        record = ToolBHRecord.model_validate(raw)
    except ValidationError as exc:
        raise DatasetError(path, describe_validation_error(exc), index=index) from None
    return record


def _parse_toolbehonest_file(path: Path) -> list[ToolBHRecord]:
    """Load a ToolBeHonest JSON list (the real file or a sample in its schema), file order."""
    text = data_text(path, empty="the file is empty (no records)")
    raw = json_value(path, text)
    if not isinstance(raw, list):
        raise DatasetError(path, f"top level must be a JSON list of records, got {type(raw).__name__}")
    if not raw:
        raise DatasetError(path, "no records (an empty list)")
    records = [parse_record(item, path, i) for i, item in enumerate(raw)]
    flagged = duplicate_warnings(records)
    flagged += [(i, w) for i, r in enumerate(records) for w in r.validation_warnings()]
    if flagged:
        sample = "; ".join(f"record #{i}: {w}" for i, w in flagged[:3])
        warnings.warn(f"{path}: {counted(len(flagged), 'problem')}, e.g. {sample}", DatasetWarning,
                      stacklevel=2)
    check_upstream_integrity(path, records)
    return records


#: Parsed once per process and file version (benchmarks/parsed_files.py).
load_toolbehonest_file = parsed_once(_parse_toolbehonest_file)


def duplicate_warnings(records: list[ToolBHRecord]) -> list[tuple[int, str]]:
    """Identical records (upstream locates results with ``task_items.index(record)``, so a
    duplicate silently gets the first copy's result slot; upstream ``task_items.index(record)``). Not an error: upstream
    runs such a file. Here each copy keeps its own position and cases; the copies send the
    identical prompt (temperature 0; the response cache, keyed on the request, serves a later
    copy the stored reply), so they score as the first copy, as upstream's reuse does."""
    seen: dict[str, int] = {}
    out: list[tuple[int, str]] = []
    for i, record in enumerate(records):
        key = record.model_dump_json()
        if key in seen:
            out.append((i, f"identical to record #{seen[key]} (upstream reuses that record's result)"))
        else:
            seen[key] = i
    return out


def group_by_subtask(records: list[ToolBHRecord]) -> dict[str, list[ToolBHRecord]]:
    """Upstream ``convert_hf_data``: subtask -> records in file order, keys by first appearance."""
    groups: dict[str, list[ToolBHRecord]] = {}
    for record in records:
        groups.setdefault(record.subtask, []).append(record)
    return groups


def data_file(folder: Path, lang: str) -> Path:
    """``test_<lang>.json`` (the upstream file name) if present, else the bundled
    ``sample_<lang>.json``. A folder that cannot be listed, and a file of either name that is
    a directory, a symlink loop or unreadable, raise a DatasetError saying so (never the next
    name, nor "no test_en.json")."""
    present = set(listed_entries(folder, "ToolBeHonest data directory"))
    for name in (f"test_{lang}.json", f"sample_{lang}.json"):
        if folder / name in present:
            check_data_file(folder / name, "ToolBeHonest data file")
            return folder / name
    raise DatasetError(folder, f"no test_{lang}.json (or sample_{lang}.json) in this folder")


def check_upstream_integrity(path: str | Path, records: list[ToolBHRecord]) -> bool | None:
    """For a 350-record ``test_en.json``, compare with the (unverified) pin: warn, never fail."""
    if len(records) != UPSTREAM_RECORD_COUNT or not Path(path).name.endswith("en.json"):
        return None
    ok = file_sha256(path) == UPSTREAM_EN_SHA256
    if not ok:
        warnings.warn(
            f"{path}: 350 records but sha256 differs from the reported HF pin "
            f"{UPSTREAM_EN_SHA256[:12]}... (a third party's hash, unverified); results may not match "
            "the paper",
            DatasetWarning,
            stacklevel=3,
        )
    return ok
