"""Starting the shared SDK process (server.py), with nothing but the standard library.

Why a module of its own: the first request of a run cannot leave before the SDK process has
imported openai. The earlier the process starts, the less of that the run waits for. With only
the standard library imported here, the plugin can start it at the top of its own import, before
pydantic, the SDK models and the other plugins are loaded.

At import time pytest has parsed nothing, so :func:`command_line_wants_sdk` guesses from the raw
command line. The guess decides nothing: ``pytest_configure`` (session/sdk.py) decides once, from
the run's settings, keeping the process, stopping it, or starting one the guess missed.
"""

from __future__ import annotations

import atexit
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from pytest_toolbench import owned_folders  # the standard library only
from pytest_toolbench.defaults import DEFAULT_CACHE_DIR, nearest  # the standard library only

#: The SDK process's log, beside its socket in its temporary folder (protocol.py re-exports it).
LOG_NAME = "sdk.log"

#: Flags after which a pytest command only shows information (collects, or prints help): the
#: raw-argument spelling of session/listing.py's modes, which configure decides by (that module
#: imports pytest, which this one must not).
_INFO_FLAGS = frozenset({
    "--collect-only", "--collectonly", "--co", "-h", "--help", "--version", "-V",
    "--fixtures", "--funcargs", "--fixtures-per-test", "--markers",
    "--setup-plan", "--setupplan", "--cache-show",
})


#: The server's flag: import the SDK on the first request, not at start (see :class:`SdkProcess`).
IMPORT_ON_FIRST_CALL = "--import-on-first-call"


def cache_holds_replies(cache_dir: str | os.PathLike[str]) -> bool:
    """Whether the response cache folder holds anything (one directory read): a run there may be
    answered from it, in whole or in part."""
    try:
        with os.scandir(cache_dir) as entries:
            return any(True for _ in entries)
    except OSError:  # missing or unreadable: nothing to answer from
        return False


class SdkProcess:
    """The run's SDK process (controller side): start, address, stop.

    ``import_sdk_at_start``: whether it imports the SDK (openai, aiohttp: ~1 s of CPU) before it
    listens, so a first request does not wait for it. False where the run's cache already holds
    replies: a re-run answered from it sends no request, and that import was most of its extra
    CPU (a fully cached 1,000-case ToolHop re-run: ~1.2 s of its ~4.4 s); the process then
    imports the SDK on its first request. Either way a request's failures (an unreachable
    endpoint, a bad key) are reported alike, by the first request that meets them."""

    def __init__(self, *, import_sdk_at_start: bool = True) -> None:
        # Its folder's lock is held here and by the SDK process: a later run removes the folder
        # (socket and log) only once both are gone, e.g. SIGKILLed together with their group.
        folder, self._lock_fd = owned_folders.claim_folder(tempfile.gettempdir(), FOLDER_PREFIX)
        if len(folder) > 80:  # a Unix socket path is limited to ~107 bytes
            owned_folders.release_folder(folder, self._lock_fd)
            folder, self._lock_fd = owned_folders.claim_folder("/tmp", FOLDER_PREFIX)
        self.folder = Path(folder)
        self.socket_path = str(self.folder / "sdk.sock")
        self.log_path = self.folder / LOG_NAME
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pytest_toolbench.models.sdk_process.server", self.socket_path,
                 *(() if import_sdk_at_start else (IMPORT_ON_FIRST_CALL,))],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, pass_fds=(self._lock_fd,),
            )

    def address(self) -> dict[str, Any]:
        """What a pytest process needs to reach it (JSON, for xdist's workerinput)."""
        return {"socket": self.socket_path, "pid": self.proc.pid, "log": str(self.log_path)}

    def stop(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()  # its signal to finish
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        # The socket, the log (it only matters after a crash) and the lock file, then the lock.
        owned_folders.release_folder(str(self.folder), self._lock_fd)
        self._lock_fd = -1


#: Name of every SDK process folder (``<tempdir>/toolbench-sdk-*``), which the sweep knows.
FOLDER_PREFIX = "toolbench-sdk-"


def names_suites(arg: str) -> bool:
    """Whether a pytest path argument targets benchmark suites (``suites/...``, or a folder that
    holds ``suites/``)."""
    path = Path(arg.split("::")[0]).resolve()
    return "suites" in path.parts or (path / "suites").is_dir()


def is_pytest_command(argv: Sequence[str]) -> bool:
    """``pytest ...`` or ``python -m pytest ...`` (an xdist worker's argv[0] is ``-c``; code that
    calls ``pytest.main()`` has its own argv, which says nothing about the run)."""
    if not argv:
        return False
    program = Path(argv[0])
    return program.name in ("pytest", "py.test") or (
        program.name == "__main__.py" and program.parent.name == "pytest")


def may_send_requests(*, sdk_process: str, model: str, cache_only: bool, info_only: bool,
                      paths: Sequence[str]) -> bool:
    """What the import-time guess decides on: a run of some suite that may send requests through
    the shared SDK process."""
    return (
        sdk_process == "shared" and not info_only and not cache_only
        and model != "oracle" and not model.startswith("replay:")
        and any(names_suites(path) for path in paths)
    )


def command_line_wants_sdk(args: Sequence[str]) -> bool:
    """:func:`may_send_requests` from raw pytest arguments.

    No option is parsed: a flag's value may be taken for a path, which can only make a wrong
    guess, and a wrong guess is undone (module docstring)."""
    args = list(args)
    values = {"--sdk-process": "shared", "--model": ""}  # the last one given wins, as in argparse
    info_only = cache_only = False
    for i, arg in enumerate(args):
        flag, equals, inline = arg.partition("=")
        if flag in _INFO_FLAGS:
            info_only = True
        elif flag == "--cache-only":
            cache_only = True
        elif flag in values:
            values[flag] = inline if equals else (args[i + 1] if i + 1 < len(args) else "")
    return may_send_requests(sdk_process=values["--sdk-process"], model=values["--model"],
                             cache_only=cache_only, info_only=info_only,
                             paths=[arg for arg in args if not arg.startswith("-")])


def command_line_cache_empty(args: Sequence[str]) -> bool:
    """Whether the run's response cache (``--cache-dir``, else the default, the nearest at or
    above the current folder) holds nothing, or ``--no-cache`` is given, guessed from raw pytest
    arguments. A wrong guess costs time only: the SDK imported for nothing, or a first request
    waiting for it."""
    args = list(args)
    # (the nearest: pytest has not found its rootdir yet, where a subfolder's run keeps it)
    cache_dir, no_cache = str(nearest(DEFAULT_CACHE_DIR)), False
    for i, arg in enumerate(args):
        flag, equals, inline = arg.partition("=")
        if flag == "--no-cache":
            no_cache = True
        elif flag == "--cache-dir":
            cache_dir = inline if equals else (args[i + 1] if i + 1 < len(args) else cache_dir)
    return no_cache or not cache_holds_replies(cache_dir)


_started_at_import: SdkProcess | None = None


def start_at_import() -> None:
    """Start the SDK process if this process is a pytest command that looks like it will want one
    (called once, from the top of plugin.py; configure decides, session/sdk.py)."""
    global _started_at_import
    if _started_at_import is not None or not is_pytest_command(sys.argv):
        return
    args = [*sys.argv[1:], *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    try:
        if not command_line_wants_sdk(args):
            return
        _started_at_import = SdkProcess(import_sdk_at_start=command_line_cache_empty(args))
    except (OSError, ValueError):  # a guess must never break a command; configure starts it
        return
    atexit.register(_stop_unclaimed)


def claim_started_at_import() -> SdkProcess | None:
    """The process started at import, handed once to the first pytest session that asks."""
    global _started_at_import
    process, _started_at_import = _started_at_import, None
    return process


def _stop_unclaimed() -> None:
    process = claim_started_at_import()
    if process is not None:
        process.stop()
