"""An output named by a device, a FIFO or a stream (`--toolbench-json /dev/null`,
`--toolbench-md /dev/stdout`, `toolbench finish --junitxml /dev/stdout`) is written through, never
replaced: the atomic write's rename made /dev/null, as root, a regular file holding a report
(found with a copy of /dev/null made by mknod), and a summary sent to /dev/stdout was overwritten
in a log file by the next line the run printed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from pytest_toolbench.fileio import atomic_write_bytes
from pytest_toolbench.output_paths import OutputPathsError, check_output_paths
from pytest_toolbench.output_streams import writes_in_place

REPO = Path(__file__).resolve().parents[1]


def test_a_fifo_is_written_through_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    atomic_write_bytes(fifo, b"report\n")
    reader.join(10)
    assert got == [b"report\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary file left


def test_what_is_written_through_and_what_is_replaced(tmp_path):
    plain = tmp_path / "r.json"
    assert not writes_in_place(plain)
    plain.write_text("old")
    assert not writes_in_place(plain)  # a plain file: replaced whole, as before
    for path in ("/dev/null", "/dev/stdout", "/proc/self/fd/1", "/dev/fd/2"):
        assert writes_in_place(path), path
    if Path("/dev/shm").is_dir():  # a tmpfs users write plain files to: they stay plain files
        assert not writes_in_place("/dev/shm/toolbench-no-such-report.json")


SCRIPT = """
import sys
from pytest_toolbench.fileio import atomic_write_bytes
print("before", flush=True)
atomic_write_bytes(sys.argv[1], b"REPORT\\n")
print("after", flush=True)
"""


@pytest.mark.parametrize("stream", ["/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"])
def test_dev_stdout_redirected_to_a_log_file_keeps_every_line_in_order(tmp_path, stream):
    """As a shell's `> log`: the report lands where the process prints, between its lines; a
    file opened anew through /dev/stdout had its own offset, and "after" overwrote it."""
    log = tmp_path / "log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "-c", SCRIPT, stream], stdout=out, check=True, cwd=REPO,
                       timeout=60)
    assert log.read_text() == "before\nREPORT\nafter\n"


def test_dev_null_is_an_output_any_user_may_name(tmp_path):
    # the folder /dev is not writable for a user, and is never written: not a reason to refuse
    check_output_paths([("--toolbench-json", Path("/dev/null")), ("--toolbench-md", Path("/dev/null"))], [])
    with pytest.raises(OutputPathsError, match="cannot be written"):  # no descriptor 999 open
        check_output_paths([("--toolbench-json", Path("/dev/fd/999"))], [])


def test_a_run_sends_its_summary_to_dev_stdout_and_dev_null_stays_a_device(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/toolhop", "--model", "oracle", "--data", "sample",
         "--scenario", "direct", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--runs-dir", str(tmp_path / "runs"), "--no-cache", "--toolbench-md", "/dev/stdout",
         "--toolbench-json", "/dev/null"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "## pytest-toolbench: oracle" in proc.stdout and "| toolhop | direct | accuracy |" in proc.stdout
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    # the plots, beside a JSON report in a file, go to the run's folder: /dev/null has none
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert list((run_dir / "plots").glob("*.png")) and not Path("/dev/null.plots").exists()


JUNIT = """
from pathlib import Path
from pytest_toolbench.report.junit_finish import write_killed_run_junit
from pytest_toolbench.results.run_record import RunInfo, RunMetrics, RunRecord
record = RunRecord.build(run=RunInfo(partial=True, missing_cases=["a"]),
                         metrics=RunMetrics(scenarios=[]), cases=[])
print("before", flush=True)
write_killed_run_junit(Path("/dev/stdout"), record, {"a": "suites/toolhop/test_toolhop.py::test_toolhop[a]"},
                       not_run_message="not run: the run was interrupted (killed)")
print("after", flush=True)
"""


def test_finish_junit_to_dev_stdout_is_printed_where_the_command_prints(tmp_path):
    log = tmp_path / "log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "-c", JUNIT], stdout=out, check=True, cwd=REPO, timeout=60)
    text = log.read_text()
    assert text.startswith("before\n<?xml") and text.endswith("</testsuites>after\n"), text
    assert 'name="test_toolhop[a]"' in text and "not run: the run was interrupted" in text
    assert not list(Path(tempfile.gettempdir()).glob(".stdout.*.tmp"))


def test_a_recording_must_be_a_plain_file(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/toolhop", "--model", "oracle", "--data", "sample",
         "-q", "-p", "no:cacheprovider", "--runs-dir", str(tmp_path / "runs"), "--no-cache",
         "--record", "/dev/stdout"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4
    assert ("--record /dev/stdout: a recording must be a plain file (every process appends to "
            "it, under a lock beside it)") in proc.stderr
