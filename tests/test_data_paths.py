"""A data folder or file that cannot be read says why, naming it, in every benchmark's loader:
not "no *.json files" for a folder this user may not list, nor "not found" for a symlink loop
or a directory where the file goes (benchmarks/data_paths.py)."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks import data_paths
from pytest_toolbench.benchmarks.data_source import BUNDLED_DATA_DIR
from pytest_toolbench.benchmarks.dataset_errors import DatasetError
from pytest_toolbench.benchmarks.familytool.kg import load_triples
from pytest_toolbench.benchmarks.familytool.schema import load_records
from pytest_toolbench.benchmarks.metabench.schema import load_dialogues
from pytest_toolbench.benchmarks.toolbehonest.schema import data_file
from pytest_toolbench.benchmarks.toolhop.schema import load_toolhop_dir_entries

#: benchmark folder, the file broken in it, what its loader calls it, the loader (folder -> ...)
LOADERS: list[tuple[str, str, str, Callable[[Path], object]]] = [
    ("toolhop", "ToolHop.json", "ToolHop data file", load_toolhop_dir_entries),
    ("familytool", "familytool-b.jsonl", "FamilyTool data file",
     lambda d: load_records(d / "familytool-b.jsonl", "b")),
    ("familytool", "familykg-b.txt", "FamilyTool KG file",
     lambda d: load_triples(d / "familykg-b.txt")),
    ("toolbehonest", "sample_en.json", "ToolBeHonest data file", lambda d: data_file(d, "en")),
    ("metabench", "sample.jsonl", "Meta-Bench dialogue file", load_dialogues),
]
IDS = [f"{bench}-{name}" for bench, name, _, _ in LOADERS]


def _copy(tmp_path: Path, bench: str) -> Path:
    folder = tmp_path / bench
    shutil.copytree(BUNDLED_DATA_DIR / bench, folder)
    return folder


@pytest.mark.parametrize(("bench", "name", "what", "load"), LOADERS, ids=IDS)
def test_a_symlink_loop_is_called_one(tmp_path, bench, name, what, load) -> None:
    folder = _copy(tmp_path, bench)
    (folder / name).unlink()
    (folder / name).symlink_to(name)
    with pytest.raises(DatasetError) as info:
        load(folder)
    assert str(info.value) == (f"{folder / name}: cannot read the {what} (a symlink loop: "
                               "Too many levels of symbolic links)")


@pytest.mark.parametrize(("bench", "name", "what", "load"), LOADERS, ids=IDS)
def test_a_directory_where_the_file_goes_is_called_one(tmp_path, bench, name, what, load) -> None:
    folder = _copy(tmp_path, bench)
    (folder / name).unlink()
    (folder / name).mkdir()
    with pytest.raises(DatasetError) as info:
        load(folder)
    assert str(info.value) == f"{folder / name}: the {what} is a directory"


def _denied(monkeypatch: pytest.MonkeyPatch, target: Path, name: str) -> None:
    """``os.<name>`` on ``target`` fails with EACCES (as chmod 000 does, for anyone but root)."""
    real = getattr(os, name)

    def fake(path, *args, **kwargs):
        if Path(path) == target:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(data_paths.os, name, fake)


@pytest.mark.parametrize(("bench", "name", "what", "load"), LOADERS, ids=IDS)
def test_an_unreadable_file_is_permission_denied(tmp_path, monkeypatch, bench, name, what,
                                                 load) -> None:
    folder = _copy(tmp_path, bench)
    _denied(monkeypatch, folder / name, "open")
    with pytest.raises(DatasetError) as info:
        load(folder)
    assert str(info.value) == f"{folder / name}: cannot read the {what} (Permission denied)"


@pytest.mark.parametrize(("bench", "what", "load"), [
    ("toolhop", "ToolHop data directory", load_toolhop_dir_entries),
    ("toolbehonest", "ToolBeHonest data directory", lambda d: data_file(d, "en")),
    ("metabench", "Meta-Bench data directory", load_dialogues),
])
def test_a_folder_that_cannot_be_listed_is_permission_denied(tmp_path, monkeypatch, bench, what,
                                                             load) -> None:
    folder = _copy(tmp_path, bench)
    _denied(monkeypatch, folder, "scandir")
    with pytest.raises(DatasetError) as info:
        load(folder)
    assert str(info.value) == f"{folder}: cannot list the {what} (Permission denied)"
