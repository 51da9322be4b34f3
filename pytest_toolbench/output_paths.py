"""Every path a run will write, checked at configure, before any model call.

Guards against a report that cannot be written failing only after every model call has been
paid for, a read-only run folder crashing the run, and a read-only response cache silently not
written: each is one line and exit 4 (``pytest.UsageError``) before the first request.

What is checked, per path: the nearest folder that exists (the writers create the missing ones,
``fileio.atomic_write_bytes``) must be a folder, pass ``os.access(W_OK | X_OK)``, and take a real
write: a probe file of 4 KiB is written there and removed at once, and the file system must have
``MIN_FREE_BYTES`` free. The probe is what catches a read-only mount, a full disk or quota, or an
ACL; ``os.access`` alone is not enough, and for root it says yes to any folder, because root
bypasses permission bits: for root only a read-only file system (or a path under a regular file,
or a missing device) fails, the same as the real write would.

A read-only ``--cache-dir`` is an error, not a warning that the cache is off: a run that silently
re-pays every model call next time is the surprise this check exists to remove; ``--no-cache``
(or ``--cache-only``, which never writes the cache) is the way to run without writing it.

Every path is checked before any is refused, one message each: a read-only checkout (a CI
workspace mounted read-only, an installed copy) fails the runs folder and the response cache
both, and a user fixing them one try at a time would pay a start-up per try.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from pytest_toolbench.output_streams import can_write_through, writes_in_place


#: Less free space than this in an output's folder is refused: a report, a journal or a cache
#: entry would fail part-way through the run. A floor, not an estimate: a run folder ends at a
#: few MiB, and holds more while it runs (a FamilyTool run over the shared data at -n 2 peaks
#: near 18 MB: the workers' journals and scratch files, perf/run.py's storage step).
MIN_FREE_BYTES = 16 * 2**20


def _nearest_existing(path: Path) -> Path:
    p = path
    while not (p.exists() or p.is_symlink()):
        if p.parent == p:
            break
        p = p.parent
    return p


def check_folder(path: Path, option: str, *, named: Path | None = None) -> None:
    """``path`` is (or can be created as) a folder this process can write in; ValueError if not.
    The message names ``named`` (the file to be written in it), else ``path``."""
    given = path
    path = named if named is not None else path
    if given.exists() and not given.is_dir():
        raise ValueError(f"{option} {path}: {given} is not a folder")
    base = _nearest_existing(given)
    if not base.is_dir():
        raise ValueError(f"{option} {path}: cannot be created, {base} is not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        # The same words as the probe's failure below: root passes os.access where an ordinary
        # user does not, and the user should read one message whoever runs the harness.
        raise ValueError(f"{option} {path}: cannot write in {base}: {os.strerror(errno.EACCES)}")
    try:
        fd, probe = tempfile.mkstemp(prefix=".toolbench-write-probe-", dir=base)
    except OSError as exc:
        raise ValueError(f"{option} {path}: cannot write in {base}: {exc.strerror or exc}") from None
    try:
        os.write(fd, b"\0" * 4096)  # a full disk takes an empty file, not a block of data
    except OSError as exc:
        raise ValueError(f"{option} {path}: cannot write in {base}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
        try:
            os.unlink(probe)
        except OSError:
            pass
    try:
        free = shutil.disk_usage(base).free
    except OSError:
        return
    if free < MIN_FREE_BYTES:
        raise ValueError(f"{option} {path}: only {free // 1024} KiB free in {base} "
                         f"(at least {MIN_FREE_BYTES // 2**20} MiB needed)")


def check_file(path: Path, option: str) -> None:
    """``path`` is a file this process can (re)write: not a folder, in a writable folder; or a
    device, FIFO or stream (/dev/null, /dev/stdout) it may write through (fileio.py
    ``writes_in_place``), whose folder it never writes."""
    if writes_in_place(path) and not path.is_dir():
        if not can_write_through(path):
            raise ValueError(f"{option} {path}: cannot be written (it does not exist, or this "
                             "user may not write it)")
        return
    if path.is_dir():
        raise ValueError(f"{option} {path}: is a folder, not a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{option} {path}: the file is not writable")
    check_folder(path.parent, option, named=path)


class OutputPathsError(ValueError):
    """Every output path that cannot be written: one message (``args``) per path, so a run in a
    read-only checkout learns of its runs folder and its cache in one go, not one per try."""

    def __str__(self) -> str:
        return "; ".join(str(a) for a in self.args)


def problems_of(exc: ValueError) -> tuple[str, ...]:
    """The messages of a refusal, one per line to print: an :class:`OutputPathsError`'s each,
    any other error's one."""
    return tuple(str(a) for a in exc.args) if isinstance(exc, OutputPathsError) else (str(exc),)


#: Where the folders a run writes by default can go instead, said after their problem: a
#: read-only checkout (a mounted CI workspace, an installed copy) fails both defaults.
ELSEWHERE = {
    "--runs-dir": "--runs-dir or $TOOLBENCH_RUNS_DIR puts the run folders elsewhere",
    "--cache-dir": "--cache-dir puts the response cache elsewhere; --no-cache writes none",
}


def check_output_paths(files: Iterable[tuple[str, Path | None]],
                       folders: Iterable[tuple[str, Path | None]],
                       refuse: Mapping[str, Callable[[Path], str | None]] | None = None) -> None:
    """Each given (option, path) pair, files then folders; :class:`OutputPathsError` with a
    message per path that cannot be written. ``refuse`` adds, by option, why a writable folder
    may still not be used (``--toolbench-view``: a folder its build would clear), one list of
    problems still."""
    problems = []
    first_named: dict[Path, str] = {}
    for option, path in files:  # two outputs in one file: the one written last is all it holds
        if path is None:
            continue
        if writes_in_place(path):  # /dev/null or /dev/stdout for two outputs: both get there
            continue
        same = first_named.setdefault(Path(os.path.abspath(path)).resolve(), option)
        if same != option:
            problems.append(f"{option} {path}: the file {same} writes too; give each output "
                            "its own file")
    for option, path, check in [*((o, p, check_file) for o, p in files),
                                *((o, p, check_folder) for o, p in folders)]:
        if path is None:
            continue
        try:
            check(Path(path), option)
        except ValueError as exc:
            hint = ELSEWHERE.get(option)
            problems.append(f"{exc} ({hint})" if hint else str(exc))
            continue
        why = (refuse or {}).get(option, lambda _: None)(Path(path))
        if why is not None:
            problems.append(f"{option} {path}: {why}")
    if problems:
        raise OutputPathsError(*problems)


def as_written(option: str, value: str | os.PathLike[str], base: Path) -> Path:
    """Where the writer of another plugin's ``option`` puts ``value``, so the check reads the
    path the writer will write: pytest's ``--junitxml`` expands ``$VAR`` and ``~``;
    allure-pytest's ``--alluredir`` neither (``--alluredir=~/x``, which the shell leaves as it
    is, writes ``./~/x``); our own options take ``~`` (:mod:`pytest_toolbench.options`).
    Relative paths are relative to where pytest was started (``base``)."""
    text = str(value)
    if option == "--junitxml":
        text = os.path.expandvars(text)
    if option != "--alluredir":
        text = os.path.expanduser(text)
    path = Path(text)
    return path if path.is_absolute() else base / path


def check_run_outputs(config: Any, settings: Any,
                      refuse: Mapping[str, Callable[[Path], str | None]] | None = None) -> None:
    """The run's outputs: reports and recordings (files), runs, cache and the Allure HTML
    report (folders). ``--junitxml`` is pytest's own option, checked here too since it is written
    at the end; ``--alluredir`` is checked before this, ahead of allure-pytest's own configure
    (session/run_start.py ``check_alluredir``). ``refuse``: as :func:`check_output_paths` takes it."""
    base = Path(config.invocation_params.dir)

    def given(option: str, dest: str) -> Path | None:
        value = config.getoption(dest, None)
        return as_written(option, value, base) if value else None

    writes_cache = settings.use_cache and not settings.cache_only
    refuse = {"--record": _not_a_stream, **(refuse or {})}
    check_output_paths(
        files=[("--toolbench-json", settings.json_path), ("--toolbench-md", settings.md_path),
               ("--record", settings.record_path), ("--junitxml", given("--junitxml", "xmlpath"))],
        folders=[("--runs-dir", settings.runs_dir), ("--toolbench-view", settings.view_dir),
                 ("--cache-dir", settings.cache_dir if writes_cache else None),
                 ("--allure-html", given("--allure-html", "--allure-html"))],
        refuse=refuse,
    )


def _not_a_stream(path: Path) -> str | None:
    """A recording is appended to by every process of the run, under a lock file beside it, and
    read back by --replay: a device or stream (/dev/stdout) is none of that."""
    if writes_in_place(path):
        return "a recording must be a plain file (every process appends to it, under a lock beside it)"
    return None


__all__ = ["OutputPathsError", "as_written", "check_file", "check_folder", "check_output_paths",
           "problems_of", "check_run_outputs"]
