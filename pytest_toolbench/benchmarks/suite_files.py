"""The pytest file that runs a benchmark: ``suites/<name>/test_<name>.py``.

A benchmark's suite is one marked test over its cases; everything else (collection, the
``case`` and ``case_result`` fixtures, scoring) is the plugin's. This module writes that file for
every registered benchmark, built-in or installed, so a project that installed the package
runs the four suites (and its own benchmarks) without a checkout of this repository
(``toolbench init``). The checkout's own ``suites/`` hold exactly what it writes
(tests/test_suite_files.py), so the two never drift apart and their node ids are the same.
"""

from __future__ import annotations

import keyword
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pytest_toolbench.benchmarks.options import flag_name
from pytest_toolbench.fileio import atomic_write_text

WIDTH = 100
#: The folder the suites go in, below the target folder: the plugin recognises a pytest path
#: argument under a folder of this name as a suite run (models/sdk_process/launcher.py).
SUITES_FOLDER = "suites"
NBSP = "\N{NO-BREAK SPACE}"


def suite_path(name: str) -> Path:
    """Where ``name``'s suite goes, relative to the project folder."""
    return Path(SUITES_FOLDER) / name / f"test_{name}.py"


def suite_name_of(path: Path) -> str | None:
    """The benchmark whose suite file ``path`` is laid out as (``suites/<name>/test_<name>.py``,
    :func:`suite_path`), else None."""
    name = path.stem[len("test_"):]
    if (path.suffix == ".py" and path.stem.startswith("test_") and path.parent.name == name
            and path.parent.parent.name == SUITES_FOLDER):
        return name
    return None


def suite_source(benchmark: Any) -> str:
    """The text of ``benchmark``'s suite file. Refuses (ValueError) a name that cannot make a
    test function: ``test_<name>`` must be a Python identifier."""
    name = benchmark.name
    function = f"test_{name}"
    if not function.isidentifier() or keyword.iskeyword(function):
        raise ValueError(f"benchmark {name!r}: {function!r} is not a Python name, so no suite file "
                         "can hold its test; write one by hand (see suites/toolhop/test_toolhop.py)")
    module = benchmark.__module__ if isinstance(benchmark, type) else type(benchmark).__module__
    title = _in_docstring(benchmark.title)
    scenarios = [_in_docstring(s) for s in benchmark.scenarios[:1]]
    markers = [f"scenario(name='{scenario}')" for scenario in scenarios]
    markers += [f"{marker}({kw}=...)" for marker, kw in benchmark.label_markers.items()]
    flags = [flag for field, info in benchmark.options_model.model_fields.items()
             if (flag := flag_name(name, field, info)) is not None]
    # NBSP keeps each `-m "..."` on one line through the wrap; it is a space again after it
    options = ", ".join(f'-m{NBSP}"{marker}"' for marker in markers)
    select = f"Select with {options}; `toolbench list {name}` prints the values"
    select += (f", and `pytest --help` its own flags under \"pytest-toolbench: {title}\"."
               if flags else ".")
    paragraphs = [
        f"{title}: one test per case of the benchmark ``{name}``; the harness loads, "
        f"runs and scores them ({module}).",
        select,
        "Written by `toolbench init`, which rewrites it only with --overwrite.",
    ]
    docstring = "\n\n".join(textwrap.fill(p, WIDTH - 1).replace(NBSP, " ") for p in paragraphs)
    return (f'"""{docstring}\n"""\n\n'
            "import pytest\n\n"
            "from pytest_toolbench.session.fixtures import assert_case_passed\n\n"
            f'pytestmark = pytest.mark.toolbench("{name}")\n\n\n'
            f"def {function}(case, case_result):\n"
            "    assert_case_passed(case_result)\n")


def _in_docstring(text: str) -> str:
    """An installed benchmark's own text (title, scenario) as docstring text: no quote in it can
    end the docstring, no backslash make an escape."""
    return str(text).replace("\\", "\\\\").replace('"', '\\"')


Action = Literal["written", "unchanged", "differs", "overwritten"]


@dataclass(frozen=True)
class SuiteFile:
    benchmark: str
    path: Path
    action: Action
    #: What the file holds once written.
    text: str


def plan(folder: Path, benchmarks: Mapping[str, Any], *, overwrite: bool) -> list[SuiteFile]:
    """What writing ``benchmarks``' suites under ``folder`` would do, file by file. Nothing is
    written, so a refusal (a file that differs) leaves the folder as it was. OSError where a
    file there cannot be read (no permission, a folder of that name)."""
    planned = []
    for name, benchmark in benchmarks.items():
        path = folder / suite_path(name)
        text = suite_source(benchmark)
        try:
            old = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):  # the latter: a file where a folder goes,
            action: Action = "written"                     # which the write then reports
        except UnicodeDecodeError:  # no text of ours
            action = "overwritten" if overwrite else "differs"
        else:
            action = "unchanged" if old == text else "overwritten" if overwrite else "differs"
        planned.append(SuiteFile(name, path, action, text))
    return planned


def write(planned: Iterable[SuiteFile]) -> None:
    """Write the planned files that are new or to be overwritten (each atomically; the atomic
    write makes their folders)."""
    for suite in planned:
        if suite.action in ("written", "overwritten"):
            atomic_write_text(suite.path, suite.text)
