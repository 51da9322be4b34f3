"""The family knowledge graph (``familykg-{b,e}.txt``) on networkx, with upstream lookup semantics.

Upstream ``eval``s each line; here a line is read with :func:`ast.literal_eval` (literals only,
never code) and must be a list of three strings, else a one-line error naming file and line.
Semantics kept from upstream (``KG/familykg-{b,e}.txt``, ``pipeline/KG_extraction.py`` exact/GS): directed, no inverse edges added; a multi-valued
(head, relation) resolves to its **first** tail in file order; out-links come in file order.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pytest_toolbench.benchmarks.data_paths import check_data_file
from pytest_toolbench.benchmarks.dataset_errors import DatasetError, check_record_texts, text_lines
from pytest_toolbench.benchmarks.parsed_files import parsed_once

if TYPE_CHECKING:
    import networkx as nx

Triple = tuple[str, str, str]


def head_relation_key(head: str, relation: str) -> str:
    """Upstream's ``startrelationdict`` key."""
    return f"{head}-{relation}"
RelationOrder = Literal["sorted", "file", "shuffled"]


def parse_triple_line(line: str, path: Path | str, line_no: int) -> Triple:
    try:
        value = ast.literal_eval(line.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise DatasetError(path, f"not a triple literal ({type(exc).__name__})", line=line_no) from None
    if not (isinstance(value, (list, tuple)) and len(value) == 3 and all(isinstance(v, str) for v in value)):
        raise DatasetError(path, "a KG line must be a list of three strings [head, relation, tail]", line=line_no)
    check_record_texts(path, list(value), line=line_no)  # a '\ud800' escape, an endless name
    return (value[0], value[1], value[2])


def _parse_triples(path: Path) -> list[Triple]:
    path = Path(path)
    triples = [parse_triple_line(line, path, line_no) for line_no, line in text_lines(path) if line.strip()]
    if not triples:
        raise DatasetError(path, "no triples (the FamilyTool KG file is empty)")
    return triples


#: Parsed once per process and file version (benchmarks/parsed_files.py): the run checks every
#: selected KG before the first model call (FamilyToolBenchmark.check_data), the cases read it again.
_load_triples = parsed_once(_parse_triples)


def load_triples(path: Path | str) -> list[Triple]:
    """Every triple of a KG file, in file order; a bad, non-UTF-8 or empty file raises a one-line
    :class:`DatasetError` naming file (and line)."""
    # checked here, not in the parser: a parse kept from before a chmod 000 would hide it
    check_data_file(Path(path), "FamilyTool KG file")
    return _load_triples(path)


class KnowledgeGraph:
    """A ``networkx.MultiDiGraph`` whose edges carry ``relation`` and their file position."""

    def __init__(self, triples: Iterable[Sequence[str]], source: str = ""):
        import networkx  # here, not at module level: every pytest start imports this module

        self.graph: nx.MultiDiGraph = networkx.MultiDiGraph()
        self.triples: list[Triple] = []
        self.source = source
        for position, (head, relation, tail) in enumerate(triples):
            self.triples.append((head, relation, tail))
            self.graph.add_edge(head, tail, key=position, relation=relation, position=position)

    @classmethod
    def from_file(cls, path: Path | str, extra: Iterable[Sequence[str]] = ()) -> "KnowledgeGraph":
        return cls([*load_triples(path), *extra], source=str(path))

    # --- lookups (upstream semantics) ------------------------------------------------------
    @cached_property
    def _out(self) -> dict[str, list[Triple]]:
        out: dict[str, list[Triple]] = {}
        for head in self.graph.nodes:
            edges = sorted(self.graph.out_edges(head, data=True), key=lambda e: e[2]["position"])
            if edges:
                out[head] = [(h, data["relation"], t) for h, t, data in edges]
        return out

    def out_links(self, entity: str) -> list[Triple]:
        """Every triple with ``entity`` as head, in file order (the greedy neighbourhood)."""
        return list(self._out.get(entity, []))

    def is_head(self, entity: str) -> bool:
        return entity in self._out

    def first(self, head: str, relation: str) -> Triple | None:
        """The first triple (file order) of ``(head, relation)``, or None: upstream's lookup.

        Upstream indexes tails by the string ``f"{head}-{relation}"`` and answers with the asked
        head and relation, so this does too (two pairs that spell the same key share its tails)."""
        tail = self._first_tail.get(head_relation_key(head, relation))
        return None if tail is None else (head, relation, tail)

    @cached_property
    def _first_tail(self) -> dict[str, str]:
        index: dict[str, str] = {}
        for head, relation, tail in self.triples:
            index.setdefault(head_relation_key(head, relation), tail)
        return index

    def has_key(self, key: str) -> bool:
        """Whether ``key`` (``head_relation_key``) has a triple."""
        return key in self._first_tail

    # --- vocabulary -------------------------------------------------------------------------
    @cached_property
    def relation_set(self) -> frozenset[str]:
        return frozenset(r for _, r, _ in self.triples)

    def relations(self, order: RelationOrder = "sorted", seed: int = 0) -> list[str]:
        """All relation names. Upstream iterates a Python ``set`` (order depends on
        PYTHONHASHSEED); here the order is a documented choice: ``sorted`` (default, as in the
        shared example prompt), ``file`` (first appearance) or ``shuffled`` (sorted, then
        ``random.Random(seed).shuffle``)."""
        if order == "file":
            return list(dict.fromkeys(r for _, r, _ in self.triples))
        names = sorted(self.relation_set)
        if order == "shuffled":
            random.Random(seed).shuffle(names)
        return names

    @cached_property
    def entities(self) -> frozenset[str]:
        return frozenset(self.graph.nodes)

    @cached_property
    def fingerprint(self) -> str:
        payload = json.dumps(self.triples, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(payload).hexdigest()

    def __len__(self) -> int:
        return len(self.triples)
