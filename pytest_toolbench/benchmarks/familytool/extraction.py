"""Parsing ``KG.search(...)`` calls out of a model reply and executing them on the KG (upstream ``KG_search``).

Upstream: ``pipeline/KG_extraction_post_process_make_intermediate_json.py`` of
``yxzwang/FamilyTool`` @ c3c5fc7 (``KG_search``, ``cleankgsearch``, ``examinekg_output``,
``extractpath``, ``extractpath_relationretrieval``). Every quirk is upstream's and kept on purpose:
the non-greedy, single-line call regex; quotes, backticks and ASCII spaces deleted (so
``Mr. Smith`` never matches as a start); ``<...>`` tags stripped (so ``<relationship>`` is
optional); lowercase keyword-only ``start=``/``path=``; the start and every path item then
``.strip()``-ed (so a tab, NBSP or ideographic space around a name is dropped, one inside it is
not); an unparsable ``path=`` contributes ``"<bad_extract>"`` alone; a call whose start is unknown
contributes nothing; the whole reply, reasoning included, is parsed.

Relation Retrieval's lookups go through upstream's ``startrelationdict``, a ``defaultdict``: every
lookup of a missing ``"{head}-{relation}"`` key adds it (empty), and the table lives for one
reply (``KG_search`` builds the graph per reply). Since RR tests each hop's key with the ORIGINAL
start, a key added by one call can let a later call of the same reply take a hop it would skip
alone (:class:`ReplyLookups`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pytest_toolbench.benchmarks.familytool.kg import KnowledgeGraph, Triple, head_relation_key

BAD = "<bad_extract>"
CALL_RE = re.compile(r"KG.search\((.*?)\)")
START_RE = re.compile(r"start=([^,]+)")
PATH_RE = re.compile(r"path=\[([^\]]+)\]")
TAG_RE = re.compile(r"<.*?>")
_DELETE = str.maketrans({c: None for c in "'\"‘’“”` "})
_FULL_WIDTH = str.maketrans({"，": ",", "【": "[", "】": "]"})
LEGACY_ALL = "全部"

Method = Literal["gs", "rr"]
#: relation -> its top-k KG relations (Relation Retrieval's retriever).
TopK = Callable[[str, int], list[str]]


@dataclass
class ParsedCall:
    raw: str
    cleaned: str
    start: str | None
    path: list[str] | None


@dataclass
class Extraction:
    """What one reply extracts: the string handed to tool use, plus what it came from."""

    text: str
    calls: list[ParsedCall] = field(default_factory=list)
    paths: list[list[list[str]]] = field(default_factory=list)

    @property
    def format_error(self) -> bool:
        return self.text == ""


def clean_call(raw: str) -> str:
    return TAG_RE.sub("", raw.translate(_DELETE).translate(_FULL_WIDTH))


def parse_calls(response: str) -> list[ParsedCall]:
    calls = []
    for raw in CALL_RE.findall(response or ""):
        cleaned = clean_call(raw)
        start_match = START_RE.search(cleaned)
        path_match = PATH_RE.search(cleaned)
        path = None
        if path_match is not None:
            path = []
            for part in (item.strip() for item in path_match.group(1).split(",")):
                if part == LEGACY_ALL and path:
                    path[-1] += part  # legacy "all" marker merged into the previous relation
                else:
                    path.append(part)
        start = start_match.group(1).strip() if start_match else None
        calls.append(ParsedCall(raw, cleaned, start, path))
    return calls


def filter_longest_lists(paths: list[list[Triple]]) -> list[list[Triple]]:
    """When paths differ in length keep only the longest ones (drops paths that stopped early)."""
    if not paths:
        return paths
    longest = max(len(p) for p in paths)
    return [p for p in paths if len(p) == longest]


def greedy_search(kg: KnowledgeGraph, start: str | None, relations: Sequence[str]) -> tuple[list[list[Triple]], str]:
    """Exact match with one greedy neighbourhood expansion per call (the paper's GS, §2.3)."""
    if start is None or not kg.is_head(start) or not relations:
        return [], BAD
    sign = ""
    first = kg.first(start, relations[0])
    if first is not None:
        paths, current = [[first]], [first[2]]
    else:
        links = kg.out_links(start)
        paths, current = [[link] for link in links], [link[2] for link in links]
        sign = BAD
    for relation in relations[1:]:
        for j, path in enumerate(paths):
            entity = current[j]
            if not kg.is_head(entity):
                sign = BAD
                continue
            triple = kg.first(entity, relation)
            if triple is not None:
                path.append(triple)
                current[j] = triple[2]
            elif sign != BAD:
                path.extend(kg.out_links(entity))
                sign = BAD
    return filter_longest_lists(paths), sign


class ReplyLookups:
    """Upstream's ``startrelationdict`` for one reply: the KG's keys plus every key a lookup added.

    ``get_by_start_relation(h, r)`` indexes a ``defaultdict(list)``, so asking for a missing key
    creates it, empty; ``f"{start}-{relation}" in startrelationdict.keys()`` then says yes."""

    def __init__(self, kg: KnowledgeGraph):
        self.kg = kg
        self.added: set[str] = set()

    def has_key(self, head: str, relation: str) -> bool:
        key = head_relation_key(head, relation)
        return key in self.added or self.kg.has_key(key)

    def get(self, head: str, relation: str) -> Triple | None:
        key = head_relation_key(head, relation)
        if not self.kg.has_key(key):
            self.added.add(key)
        return self.kg.first(head, relation)


def relation_retrieval(
    kg: KnowledgeGraph, start: str | None, relations: Sequence[str], top_k: TopK, k: int = 3,
    lookups: ReplyLookups | None = None,
) -> tuple[list[list[Triple]], str]:
    """The paper's RR (§2.4): each fake relation -> its top-k KG relations, Cartesian product of
    candidates, walked from ``start``. The hop test looks up ``(start, relation)`` with the
    ORIGINAL start (upstream bug, kept) in the reply's lookup table (``lookups``: keys added by
    earlier lookups count), then the current entity's first triple; a failing hop is skipped.
    The sign is always ``""``."""
    lookups = lookups or ReplyLookups(kg)
    if start is None:
        return [], ""
    vocabulary = kg.relation_set
    if any(r not in vocabulary for r in relations):
        options = [[r] if r in vocabulary else top_k(r, k) for r in relations]
        candidates = [list(c) for c in itertools.product(*options)]
    else:
        candidates = [list(relations)]
    found: list[list[Triple]] = []
    ends: set[str] = set()
    for candidate in candidates:
        entity, path = start, []
        for relation in candidate:
            if not lookups.has_key(start, relation):
                continue
            triple = lookups.get(entity, relation)
            if triple is None:
                continue
            path.append(triple)
            entity = triple[2]
        if path and path[-1][2] not in ends:
            ends.add(path[-1][2])
            found.append(path)
    return filter_longest_lists(found), ""


def extract(response: str, kg: KnowledgeGraph, method: Method, top_k: TopK | None = None, k: int = 3) -> Extraction:
    """The extraction string of one reply, built exactly as upstream ``KG_search`` concatenates it."""
    calls = parse_calls(response)
    lookups = ReplyLookups(kg)  # one table per reply, as upstream builds its graph per reply
    pieces: list[str] = []
    all_paths: list[list[list[str]]] = []
    for call in calls:
        if call.path is None:
            pieces.append("" + BAD)
            continue
        if method == "gs":
            paths, sign = greedy_search(kg, call.start, call.path)
        else:
            if top_k is None:
                raise ValueError("relation retrieval needs a retriever")
            paths, sign = relation_retrieval(kg, call.start, call.path, top_k, k, lookups)
        for path in paths:
            as_lists = [list(t) for t in path]
            all_paths.append(as_lists)
            pieces.append(f"({as_lists})" + sign)
    return Extraction(text="".join(pieces), calls=calls, paths=all_paths)


def substitute(user_content: str, extraction_text: str) -> str:
    """The tool-use input: the golden ``(...)`` replaced by the extraction string, verbatim
    (upstream ``KG_extraction_post_process_make_intermediate_json.py``)."""
    return re.sub(r"\(.*?\)", lambda _: extraction_text, user_content, count=1)
