"""Bootstrap estimates kept between runs (results/estimate_memo.py): a kept estimate is the very
one computing gives, anything that decides an estimate is in its key, and nothing planted,
torn or stale is read back as an interval."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_toolbench.results import estimate_memo
from pytest_toolbench.results.bootstrap import bootstrap_mean, bootstrap_ratio

VALUES = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.25, 1.0]
NUM, DEN = [1.0, 2.0, 0.0, 3.0, 1.0], [2.0, 2.0, 1.0, 4.0, 0.0]


def memo_file(cache: Path) -> Path:
    return cache / estimate_memo.FOLDER / f"u{os.geteuid()}" / estimate_memo.FILE


def test_a_kept_estimate_is_the_computed_one_and_is_read_back(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    computed = (bootstrap_mean(VALUES, n_boot=500, seed=1), bootstrap_ratio(NUM, DEN, n_boot=500))
    with estimate_memo.kept(cache) as first:
        assert first is not None
        assert (bootstrap_mean(VALUES, n_boot=500, seed=1), bootstrap_ratio(NUM, DEN, n_boot=500)) == computed
        assert first.hits == 0
    assert (memo_file(cache).parent.stat().st_mode & 0o777) == 0o700
    with estimate_memo.kept(cache) as second:
        again = (bootstrap_mean(VALUES, n_boot=500, seed=1), bootstrap_ratio(NUM, DEN, n_boot=500))
        assert second is not None and second.hits == 2
    assert again == computed
    assert all(isinstance(x, float) for est in again for x in est[:3]) and again[0].n == len(VALUES)


@pytest.mark.parametrize("change", [
    {"values": [*VALUES[:-1], 0.9999999999999999]},  # one value, one bit
    {"values": VALUES[:-1]},
    {"n_boot": 501}, {"seed": 2}, {"confidence": 0.9},
])
def test_anything_that_decides_an_estimate_is_in_its_key(tmp_path: Path, change: dict) -> None:
    base = {"values": VALUES, "n_boot": 500, "seed": 1, "confidence": 0.95}
    with estimate_memo.kept(tmp_path):
        bootstrap_mean(base["values"], n_boot=500, seed=1, confidence=0.95)
    args = {**base, **change}
    values = args.pop("values")
    with estimate_memo.kept(tmp_path) as memo:
        got = bootstrap_mean(values, **args)
        assert memo is not None and memo.hits == 0
    assert got == bootstrap_mean(values, **args)


def test_a_mean_and_a_ratio_never_share_a_key() -> None:
    keys = {estimate_memo.input_key("mean", ([1.0, 2.0],), 10, 0, 0.95),
            estimate_memo.input_key("ratio", ([1.0, 2.0], []), 10, 0, 0.95),
            estimate_memo.input_key("ratio", ([1.0], [2.0]), 10, 0, 0.95),
            estimate_memo.input_key("ratio", ([1.0, 2.0], [1.0]), 10, 0, 0.95)}
    assert len(keys) == 4 and None not in keys


def test_nan_and_undefined_estimates_come_back_as_computed(tmp_path: Path) -> None:
    for _ in range(2):
        with estimate_memo.kept(tmp_path):
            nan_mean = bootstrap_mean([float("nan"), 1.0])
            undefined = bootstrap_ratio([1.0, 2.0], [0.0, 0.0])
            empty = bootstrap_mean([])
    assert all(math.isnan(x) for x in nan_mean[:3]) and nan_mean.n == 2
    assert undefined == (None, None, None, 2) and empty == (None, None, None, 0)


def test_arrays_already_in_numpy_are_computed_not_kept(tmp_path: Path) -> None:
    with estimate_memo.kept(tmp_path) as memo:
        bootstrap_mean(np.asarray(VALUES))
        assert memo is not None and memo.entries == {}


def test_a_cached_re_run_of_the_estimates_does_not_import_numpy(tmp_path: Path) -> None:
    code = f"""
import sys
from pytest_toolbench.results import estimate_memo
from pytest_toolbench.results.bootstrap import bootstrap_mean, bootstrap_ratio
with estimate_memo.kept({str(tmp_path)!r}) as memo:
    est = (bootstrap_mean({VALUES!r}), bootstrap_ratio({NUM!r}, {DEN!r}))
print(repr(est), memo.hits, "numpy" in sys.modules)
"""
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            for _ in range(2)]
    first, second = (r.stdout.split() for r in runs)
    assert first[-2:] == ["0", "True"]  # computed, with numpy
    assert second[-2:] == ["2", "False"]  # read back, numpy never imported
    assert first[:-2] == second[:-2]


def test_another_numpy_or_an_edited_bootstrap_drops_what_was_kept(tmp_path: Path, monkeypatch) -> None:
    with estimate_memo.kept(tmp_path):
        bootstrap_mean(VALUES)
    stamp = estimate_memo.code_stamp()
    assert any(str(part).endswith(os.path.join("numpy", "version.py")) for part in stamp)
    assert any(str(part).endswith(os.path.join("results", "bootstrap.py")) for part in stamp)
    monkeypatch.setattr(estimate_memo, "code_stamp", lambda: [*stamp[:-1], stamp[-1] + 1])
    with estimate_memo.kept(tmp_path) as memo:
        assert memo is not None and memo.entries == {}
        bootstrap_mean(VALUES)
        assert memo.hits == 0


@pytest.mark.parametrize("content", [b"", b"{not json", b"[1, 2]", b'{"stamp": 1}',
                                     b'{"stamp": null, "entries": {"k": [1, 2]}}'])
def test_a_torn_or_foreign_file_reads_as_empty_and_is_rewritten(tmp_path: Path, content: bytes) -> None:
    with estimate_memo.kept(tmp_path):
        pass
    file = memo_file(tmp_path)
    file.write_bytes(content)
    with estimate_memo.kept(tmp_path) as memo:
        assert memo is not None and memo.entries == {}
        assert bootstrap_mean(VALUES) == bootstrap_mean(VALUES, n_boot=2000)
    assert json.loads(file.read_text())["stamp"] == estimate_memo.code_stamp()


def test_nothing_is_read_from_a_file_or_folder_others_could_write(tmp_path: Path) -> None:
    with estimate_memo.kept(tmp_path):
        real = bootstrap_mean(VALUES)
    file = memo_file(tmp_path)
    document = json.loads(file.read_text())
    document["entries"] = {k: [0.5, 0.0, 1.0, 8] for k in document["entries"]}  # a planted interval
    file.write_text(json.dumps(document))
    file.chmod(0o666)
    with estimate_memo.kept(tmp_path) as memo:
        assert bootstrap_mean(VALUES) == real and memo is not None and memo.hits == 0
    file.parent.chmod(0o777)
    try:
        with estimate_memo.kept(tmp_path) as memo:
            assert memo is None  # the folder is not this user's alone: nothing kept
            assert bootstrap_mean(VALUES) == real
    finally:
        file.parent.chmod(0o700)


def test_the_file_keeps_the_most_recently_used_estimates(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(estimate_memo, "MAX_ENTRIES", 3)
    for seed in range(4):
        with estimate_memo.kept(tmp_path):
            bootstrap_mean(VALUES, n_boot=50, seed=seed)
    with estimate_memo.kept(tmp_path) as memo:
        bootstrap_mean(VALUES, n_boot=50, seed=1)  # used again: now the most recent
    with estimate_memo.kept(tmp_path):
        bootstrap_mean(VALUES, n_boot=50, seed=9)
    with estimate_memo.kept(tmp_path) as memo:
        assert memo is not None and len(memo.entries) == 3
        for seed in (1, 3, 9):
            bootstrap_mean(VALUES, n_boot=50, seed=seed)
        assert memo.hits == 3


def test_a_scoring_that_fails_keeps_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError), estimate_memo.kept(tmp_path):
        bootstrap_mean(VALUES)
        bootstrap_ratio([1.0], [1.0, 2.0])  # shapes differ
    assert not memo_file(tmp_path).exists()
    assert estimate_memo.active() is None


def test_without_a_cache_folder_nothing_is_kept(tmp_path: Path) -> None:
    with estimate_memo.kept(None) as memo:
        assert memo is None and estimate_memo.active() is None
        assert bootstrap_mean(VALUES) == bootstrap_mean(VALUES)
