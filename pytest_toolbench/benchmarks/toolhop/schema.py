"""The ToolHop record and loaders that accept the real upstream ``data/ToolHop.json`` unchanged.

Validation checks the invariants the upstream scripts (``code/evaluation_*.py``) silently rely on up
front, so a broken file fails with "file + record #i (id=...)" instead of mid-run. Tool parameter
schemas are passed through verbatim (they are sent to the model as they are; union types, enums
and non-standard keys included), so they are kept as plain dicts and never re-validated.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, ValidationError, field_validator, model_validator

from pytest_toolbench.counting import counted
from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.benchmarks.data_paths import check_data_file, listed_entries
from pytest_toolbench.benchmarks.data_source import file_sha256, is_bundled
from pytest_toolbench.benchmarks.dataset_errors import (
    DatasetError,
    DatasetWarning,
    check_record_texts,
    data_bytes_and_text,
    describe_validation_error,
    is_int_digits_error,
    raise_collected,
    too_long_number,
)
from pytest_toolbench.benchmarks.packed import (
    FileSpans,
    KeptRecord,
    NotAJsonArray,
    PackedRecord,
    iter_json_array_at,
)
from pytest_toolbench.benchmarks.parsed_files import parsed_once

#: Upstream ``data/ToolHop.json`` as published (Git LFS pointer in ``MananDesai54/llm-benchmarking``).
UPSTREAM_RECORD_COUNT = 995
UPSTREAM_SHA256 = "0a51f71a44b7025645e452123af3caf2e348301922af91778e268db0188a7fab"
UPSTREAM_SIZE = 19_720_396

RECORD_KEYS = (
    "id",
    "question",
    "answer",
    "sub_task",
    "tools",
    "functions",
    "domain",
    "answer_type",
    "previous_answer_type",
)


def upstream_def_name(source: str) -> str:
    """The tool name as the upstream executor extracts it from a source (``split("def")[1]`` quirk)."""
    parts = source.split("def")
    if len(parts) < 2:
        return ""
    return parts[1].split("(")[0].strip()


class ToolHopRecord(DeferredModel):
    """One upstream record, keys in upstream order. Immutable: records are shared by cases."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    id: int
    question: str
    answer: str
    sub_task: dict[str, str]
    tools: dict[str, dict[str, Any]]
    functions: list[str]
    domain: str
    answer_type: str
    previous_answer_type: str

    @field_validator("tools")
    @classmethod
    def _tool_docs_have_name_and_parameters(
        cls, tools: dict[str, dict[str, Any]]
    ) -> dict[str, dict[str, Any]]:
        for key, doc in tools.items():
            if not isinstance(doc.get("name"), str) or not doc["name"]:
                raise ValueError(f"tool for sub-task {key!r} has no string 'name'")
            if not isinstance(doc.get("parameters"), dict):
                raise ValueError(f"tool {doc['name']!r} has no object 'parameters'")
        return tools

    @model_validator(mode="after")
    def _cross_field_invariants(self) -> "ToolHopRecord":
        if set(self.tools) != set(self.sub_task):
            only_tools = sorted(set(self.tools) - set(self.sub_task))
            only_sub = sorted(set(self.sub_task) - set(self.tools))
            raise ValueError(
                "tools and sub_task must have the same keys "
                f"(only in tools: {only_tools}, only in sub_task: {only_sub})"
            )
        if len(self.functions) != len(self.tools):
            raise ValueError(
                f"functions has {len(self.functions)} sources but tools has {len(self.tools)}"
            )
        defined = _defined_names(self.functions)
        for name in self.tool_names:
            if name not in defined and not any(_defines(src, name) for src in self.functions):
                raise ValueError(f"tool {name!r} has no 'def {name}(' in functions")
        return self

    # --- derived views ----------------------------------------------------------------------

    @property
    def hops(self) -> int:
        return len(self.sub_task)

    @property
    def tool_docs(self) -> list[dict[str, Any]]:
        """Tool documents in file (hop) order, as the upstream sends them."""
        return list(self.tools.values())

    @property
    def tool_names(self) -> list[str]:
        return [doc["name"] for doc in self.tools.values()]

    def tool_schema(self, name: str) -> dict[str, Any] | None:
        """The parameters schema the model saw for ``name`` (the last one if duplicated)."""
        found = None
        for doc in self.tools.values():
            if doc["name"] == name:
                found = doc["parameters"]
        return found

    def validation_warnings(self) -> list[str]:
        """Tolerated oddities (duplicate names, the ``split("def")`` quirk): reported, never fatal."""
        out: list[str] = []
        names = self.tool_names
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            out.append(f"duplicate tool names {dups} (upstream executes the last definition)")
        extracted = {upstream_def_name(src) for src in self.functions}
        for name in names:
            if name not in extracted:
                out.append(
                    f"tool {name!r}: upstream name extraction (split on 'def') does not find it"
                )
        return out


#: The whitespace that may precede a line's ``def``: any but the newline that ends the line.
_INDENT = re.compile(r"[^\S\n]*")


def _line_start_defs(source: str) -> Iterator[int]:
    r"""Where each ``def`` that begins a line (after whitespace) starts: the places where
    ``(?m)^\s*def`` matches, found in linear time.

    The regex itself is quadratic on blank lines (``\s*`` runs from every line start across all
    the blank lines below it: 150 KB of newlines took 39 s). ``str.find`` jumps from one
    ``def`` to the next, and a ``def`` counts when its line's indent ends where it starts, which
    is the same test: ``^\s*`` can reach ``def`` from some line start exactly when the text
    between the nearest line start and ``def`` is whitespace (``\s`` is ``str.isspace``). Each
    stretch of text is searched once (the indent once per line), all by C code."""
    indent_end = _INDENT.match(source).end()  # type: ignore[union-attr]
    seen = 0
    pos = source.find("def")
    while pos != -1:
        newline = source.rfind("\n", seen, pos)
        if newline != -1:  # a new line since the last candidate: measure its indent
            indent_end = _INDENT.match(source, newline + 1).end()  # type: ignore[union-attr]
        if indent_end == pos:
            yield pos
        seen = pos
        pos = source.find("def", pos + 1)


def _defines(source: str, name: str) -> bool:
    r"""Whether ``source`` has ``def name(`` at the start of a line (``(?m)^\s*def\s+name\s*\(``)."""
    tail = re.compile(rf"def\s+{re.escape(name)}\s*\(")
    return any(tail.match(source, pos) for pos in _line_start_defs(source))


#: What follows a line's ``def``: the defined name, then ``(``.
_DEF_NAME = re.compile(r"def\s+([^\s(]+)\s*\(")


def _defined_names(sources: list[str]) -> set[str]:
    """Every name ``_defines`` would find, in one pass over the sources (a pattern per tool and
    source was a large share of a large file's load time). A name it misses (one with spaces)
    still gets ``_defines``'s exact check, so the result is the same."""
    return {m.group(1) for src in sources for pos in _line_start_defs(src)
            if (m := _DEF_NAME.match(src, pos)) is not None}


def parse_record(raw: Any, path: Path, index: int) -> ToolHopRecord:
    """Validate one raw JSON object, raising :class:`DatasetError` that names file/index/id."""
    record_id = raw.get("id") if isinstance(raw, dict) else None
    if not isinstance(raw, dict):
        raise DatasetError(path, f"record must be a JSON object, got {type(raw).__name__}", index=index)
    missing = [k for k in RECORD_KEYS if k not in raw]
    extra = [k for k in raw if k not in RECORD_KEYS]
    if missing or extra:
        problems = []
        if missing:
            problems.append(f"missing keys {missing}")
        if extra:
            problems.append(f"unexpected keys {extra}")
        raise DatasetError(path, "; ".join(problems), index=index, record_id=record_id)
    if isinstance(raw["id"], bool):
        raise DatasetError(path, "id must be an integer", index=index, record_id=record_id)
    try:
        return ToolHopRecord.model_validate(raw)
    except ValidationError as exc:
        raise DatasetError(
            path, describe_validation_error(exc, ("answer", "question")), index=index, record_id=record_id
        ) from None


@dataclass(frozen=True, slots=True)
class ToolHopEntry:
    """A validated record as a run keeps it: what collection needs, the rest kept as its place in
    the data file (benchmarks/packed.py; a record unpacks when its case runs). The scenarios'
    cases of one record share its sample id and labels."""

    id: int
    sample_id: str  # str(id), made once for the record's cases
    labels: dict[str, str | int]
    kept: KeptRecord[ToolHopRecord]

    @classmethod
    def of(cls, record: ToolHopRecord, kept: KeptRecord[ToolHopRecord] | None = None) -> ToolHopEntry:
        """``record``'s entry; ``kept``: the record as its file holds it, if at hand (else packed)."""
        labels: dict[str, str | int] = {
            "hops": record.hops, "domain": record.domain, "answer_type": record.answer_type,
        }
        if kept is None:
            kept = PackedRecord.of_value(ToolHopRecord, record.model_dump())
        return cls(record.id, str(record.id), labels, kept)

    def unpack(self) -> ToolHopRecord:
        return self.kept.unpack()


def _parse_toolhop_file(path: Path) -> list[ToolHopEntry]:
    """Load a ToolHop JSON array (the real file or a subset in the same shape), one record at a
    time, so a large file's records never all exist unpacked at once."""
    raw, text = data_bytes_and_text(path, empty="the file is empty (no records)")
    spans = FileSpans(path, raw, text)
    entries: list[ToolHopEntry] = []
    flagged: list[tuple[int, str]] = []
    seen: dict[int, int] = {}
    errors: list[DatasetError] = []  # every bad record, so one run lists all there is to fix
    line, counted = 1, 0  # the line of the record at hand, counted on from `counted`
    try:
        for index, (item, source, start) in enumerate(iter_json_array_at(text)):
            line += text.count("\n", counted, start)
            counted = start
            try:
                record_id = item.get("id") if isinstance(item, dict) else None
                check_record_texts(path, item, index=index, record_id=record_id, line=line,
                                   source=source)
                record = parse_record(item, path, index)
            except DatasetError as exc:
                errors.append(exc)
                continue
            if record.id in seen:
                errors.append(DatasetError(
                    path, f"duplicate id (also record #{seen[record.id]})", index=index, record_id=record.id
                ))
                continue
            seen[record.id] = index
            flagged.extend((record.id, w) for w in record.validation_warnings())
            entries.append(ToolHopEntry.of(record, spans.keep(ToolHopRecord, source, start)))
    except json.JSONDecodeError as exc:
        raise DatasetError(path, f"invalid JSON: {exc.msg}", line=exc.lineno, column=exc.colno) from None
    except NotAJsonArray as exc:
        raise DatasetError(path, f"top level must be a JSON array of records, got {exc.found}") from None
    except RecursionError:
        raise DatasetError(path, "invalid JSON: nested too deeply") from None
    except ValueError as exc:  # int's digit limit: a ValueError that is no JSONDecodeError
        if not is_int_digits_error(exc):
            raise
        raise too_long_number(path, text) from None
    raise_collected(errors)
    if not entries:
        raise DatasetError(path, "no records (an empty array)")
    _warn_tolerated(path, flagged)
    check_upstream_integrity(path, entries)
    return entries


#: Parsed once per process and file version (benchmarks/parsed_files.py); the run keeps these.
load_toolhop_entries = parsed_once(_parse_toolhop_file)


def load_toolhop_file(path: str | Path) -> list[ToolHopRecord]:
    """Every record of one ToolHop file, unpacked (for tools and tests; a run keeps entries)."""
    return [entry.unpack() for entry in load_toolhop_entries(path)]


def toolhop_files(directory: str | Path) -> list[Path]:
    """The ``*.json`` files of a ToolHop data directory, sorted by name. A folder that cannot
    be listed, and a ``*.json`` that is a directory, a symlink loop or unreadable, raise a
    DatasetError saying so (a glob would drop them and report "no *.json files")."""
    entries = listed_entries(Path(directory), "ToolHop data directory")
    files = [p for p in entries if p.name.endswith(".json")]
    for path in files:
        check_data_file(path, "ToolHop data file")
    return files


def load_toolhop_dir_entries(directory: str | Path) -> list[ToolHopEntry]:
    """Every ``*.json`` file in ``directory`` (sorted by name); ids must be unique overall."""
    directory = Path(directory)
    files = toolhop_files(directory)
    if not files:
        raise DatasetError(directory, "no *.json files in the ToolHop data directory")
    entries: list[ToolHopEntry] = []
    origin: dict[int, Path] = {}
    for path in files:
        for index, entry in enumerate(load_toolhop_entries(path)):
            if entry.id in origin:
                raise DatasetError(
                    path,
                    f"id {entry.id} also appears in {origin[entry.id].name}",
                    index=index,
                    record_id=entry.id,
                )
            origin[entry.id] = path
            entries.append(entry)
    return entries


def load_toolhop_dir(directory: str | Path) -> list[ToolHopRecord]:
    """:func:`load_toolhop_dir_entries`, unpacked."""
    return [entry.unpack() for entry in load_toolhop_dir_entries(directory)]


def _warn_tolerated(path: Path, flagged: list[tuple[int, str]]) -> None:
    """One summary warning per file, not one per record (7% of rows have duplicate names).

    Not for the harness's own bundled sample: its oddities are there on purpose (record 9006's
    duplicate tool name makes the tests and the oracle go through upstream's last-definition
    rule), so they say nothing about the data a user brought, and a warning before every run of
    the demo would only teach people to ignore the one that matters."""
    if flagged and not is_bundled(path, path.parent.parent):  # (<data dir>/toolhop/<file>)
        ids = sorted({rid for rid, _ in flagged})
        sample = "; ".join(f"id={rid}: {w}" for rid, w in flagged[:3])
        warnings.warn(
            f"{path}: {counted(len(ids), 'record')} with tolerated oddities, e.g. {sample}",
            DatasetWarning,
            stacklevel=3,
        )


def check_upstream_integrity(path: str | Path, records: Sequence[object]) -> bool | None:
    """For a full-size file, compare its sha256 with the upstream LFS oid (warn on mismatch).

    Returns None for subsets (nothing to compare), else whether the file is byte-identical.
    """
    if len(records) != UPSTREAM_RECORD_COUNT:
        return None
    ok = file_sha256(path) == UPSTREAM_SHA256
    if not ok:
        warnings.warn(
            f"{path}: {UPSTREAM_RECORD_COUNT} records but sha256 differs from upstream "
            f"{UPSTREAM_SHA256[:12]}... (size {Path(path).stat().st_size}, upstream {UPSTREAM_SIZE}); "
            "results may not be comparable with the paper",
            DatasetWarning,
            stacklevel=3,
        )
    return ok
