"""Every data file is parsed once per process and file version (benchmarks/parsed_files.py)."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks.dataset_errors import DatasetError
from pytest_toolbench.benchmarks.metabench import schema as metabench_schema
from pytest_toolbench.benchmarks.metabench.benchmark import METABENCH
from pytest_toolbench.benchmarks.parsed_files import parsed_once

REPO = Path(__file__).resolve().parents[1]


class CountingParser:
    """Lines of a text file as ints; warns on a negative number; counts its calls."""

    def __init__(self) -> None:
        self.calls: list[Path] = []

    def __call__(self, path: Path, scale: int = 1) -> list[int]:
        self.calls.append(path)
        try:
            values = [int(line) * scale for line in path.read_text().split()]
        except ValueError:
            raise DatasetError(path, "not an integer") from None
        if any(v < 0 for v in values):
            warnings.warn(f"{path}: negative value", UserWarning)
        return values


def test_one_parse_per_file_version_whatever_the_spelling(tmp_path: Path, monkeypatch) -> None:
    parser = CountingParser()
    load = parsed_once(parser)
    data = tmp_path / "numbers.txt"
    data.write_text("1\n2\n")
    monkeypatch.chdir(tmp_path)
    assert load(data) == [1, 2]
    assert load("numbers.txt") == [1, 2]  # relative spelling of the same file
    assert load(tmp_path / "." / "numbers.txt") == [1, 2]
    assert len(parser.calls) == 1
    assert load(data, 10) == [10, 20]  # other arguments: another entry
    assert len(parser.calls) == 2


def test_an_edited_or_replaced_file_is_parsed_again(tmp_path: Path) -> None:
    parser = CountingParser()
    load = parsed_once(parser)
    data = tmp_path / "numbers.txt"
    data.write_text("1\n")
    assert load(data) == [1]
    data.write_text("1\n2\n")  # new size
    assert load(data) == [1, 2]
    stat = data.stat()
    data.write_text("3\n4\n")  # same size: the mtime (forced here) tells it apart
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert load(data) == [3, 4]
    before = data.stat()
    with open(data, "r+") as fh:  # the same size, inode and (set back) mtime: only ctime moves
        fh.write("7\n8\n")
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert load(data) == [7, 8]
    replacement = tmp_path / "other.txt"
    replacement.write_text("5\n6\n")
    os.utime(replacement, ns=(stat.st_atime_ns, data.stat().st_mtime_ns))
    replacement.replace(data)  # same size and mtime, new inode
    assert load(data) == [5, 6]
    assert len(parser.calls) == 5


def test_errors_are_not_cached_and_name_the_path_as_given(tmp_path: Path, monkeypatch) -> None:
    parser = CountingParser()
    load = parsed_once(parser)
    monkeypatch.chdir(tmp_path)
    Path("bad.txt").write_text("1\nx\n")
    for _ in range(2):
        with pytest.raises(DatasetError, match=r"^bad\.txt: not an integer"):
            load("bad.txt")
    assert len(parser.calls) == 2
    with pytest.raises(FileNotFoundError):
        load("missing.txt")  # the parser's own error for a missing file


def test_warnings_are_raised_on_every_load_and_lists_are_independent(tmp_path: Path) -> None:
    parser = CountingParser()
    load = parsed_once(parser)
    data = tmp_path / "numbers.txt"
    data.write_text("-1\n2\n")
    for _ in range(3):
        with pytest.warns(UserWarning, match="negative value"):
            values = load(data)
        values.append(99)  # the caller's list, not the cached one
    with pytest.warns(UserWarning):
        assert load(data) == [-1, 2]
    assert len(parser.calls) == 1


def test_meta_bench_parses_each_file_once_for_fingerprint_cases_and_library(
    tmp_path: Path, monkeypatch
) -> None:
    """data_sources (fingerprint), load_cases and the retriever's library used to parse every
    dialogue file again each; now the three share one parse."""
    shutil.copytree(REPO / "data" / "metabench", tmp_path / "metabench")  # a version no test read
    parsed: list[str] = []
    real = metabench_schema.parse_dialogue

    def counting(raw, path, origin, index, line=None):
        parsed.append(f"{origin}:{index}")
        return real(raw, path, origin, index, line)

    monkeypatch.setattr(metabench_schema, "parse_dialogue", counting)
    sources = METABENCH.data_sources(tmp_path)
    first = len(parsed)
    assert first > 0 and len(set(parsed)) == first
    cases = METABENCH.load_cases(tmp_path, METABENCH.scenarios)
    dialogues = METABENCH.load_dialogues(tmp_path)
    assert len(parsed) == first  # no second parse
    assert cases and len(dialogues) == sum(s.records for s in sources if s.path.suffix == ".jsonl")


def test_file_checksums_are_computed_once_per_version(tmp_path: Path, monkeypatch) -> None:
    """The run's fingerprint (start) and the report's checksums (end) hash the same files once;
    an edit changes the checksum."""
    import hashlib

    from pytest_toolbench.benchmarks import data_source

    data = tmp_path / "data.json"
    data.write_text("[1]")
    first = data_source.file_sha256(data)
    assert first == hashlib.sha256(b"[1]").hexdigest()
    opened: list[str] = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: opened.append(str(p)) or real_open(p, *a, **k))
    assert data_source.file_sha256(tmp_path / "." / "data.json") == first
    assert opened == []
    data.write_text("[1, 2]")
    assert data_source.file_sha256(data) == hashlib.sha256(b"[1, 2]").hexdigest()
    assert opened == [str(data.resolve())]


def test_workers_read_what_the_controller_parsed(tmp_path: Path) -> None:
    """Under xdist the controller keeps each parsed file for its workers; a worker reads it
    (warnings included) instead of parsing; an edited file, or a kept file that cannot be read
    back, is parsed; the controller's folder goes at the run's end."""
    from pytest_toolbench.benchmarks import parsed_files

    data = tmp_path / "numbers.txt"
    data.write_text("1\n-2\n")
    controller_parser = CountingParser()
    folder = parsed_files.share_parsed_files()
    try:
        with pytest.warns(UserWarning, match="negative value"):
            assert parsed_once(controller_parser)(data, 3) == [3, -6]
        kept = list(folder.glob("*.pickle"))
        assert len(kept) == 1 and not list(folder.glob("*.part"))
        assert parsed_files.shared_folder() == folder
        parsed_files._shared[0] = None  # the worker below is another process: forget, keep the folder

        worker_parser = CountingParser()
        worker_parser.__qualname__ = "CountingParser"  # both "processes" name their parser alike
        controller_parser.__qualname__ = "CountingParser"
        parsed_files.read_shared_parsed_files(folder)
        assert parsed_files.shared_folder() is None  # a worker keeps nothing for others
        with pytest.warns(UserWarning, match="negative value"):
            assert parsed_once(worker_parser)(data, 3) == [3, -6]
        assert worker_parser.calls == []  # read, not parsed
        with pytest.warns(UserWarning):
            assert parsed_once(worker_parser)(data, 2) == [2, -4]  # other arguments: parsed
        assert len(worker_parser.calls) == 1

        kept[0].write_bytes(b"not a pickle")
        with pytest.warns(UserWarning):
            assert parsed_once(worker_parser)(data, 3) == [3, -6]
        assert len(worker_parser.calls) == 2
        data.write_text("4\n")  # edited since the controller parsed it
        os.utime(data, ns=(1, 1))
        assert parsed_once(worker_parser)(data, 3) == [12]
        assert len(worker_parser.calls) == 3
    finally:
        parsed_files.stop_sharing()
    assert folder.exists()  # a worker does not remove the controller's folder
    parsed_files._shared[0] = (folder, True)
    parsed_files.stop_sharing()
    assert not folder.exists()


@pytest.mark.parametrize("swap", ["widened", "link", "not_a_folder", "other_owner"])
def test_a_worker_unpickles_nothing_from_a_folder_others_could_write(
    tmp_path: Path, swap: str
) -> None:
    """The folder a worker is given must be the controller's private one; a folder others may
    write to, a link, or another user's folder is ignored (a pickle there would run code): the
    worker parses the file itself."""
    from pytest_toolbench.benchmarks import parsed_files

    if swap == "other_owner" and os.geteuid() != 0:
        pytest.skip("only root can give a folder to another user")
    data = tmp_path / "numbers.txt"
    data.write_text("5\n")
    parser = CountingParser()
    folder = parsed_files.share_parsed_files()
    try:
        assert parsed_once(parser)(data) == [5]
        (kept,) = folder.glob("*.pickle")
        ran = tmp_path / "ran"

        class Payload:
            def __reduce__(self):
                return (Path.touch, (ran,))

        kept.write_bytes(pickle.dumps((Payload(), ())))
        parsed_files._shared[0] = None  # as a worker would start: another process
        given = folder
        if swap == "widened":
            folder.chmod(0o777)
        elif swap == "link":
            given = tmp_path / "link"
            given.symlink_to(folder)
        elif swap == "not_a_folder":
            given = kept
        else:
            os.chown(folder, 65534, 65534)
        parsed_files.read_shared_parsed_files(given)
        assert parsed_files._shared[0] is None
        worker = CountingParser()
        assert parsed_once(worker)(data) == [5]
        assert len(worker.calls) == 1 and not ran.exists()

        if swap == "widened":  # the same folder, private again: used (the check is not too strict)
            folder.chmod(0o700)
            parsed_files.read_shared_parsed_files(folder)
            assert parsed_files._shared[0] == (folder, False)
    finally:
        parsed_files._shared[0] = (folder, True)
        parsed_files.stop_sharing()


def test_a_killed_controllers_folder_is_removed_by_the_next_one(tmp_path: Path, monkeypatch) -> None:
    """A controller SIGKILLed mid-run cannot remove its folder of parsed files; the next
    controller does, before making its own, and never touches a live run's folder."""
    from pytest_toolbench.benchmarks import parsed_files

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    script = ("import sys, time\n"
              "from pytest_toolbench.benchmarks import parsed_files\n"
              "print(parsed_files.share_parsed_files(), flush=True)\n"
              "time.sleep(60)\n")
    killed = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
    live = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        dead_folder = Path(killed.stdout.readline().strip())
        live_folder = Path(live.stdout.readline().strip())
        (dead_folder / "items.pickle").write_bytes(b"x" * 1000)
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        assert dead_folder.exists()  # nobody removed it
        mine = parsed_files.share_parsed_files()
        try:
            assert not dead_folder.exists(), "the killed controller's folder is still there"
            assert live_folder.exists(), "a live run's folder was removed"
            assert mine.parent == tmp_path and mine.name.startswith(parsed_files.FOLDER_PREFIX)
        finally:
            parsed_files.stop_sharing()
        assert not mine.exists()
    finally:
        for proc in (killed, live):
            proc.kill()
            proc.wait(10)


# --- kept between runs ---------------------------------------------------------------------------

@pytest.fixture
def kept_folder(tmp_path: Path):
    """This user's folder of parsed files kept between runs, under a fresh cache folder."""
    from pytest_toolbench.benchmarks import parsed_files

    folder = parsed_files.keep_parsed_files(tmp_path / "cache")
    assert folder == tmp_path / "cache" / "parsed" / f"u{os.geteuid()}"
    try:
        yield folder
    finally:
        parsed_files.stop_keeping()


def test_a_later_run_reads_the_kept_parse_with_its_warnings(tmp_path: Path, kept_folder: Path) -> None:
    data = tmp_path / "numbers.txt"
    data.write_text("1\n-2\n")
    first = CountingParser()
    with pytest.warns(UserWarning, match="negative value"):
        assert parsed_once(first)(data, 3) == [3, -6]
    assert len(first.calls) == 1
    assert (kept_folder.stat().st_mode & 0o777) == 0o700
    assert len(list(kept_folder.glob("*.pickle"))) == 1
    later = CountingParser()  # a new process: its own memo, same parser name
    with pytest.warns(UserWarning, match="negative value"):
        assert parsed_once(later)(tmp_path / "." / "numbers.txt", 3) == [3, -6]
    assert later.calls == []
    with pytest.warns(UserWarning):
        assert parsed_once(later)(data, 2) == [2, -4]  # other arguments: parsed, kept apart
    assert len(later.calls) == 1 and len(list(kept_folder.glob("*.pickle"))) == 2


def test_a_kept_parse_is_redone_after_an_edit_or_a_code_change(
    tmp_path: Path, kept_folder: Path, monkeypatch
) -> None:
    from pytest_toolbench.benchmarks import parsed_files

    data = tmp_path / "numbers.txt"
    data.write_text("1\n2\n")
    assert parsed_once(CountingParser())(data) == [1, 2]
    before = data.stat()
    with open(data, "r+") as fh:  # the same size, inode and (set back) mtime: only ctime moves
        fh.write("3\n4\n")
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    later = CountingParser()
    assert parsed_once(later)(data) == [3, 4]
    assert len(later.calls) == 1
    assert len(list(kept_folder.glob("*.pickle"))) == 1  # replaced, not added
    assert parsed_once(again := CountingParser())(data) == [3, 4] and again.calls == []
    monkeypatch.setattr(parsed_files, "code_identity", lambda: "another version of the package")
    edited = CountingParser()
    assert parsed_once(edited)(data) == [3, 4]
    assert len(edited.calls) == 1


def test_code_identity_moves_with_any_module_of_the_package(tmp_path: Path, monkeypatch) -> None:
    from pytest_toolbench.benchmarks import parsed_files

    package = tmp_path / "pkg"
    (package / "benchmarks").mkdir(parents=True)
    (package / "__init__.py").write_text("__version__ = '1'\n")
    module = package / "benchmarks" / "schema.py"
    module.write_text("X = 1\n")
    fake = type(sys)("pytest_toolbench")
    fake.__file__, fake.__version__ = str(package / "__init__.py"), "1"
    monkeypatch.setitem(sys.modules, "pytest_toolbench", fake)
    identities = []
    for text in ("X = 1\n", "X = 22\n"):
        module.write_text(text)
        parsed_files.code_identity.cache_clear()
        identities.append(parsed_files.code_identity())
    parsed_files.code_identity.cache_clear()
    assert identities[0] != identities[1]


def test_errors_are_not_kept(tmp_path: Path, kept_folder: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("x\n")
    for _ in range(2):
        parser = CountingParser()
        with pytest.raises(DatasetError, match="not an integer"):
            parsed_once(parser)(bad)
        assert len(parser.calls) == 1
    assert list(kept_folder.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere; the modes are what is checked")
def test_nothing_is_unpickled_from_a_kept_file_or_folder_others_could_write(
    tmp_path: Path, kept_folder: Path
) -> None:
    from pytest_toolbench.benchmarks import parsed_files

    data = tmp_path / "numbers.txt"
    data.write_text("5\n")
    assert parsed_once(CountingParser())(data) == [5]
    (kept,) = kept_folder.glob("*.pickle")
    kept.chmod(0o666)  # anyone could have put a pickle here
    parser = CountingParser()
    assert parsed_once(parser)(data) == [5]
    assert len(parser.calls) == 1
    parsed_files.stop_keeping()
    kept_folder.chmod(0o777)
    assert parsed_files.keep_parsed_files(tmp_path / "cache") is None  # not private: not used
    kept_folder.chmod(0o700)
    link_cache = tmp_path / "link-cache"
    (link_cache / "parsed").mkdir(parents=True)
    (link_cache / "parsed" / f"u{os.geteuid()}").symlink_to(kept_folder)
    assert parsed_files.keep_parsed_files(link_cache) is None  # a link: not used


def test_a_kept_file_others_own_is_not_unpickled(tmp_path: Path, kept_folder: Path, monkeypatch) -> None:
    """As root (who may write anywhere) the owner check is what guards: a kept file whose owner
    is not this user is parsed again, never loaded."""
    from pytest_toolbench.benchmarks import parsed_files

    data = tmp_path / "numbers.txt"
    data.write_text("6\n")
    assert parsed_once(CountingParser())(data) == [6]
    monkeypatch.setattr(parsed_files.os, "geteuid", lambda: os.getuid() + 12345)
    parser = CountingParser()
    assert parsed_once(parser)(data) == [6]
    assert len(parser.calls) == 1


def test_the_kept_folder_is_bounded_least_recently_used_first(
    tmp_path: Path, kept_folder: Path, monkeypatch
) -> None:
    from pytest_toolbench.benchmarks import parsed_files

    files = []
    for i in range(3):
        files.append(tmp_path / f"n{i}.txt")
        files[-1].write_text("\n".join(["7"] * 200))
        assert parsed_once(CountingParser())(files[-1])[:1] == [7]
    kept = sorted(kept_folder.glob("*.pickle"), key=lambda f: f.stat().st_mtime_ns)
    size = kept[0].stat().st_size
    for age, f in enumerate(reversed(kept)):  # n0 newest, n2 oldest by use
        os.utime(f, ns=(1, 10**18 - age * 10**9))
    monkeypatch.setattr(parsed_files, "KEPT_MAX_BYTES", 3 * size + size // 2)
    files.append(tmp_path / "n3.txt")
    files[-1].write_text("\n".join(["8"] * 200))
    assert parsed_once(CountingParser())(files[-1])[:1] == [8]
    assert len(list(kept_folder.glob("*.pickle"))) == 3
    assert not kept[0].exists()  # the least recently used went


def test_prune_lists_and_removes_kept_parsed_files(tmp_path: Path, kept_folder: Path) -> None:
    from pytest_toolbench.runs import prune

    data = tmp_path / "numbers.txt"
    data.write_text("1\n")
    assert parsed_once(CountingParser())(data) == [1]
    (kept,) = kept_folder.glob("*.pickle")
    os.utime(kept, (1_000, 1_000))
    items = prune.collect(tmp_path / "cache", tmp_path / "runs")
    assert [i.path for i in items] == [kept]
    removed = prune.plan(items, older_than_s=86400, max_size=None)
    assert "1 kept parsed data file" in prune.describe(removed, items, dry_run=True)
    prune.apply(removed, tmp_path / "cache")
    assert not kept.exists()


def test_a_run_keeps_its_parsed_data_for_the_next(tmp_path: Path) -> None:
    """The ToolHop suite's own run keeps the data it parsed in its cache folder, and a second run
    over the same data scores the same."""
    cache = tmp_path / "cache"
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider", "-q",
           "-p", "no:randomly", "-n", "0", "--model", "oracle", "--cache-dir", str(cache),
           "--runs-dir", str(tmp_path / "runs"), "--scenario", "direct"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    outs = []
    for _ in range(2):
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        outs.append(proc.stdout.splitlines()[-1].split(" in ")[0])
        kept = list((cache / "parsed" / f"u{os.geteuid()}").glob("*.pickle"))
        assert len(kept) == 1
    assert outs[0] == outs[1] and "passed" in outs[0]
    no_cache = tmp_path / "no-cache"
    proc = subprocess.run([*cmd, "--no-cache", "--cache-dir", str(no_cache)], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and not no_cache.exists()  # --no-cache: nothing written there
