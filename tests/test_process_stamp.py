"""A pid reused by another process (after a reboot, on a long-lived CI host) is not taken for the
run that recorded it: the run reads as killed, and `toolbench finish` scores it, where it read as
running for good and nothing, --force included, would finish it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_toolbench.process_stamp import process_stamp, same_process
from pytest_toolbench.runs.record import RunIndex, RunStart, read_index, write_index
from pytest_toolbench.session.killed_run import finish_killed_run

linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@linux_only
def test_a_stamp_names_one_process_even_with_parentheses_in_its_name(tmp_path):
    odd = tmp_path / "a) b (c"  # the command name /proc/PID/stat shows in parentheses
    odd.symlink_to(sys.executable)
    child = subprocess.Popen([str(odd), "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.2)
        stamp = process_stamp(child.pid)
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        assert stamp is not None and stamp.startswith(f"{boot}/") and stamp.split("/")[1].isdigit()
        assert stamp != process_stamp() and process_stamp(child.pid) == stamp
        assert same_process(child.pid, stamp) and not same_process(child.pid, process_stamp())
    finally:
        child.kill()
        child.wait()
    assert process_stamp(child.pid) is None  # gone: not known, so not told apart
    assert same_process(os.getpid(), None)  # a run recorded before stamps: as before


def _running(run_dir: Path, stamp: str | None) -> None:
    """A run.json as a run's start writes it, its pid this (live) process's."""
    run_dir.mkdir(parents=True)
    write_index(run_dir, RunIndex(run_id=run_dir.name, status="running", partial=True,
                                  started=time.time(), pid=os.getpid(), pid_stamp=stamp,
                                  host=socket.gethostname(), start=RunStart(settings={"model": "m"})))


@linux_only
def test_a_run_whose_pid_now_names_another_process_reads_as_killed(tmp_path):
    _running(tmp_path / "live", process_stamp())
    assert read_index(tmp_path / "live").status == "running"  # type: ignore[union-attr]
    _running(tmp_path / "reused", f"{process_stamp().split('/')[0]}/1")  # type: ignore[union-attr]
    assert read_index(tmp_path / "reused").status == "incomplete"  # type: ignore[union-attr]
    done = finish_killed_run(tmp_path / "reused")
    assert done.index.status == "interrupted" and done.index.pid is None
    assert done.index.pid_stamp is None
