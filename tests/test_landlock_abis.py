"""Landlock at each ABI a user's kernel may have, on this machine's newer kernel.

``policy.Landlock`` builds its ruleset for the ABI it finds (the handled rights and the size of
the ruleset's attributes differ: 8 bytes up to ABI 3, 16 from ABI 4 with TCP, 24 from ABI 6
with scoped signals), and users run older kernels than this one: Ubuntu 22.04's 5.15 has ABI 1,
24.04's 6.8 ABI 4. The kernel accepts an older ABI's ruleset, so ``max_abi`` runs each of them
here, in a process of its own (a Landlock domain cannot be left).
"""

from __future__ import annotations

import errno
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_toolbench.sandbox import policy
from sandbox_env import ATTEMPT

REAL_ABI = policy.landlock_abi()

SCRIPT = """
import json, os, socket, sys
from pytest_toolbench.sandbox import policy
ro, own, elsewhere, abi_cap, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
abi, note = policy.Landlock([ro], max_abi=abi_cap).apply(own)
out = {"abi": abi, "note": note}
""" + ATTEMPT + """
attempt("read_ro", lambda: open(os.path.join(ro, "file")).read())
attempt("list_ro", lambda: os.listdir(ro))
attempt("write_own", lambda: open(os.path.join(own, "new"), "w").write("x"))
attempt("read_elsewhere", lambda: open(elsewhere).read())
attempt("write_ro", lambda: open(os.path.join(ro, "new"), "w"))
attempt("truncate_ro", lambda: os.truncate(os.path.join(ro, "file"), 0))
attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
def tcp():  # a plain connect: create_connection imports an encoding, which the ruleset refuses
    with socket.socket() as s:
        s.connect(("127.0.0.1", port))
attempt("tcp_connect", tcp)
print(json.dumps(out))
"""


@pytest.mark.skipif(not REAL_ABI, reason="no Landlock in this kernel")
@pytest.mark.parametrize("abi", range(1, 7))
def test_each_abi_confines_files_and_what_it_adds(tmp_path: Path, abi: int) -> None:
    if abi > REAL_ABI:
        pytest.skip(f"this kernel's Landlock has ABI {REAL_ABI}")
    ro, own = tmp_path / "ro", tmp_path / "own"
    ro.mkdir()
    own.mkdir()
    (ro / "file").write_text("kept")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("secret")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        proc = subprocess.run([sys.executable, "-c", SCRIPT, str(ro), str(own), str(elsewhere), str(abi),
                               str(listener.getsockname()[1])], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["abi"] == abi, got["note"]
    assert got["read_ro"] == got["list_ro"] == got["write_own"] == "ok"
    assert got["read_elsewhere"] == got["write_ro"] == errno.EACCES
    # What each ABI adds (below it, the syscall filter is the line: no sockets, pid rules, and
    # truncation refused without a jail: test_syscall_filter).
    assert got["truncate_ro"] == (errno.EACCES if abi >= 3 else "ok")
    assert got["tcp_connect"] == (errno.EACCES if abi >= 4 else "ok")
    assert got["signal_parent"] == (errno.EPERM if abi >= 6 else "ok")
    assert (ro / "file").read_text() == ("kept" if abi >= 3 else "")
