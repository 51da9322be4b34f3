"""FamilyTool records (``familytool-{b,e}.jsonl``): loaded unchanged, validated, with one-line
errors naming file and line (upstream ``datasets/familytool-{b,e}.jsonl``).

Each line is a JSON list of four message dicts: id, candidate_tools, user, tool_call. The golden
sub-KG is read from the user content exactly as upstream does: the first non-greedy ``\\(.*?\\)``
group, then every innermost ``[...]`` with quotes removed, split on ``,`` and stripped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ConfigDict

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.benchmarks.data_paths import check_data_file
from pytest_toolbench.benchmarks.dataset_errors import DatasetError, raise_collected, text_lines, json_value

SPLITS = ("b", "e")
ROLES = ("id", "candidate_tools", "user", "tool_call")
#: Where the query ends in the user content (``datasets/familytool-{b,e}.jsonl``; "for *the* query", as in data and code).
EXTRA_INFO_MARKER = "The extra information for the query"
GOLDEN_GROUP_RE = re.compile(r"\(.*?\)")
LINK_RE = re.compile(r"\[([^\[\]]+)\]")


def split_links(text: str) -> list[tuple[str, ...]]:
    """Upstream link extraction: innermost ``[...]``, quotes removed, split on ``,``, stripped.

    Used for the golden group and for extraction strings alike (upstream ``metric_KG_extraction``), so a link with a wrong
    number of parts is kept as it is (it simply matches nothing)."""
    links = []
    for inner in LINK_RE.findall(text):
        cleaned = inner.replace("'", "").replace('"', "")
        links.append(tuple(part.strip() for part in cleaned.split(",")))
    return links


def golden_group(user_content: str) -> str | None:
    match = GOLDEN_GROUP_RE.search(user_content)
    return match.group(0) if match else None


class FamilyToolRecord(DeferredModel):
    """One validated record; the raw message list is kept verbatim in ``messages``."""

    model_config = ConfigDict(frozen=True)

    split: str
    index: int  # 0-based line number among records
    id: str
    candidate_tools: list[dict[str, Any]]
    user: str
    golden_calls: list[dict[str, Any]]
    messages: list[dict[str, Any]]

    @property
    def golden_links(self) -> list[tuple[str, ...]]:
        group = golden_group(self.user)
        return split_links(group) if group else []

    @property
    def hops(self) -> int:
        """Number of triples in the golden ``(...)``, duplicates counted (paper Table 2)."""
        return len(self.golden_links)

    @property
    def query(self) -> str:
        """The extraction input: user content before the extra-information sentence, stripped."""
        return self.user.split(EXTRA_INFO_MARKER)[0].strip()

    @property
    def case_key(self) -> str:
        return f"{self.split}-{self.index}"


def _validate(raw: Any, path: Path, line: int, index: int, split: str) -> FamilyToolRecord:
    def fail(message: str, record_id: object = None) -> DatasetError:
        return DatasetError(path, message, index=index, record_id=record_id, line=line)

    if not isinstance(raw, list) or len(raw) != 4:
        raise fail("a record must be a JSON list of 4 message dicts")
    for pos, (message, role) in enumerate(zip(raw, ROLES)):
        if not isinstance(message, dict) or message.get("role") != role or "content" not in message:
            raise fail(f"message {pos} must be a dict with role {role!r} and a content")
    record_id, tools, user, calls = (m["content"] for m in raw)
    if not isinstance(record_id, str):
        raise fail("the id content must be a string")
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools
    ):
        raise fail("candidate_tools must be a list of tool dicts with a string name", record_id)
    if not isinstance(user, str):
        raise fail("the user content must be a string", record_id)
    if golden_group(user) is None:
        raise fail("the user content has no golden sub-KG group '(...)'", record_id)
    if not isinstance(calls, list) or not calls or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("parameters"), dict)
        for c in calls
    ):
        raise fail("tool_call must be a non-empty list of {name, parameters} dicts", record_id)
    # A gold call to a tool the model is not offered can never be matched: every model, the
    # oracle included, would fail the case, and the metric would count the data's fault.
    offered = {t["name"] for t in tools}
    unoffered = sorted({c["name"] for c in calls} - offered)
    if unoffered:
        raise fail(f"tool_call names {unoffered} not among the candidate_tools "
                   f"({sorted(offered) or 'none'})", record_id)
    return FamilyToolRecord(
        split=split, index=index, id=record_id, candidate_tools=tools, user=user,
        golden_calls=calls, messages=raw,
    )


def load_records(path: Path, split: str) -> list[FamilyToolRecord]:
    """All records of one split file; blank lines are skipped (upstream ``json.loads`` per line).

    A file with no record, a line that is not UTF-8 and two records with one id (the id names
    the record's sub-KG and memo entries) are refused, each in one line naming file and line."""
    path = Path(path)
    check_data_file(path, "FamilyTool data file")
    records: list[FamilyToolRecord] = []
    first_line: dict[str, int] = {}
    duplicates: list[DatasetError] = []
    for line_no, line in text_lines(path):
        if not line.strip():
            continue
        raw = json_value(path, line, line=line_no)
        record = _validate(raw, path, line_no, len(records), split)
        if record.id in first_line:
            duplicates.append(DatasetError(
                path, f"duplicate id (also line {first_line[record.id]})",
                index=record.index, record_id=record.id, line=line_no,
            ))
        else:
            first_line[record.id] = line_no
        records.append(record)
    raise_collected(duplicates)
    if not records:
        raise DatasetError(path, "no records (the FamilyTool data file is empty)")
    return records
