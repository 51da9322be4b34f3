"""The normalised Meta-Bench dialogue and the loader that reads a data folder into it.

Raw layouts are mapped in :mod:`.fields` (the one module to adapt for the real files); this module
validates the result and derives what scoring needs: the judged turns, their kinds and the gold
retrieval targets. A bad file fails with ``<file> record #i (id=...)`` or ``<file> line N``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.benchmarks.data_paths import check_data_file, listed_entries
from pytest_toolbench.benchmarks.dataset_errors import (
    DatasetError,
    data_text,
    describe_validation_error,
    json_value,
    text_lines,
)
from pytest_toolbench.benchmarks.metabench.fields import (
    CATEGORIES_BY_OPENNESS,
    CLOSED_CALL_CATEGORY,
    normalise_record,
    retrieved_tools,
)
from pytest_toolbench.benchmarks.metabench.prompts import META_TOOL_NAME
from pytest_toolbench.benchmarks.parsed_files import parsed_once

#: Files under these sub-folders of data/metabench/ are not dialogues.
NON_DIALOGUE_DIRS = ("library",)

TurnKind = Literal["chat", "call", "meta_tool"]


class Call(DeferredModel):
    model_config = ConfigDict(frozen=True)

    name: str
    parameters: dict[str, Any] = Field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "parameters": self.parameters}


class Message(DeferredModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant", "tool"]
    content: Any = None
    tool_calls: list[Call] = Field(default_factory=list)
    #: Whether this assistant turn is judged (None: the category's default, see ``judged``).
    eval: bool | None = None
    turn_kind: TurnKind | None = None

    @model_validator(mode="after")
    def _derive_kind(self) -> "Message":
        if self.role != "assistant":
            if self.tool_calls or self.eval or self.turn_kind:
                raise ValueError(f"a {self.role} message cannot have tool_calls/eval/turn_kind")
            return self
        names = {c.name for c in self.tool_calls}
        derived: TurnKind = (
            "chat" if not names else "meta_tool" if names == {META_TOOL_NAME} else "call"
        )
        if self.turn_kind is not None and self.turn_kind != derived:
            raise ValueError(f"turn_kind {self.turn_kind!r} but its calls make it {derived!r}")
        self.turn_kind = derived
        return self


class GoldRetrieval(DeferredModel):
    turn: int
    call_index: int = 0
    tool_name: str


class Dialogue(DeferredModel):
    # Frozen: one parse is shared by the cases and the retriever's library (parsed_files.py).
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    difficulty: Literal["simple", "hard"]
    openness: Literal["open-world", "closed-world"]
    category: Literal[
        "chat", "function_missing", "function_existing", "single_tool_call", "multi_tool_call"
    ]
    source: str | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    system: str | None = None
    messages: list[Message]
    tool_pool: list[str | dict[str, Any]] | None = None
    gold_retrieval: list[GoldRetrieval] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> "Dialogue":
        if self.category not in CATEGORIES_BY_OPENNESS[self.openness]:
            raise ValueError(f"category {self.category!r} does not exist in {self.openness}")
        expected = CLOSED_CALL_CATEGORY[self.difficulty]
        if self.category in CLOSED_CALL_CATEGORY.values() and self.category != expected:
            raise ValueError(
                f"category {self.category!r} does not exist in {self.difficulty} (closed-world calls "
                f"are {expected!r} there, fields.CLOSED_CALL_CATEGORY)"
            )
        for i, tool in enumerate(self.tools):
            if not isinstance(tool.get("name"), str) or not tool["name"]:
                raise ValueError(f"tools[{i}] has no string 'name'")
        if not self.judged_turns:
            raise ValueError("no judged assistant turn")
        if not self.gold_retrieval:
            # The one write, while validating (frozen afterwards).
            object.__setattr__(self, "gold_retrieval", self._derive_gold_retrieval())
        for g in self.gold_retrieval:
            if not (0 <= g.turn < len(self.messages)) or self.messages[g.turn].turn_kind != "meta_tool":
                raise ValueError(f"gold_retrieval turn {g.turn} is not a meta_tool turn")
        for turn in self.judged_turns:
            if self.messages[turn].turn_kind == "meta_tool" and not self.gold_tools(turn):
                raise ValueError(f"meta_tool turn {turn} has no gold retrieved tool")
        return self

    # --- derived views ----------------------------------------------------------------------

    def judged(self, index: int) -> bool:
        """Explicit ``eval`` wins; otherwise chat turns are judged in the chat category (IRR),
        call and meta_tool turns elsewhere (T/P-Acc, FMD/HR) — the units behind the paper's
        denominators (back-solved from the Meta-Tool paper's Tables 2-6)."""
        m = self.messages[index]
        if m.role != "assistant":
            return False
        if m.eval is not None:
            return m.eval
        if self.category == "chat":
            return m.turn_kind == "chat"
        return m.turn_kind in ("call", "meta_tool")

    @property
    def judged_turns(self) -> list[int]:
        return [i for i in range(len(self.messages)) if self.judged(i)]

    def retrieved_tools(self, turn: int) -> list[dict[str, Any]]:
        """Full tool JSONs in the tool turn right after meta_tool turn ``turn`` (Figs 12, 15)."""
        if turn + 1 >= len(self.messages) or self.messages[turn + 1].role != "tool":
            return []
        return retrieved_tools(self.messages[turn + 1].content)

    def _derive_gold_retrieval(self) -> list[GoldRetrieval]:
        out: list[GoldRetrieval] = []
        for i, m in enumerate(self.messages):
            if m.turn_kind == "meta_tool":
                for j, tool in enumerate(self.retrieved_tools(i)):
                    out.append(GoldRetrieval(turn=i, call_index=j, tool_name=tool["name"]))
        return out

    def gold_tools(self, turn: int) -> list[str]:
        """Gold tool names a meta_tool turn must retrieve (one per GT missing tool)."""
        return [g.tool_name for g in sorted(self.gold_retrieval, key=lambda g: g.call_index)
                if g.turn == turn]

    @property
    def own_tools(self) -> list[dict[str, Any]]:
        """The dialogue's tools with full JSON: its list, then every retrieved tool."""
        out = {t["name"]: t for t in self.tools}
        for i, m in enumerate(self.messages):
            if m.turn_kind == "meta_tool":
                for tool in self.retrieved_tools(i):
                    out.setdefault(tool["name"], tool)
        return list(out.values())

    @property
    def invoked_tool_names(self) -> list[str]:
        names: list[str] = []
        for m in self.messages:
            for c in m.tool_calls:
                if c.name != META_TOOL_NAME and c.name not in names:
                    names.append(c.name)
        for g in self.gold_retrieval:
            if g.tool_name not in names:
                names.append(g.tool_name)
        return names

    @property
    def world(self) -> str:
        return "open" if self.openness == "open-world" else "closed"

    @property
    def scenario(self) -> str:
        return f"{self.difficulty}-{self.world}-{self.category}"


def parse_dialogue(raw: Any, path: Path, origin: str, index: int, line: int | None = None) -> Dialogue:
    record_id = raw.get("id") if isinstance(raw, dict) else None
    where = {"index": None if line else index, "line": line, "record_id": record_id}
    if not isinstance(raw, dict):
        raise DatasetError(path, f"record must be a JSON object, got {type(raw).__name__}", **where)
    try:
        return Dialogue.model_validate(normalise_record(raw, origin))
    except ValidationError as exc:
        raise DatasetError(path, describe_validation_error(exc), **where) from None
    except ValueError as exc:
        raise DatasetError(path, str(exc), **where) from None
    except RecursionError:  # a text read as JSON or code while normalising, nested too deeply
        raise DatasetError(path, "nested too deeply", **where) from None


def _read_json(path: Path) -> Any:
    return json_value(path, data_text(path, empty="the file is empty (no dialogues)"))


def _parse_located(path: Path, origin: str) -> list[tuple[Dialogue, dict[str, Any]]]:
    """The file's dialogues with where each came from (for errors found after parsing)."""
    if path.suffix == ".jsonl":
        out: list[tuple[Dialogue, dict[str, Any]]] = []
        for n, text in text_lines(path):
            if not text.strip():
                continue
            raw = json_value(path, text, line=n)
            d = parse_dialogue(raw, path, origin, len(out), line=n)
            out.append((d, {"line": n}))
        if not out:
            raise DatasetError(path, "the file is empty (no dialogues)")
        return out
    raw = _read_json(path)
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raise DatasetError(path, f"top level must be a JSON array of dialogues, got {type(raw).__name__}")
    if not raw:
        raise DatasetError(path, "no dialogues (an empty array)")
    return [(parse_dialogue(item, path, origin, i), {"index": i}) for i, item in enumerate(raw)]


#: Parsed once per process and file version (benchmarks/parsed_files.py): the fingerprint, the
#: cases and the retriever's tool library all read the same files.
_load_located = parsed_once(_parse_located)


def load_file(path: Path, origin: str) -> list[Dialogue]:
    """A JSON list or JSONL file of dialogues."""
    return [d for d, _ in _load_located(path, origin)]


def _check_tool_pools(located: list[tuple[Dialogue, Path, dict[str, Any]]]) -> None:
    """A ``tool_pool`` may name only tools some record defines in full (a tool list, a retrieved
    tool, or a full-JSON pool entry), and must hold the dialogue's invoked tools (paper: "a tool
    pool of size 1000 including its invoked tools"); else the pool cannot be built, so fail at
    load time naming the file and record."""
    known: set[str] = set()
    for d, _, _ in located:
        known.update(t["name"] for t in d.own_tools)
        known.update(e["name"] for e in d.tool_pool or [] if isinstance(e, dict) and isinstance(e.get("name"), str))
    for d, path, where in located:
        if not d.tool_pool:
            continue
        names = [e if isinstance(e, str) else e.get("name") for e in d.tool_pool]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise DatasetError(path, f"tool_pool names unknown tool {unknown[0]!r} (no record defines it)",
                               record_id=d.id, **where)
        missing = [n for n in d.invoked_tool_names if n not in names]
        if missing:
            raise DatasetError(path, f"tool_pool lacks invoked tool {missing[0]!r}", record_id=d.id, **where)


def dialogue_files(directory: Path) -> list[Path]:
    """Every ``*.json`` / ``*.jsonl`` under ``directory`` but in NON_DIALOGUE_DIRS, sorted by
    path. A folder that cannot be listed, and a dialogue file that is a directory, a symlink
    loop or unreadable, raise a DatasetError saying so (a glob would skip them silently)."""
    files: list[Path] = []
    for path in listed_entries(directory, "Meta-Bench data directory"):
        if path.suffix in (".json", ".jsonl"):
            check_data_file(path, "Meta-Bench dialogue file")
            files.append(path)
        elif path.is_dir() and not path.is_symlink() and path.name not in NON_DIALOGUE_DIRS:
            files += dialogue_files(path)  # (a linked folder is not followed, as rglob did not)
    return sorted(files)


def load_dialogues(directory: str | Path) -> list[Dialogue]:
    """Every dialogue under ``directory`` (recursively, sorted by path); ids must be unique."""
    directory = Path(directory)
    files = dialogue_files(directory)
    if not files:
        raise DatasetError(directory, "no *.json / *.jsonl dialogue files in the Meta-Bench data directory")
    located: list[tuple[Dialogue, Path, dict[str, Any]]] = []
    seen: dict[str, Path] = {}
    for path in files:
        for dialogue, where in _load_located(path, str(path.relative_to(directory))):
            if dialogue.id in seen:
                raise DatasetError(path, f"duplicate id (also in {seen[dialogue.id].name})",
                                   **{"record_id": dialogue.id, **where})
            seen[dialogue.id] = path
            located.append((dialogue, path, where))
    _check_tool_pools(located)
    return [d for d, _, _ in located]


class JudgedTurn(DeferredModel):
    """What one case carries: a dialogue and the index of the assistant turn it judges."""

    model_config = ConfigDict(frozen=True)

    dialogue: Dialogue
    turn: int

    @property
    def message(self) -> Message:
        return self.dialogue.messages[self.turn]

    @property
    def kind(self) -> TurnKind:
        return self.message.turn_kind or "chat"
