"""FamilyTool loaders and KG: one-line errors, upstream lookup semantics, paper Tables 1-2 counts."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from shared_data import REAL_FAMILYTOOL

from pytest_toolbench.benchmarks.dataset_errors import DatasetError
from pytest_toolbench.benchmarks.familytool.benchmark import FAMILYTOOL
from pytest_toolbench.benchmarks.familytool.kg import KnowledgeGraph, load_triples
from pytest_toolbench.benchmarks.familytool.noise import noisy_records
from pytest_toolbench.benchmarks.familytool.schema import load_records

needs_real = pytest.mark.skipif(not REAL_FAMILYTOOL.exists(), reason="../shared datasets absent")
BUNDLED = Path(__file__).resolve().parents[1] / "data" / "familytool"


def test_bundled_sample_loads_with_upstream_link_extraction():
    b = load_records(BUNDLED / "familytool-b.jsonl", "b")
    assert [r.hops for r in b] == [2, 1, 2, 4, 2, 1]
    # Python-quoted golden links lose their quotes, as upstream's regex + replace does.
    assert b[2].golden_links == [("Alice", "husband", "Jack"), ("Jack", "prefer_hotel", "hotel_0001")]
    assert b[0].query == "<speak>Speaker: Bob</speak> Please cancel the alarms at my mom's usual dinner time."
    e = load_records(BUNDLED / "familytool-e.jsonl", "e")
    assert e[3].hops == 4  # a repeated link counts twice
    kg = KnowledgeGraph.from_file(BUNDLED / "familykg-b.txt")
    assert kg.first("Bob", "prefer_travel_city") == ("Bob", "prefer_travel_city", "travel_city_0002")


def test_malformed_record_names_file_and_line(tmp_path):
    good = (BUNDLED / "familytool-b.jsonl").read_text().splitlines()[0]
    path = tmp_path / "familytool-b.jsonl"
    path.write_text(good + "\n" + "{not json\n")
    with pytest.raises(DatasetError) as err:
        load_records(path, "b")
    assert str(err.value).startswith(f"{path} line 2 column 2: ")
    assert "\n" not in str(err.value)
    bad = json.loads(good)
    bad[2]["role"] = "assistant"
    path.write_text(good + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DatasetError, match=r"record #1 line 2: message 2 must be a dict with role 'user'"):
        load_records(path, "b")
    bad = json.loads(good)
    bad[2]["content"] = "no group here"
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(DatasetError, match=r"line 1: the user content has no golden sub-KG"):
        load_records(path, "b")
    bad = json.loads(good)
    bad[1]["content"] = []  # no tool offered: even the oracle failed its cases (a tester's find)
    path.write_text(json.dumps(bad) + "\n")
    gold = sorted({c["name"] for c in bad[3]["content"]})
    with pytest.raises(DatasetError, match=re.escape(
            f"line 1: tool_call names {gold} not among the candidate_tools (none)")):
        load_records(path, "b")


def test_kg_line_is_never_evaluated(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "kg.txt"
    path.write_text(f"['Bob', 'father', 'Jack']\n__import__('pathlib').Path({str(marker)!r}).touch()\n")
    with pytest.raises(DatasetError, match=r"kg.txt line 2: not a triple literal"):
        load_triples(path)
    assert not marker.exists()
    path.write_text("['Bob', 'father']\n")
    with pytest.raises(DatasetError, match=r"line 1: a KG line must be a list of three strings"):
        load_triples(path)


def test_kg_semantics_first_tail_and_no_inverse_edges():
    kg = KnowledgeGraph([("A", "r", "x"), ("A", "s", "y"), ("A", "r", "z"), ("B", "son", "A")])
    assert kg.first("A", "r") == ("A", "r", "x")  # first value in file order
    assert kg.first("A", "son") is None  # no inverse edge for (B, son, A)
    assert kg.out_links("A") == [("A", "r", "x"), ("A", "s", "y"), ("A", "r", "z")]
    assert not kg.is_head("x")
    assert kg.relations("file") == ["r", "s", "son"]
    assert kg.relations("shuffled", seed=1) == kg.relations("shuffled", seed=1)
    assert sorted(kg.relations("shuffled", seed=1)) == kg.relations()


@needs_real
def test_real_counts_match_paper_tables_1_and_2():
    expected_kg = {"b": (154, 147, 65), "e": (491, 480, 66)}
    expected_hops = {"b": {1: 106, 2: 361, 3: 13, 4: 3}, "e": {2: 36, 3: 387, 4: 22, 5: 7, 6: 3}}
    for split in "be":
        kg = KnowledgeGraph.from_file(REAL_FAMILYTOOL / f"familykg-{split}.txt")
        assert (len(kg), len(kg.entities), len(kg.relation_set)) == expected_kg[split]
        records = load_records(REAL_FAMILYTOOL / f"familytool-{split}.jsonl", split)
        assert dict(Counter(r.hops for r in records)) == expected_hops[split]
    cases = FAMILYTOOL.load_cases(REAL_FAMILYTOOL.parent, ("extract-gs",))
    assert Counter((c.labels["split"], c.labels["hops"]) for c in cases)[("e", 6)] == 3


@needs_real
def test_real_noise_is_the_spec_list():
    b = noisy_records(load_records(REAL_FAMILYTOOL / "familytool-b.jsonl", "b"))
    e = noisy_records(load_records(REAL_FAMILYTOOL / "familytool-e.jsonl", "e"))
    assert (len(b["no_speaker_tag"]), len(e["no_speaker_tag"])) == (18, 13)
    assert (len(b["gold_key_not_in_doc"]), len(e["gold_key_not_in_doc"])) == (30, 27)
    assert b["jack_mother_alice"] == [330, 335, 370, 390, 395, 400]
    assert b["speaker_not_start"] == [177, 246, 248]


def test_data_sources_give_path_count_and_sha256():
    sources = FAMILYTOOL.data_sources(None)
    assert [s.path.name for s in sources] == [
        "familytool-b.jsonl", "familykg-b.txt", "familytool-e.jsonl", "familykg-e.txt"]
    assert sources[0].records == 6 and sources[0].bundled is True
    assert len(sources[0].sha256) == 64
