"""Every module path the package's comments, docstrings and READMEs name exists, and none of them
cites a document a user of the package does not have (``../shared/specs``).

A rename leaves the prose behind (``results/completeness.py``, ``models/open_parsers.py`` and
``fixtures/toolbench.py`` were once named where nothing was): a path such as
``session/fixtures.py`` or ``benchmarks/toolhop/runner.py`` must name a file of this repository,
read from the repository root, the package, or the folder of the text that names it (or one
above it, up to the package). Upstream files the comments cite are listed apart, and a path in
an installed package (``_pytest/config/__init__.py``) is that package's.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "pytest_toolbench"

#: ``dir/name.py``, not inside a longer path, a dotted name or a URL.
MODULE_PATH = re.compile(r"(?<![\w./:-])((?:[\w-]+/)+[\w-]+\.py)\b")

#: Upstream paths the comments cite, which name no file here: ToolHop's ``code/evaluation_*.py``,
#: ToolBeHonest's ``utils/*.py``, FamilyTool's ``pipeline/*.py`` and its UnifiedToolHub copy,
#: and the projects whose design is cited (inspect_ai, vLLM's renderers).
UPSTREAM_FOLDERS = ("code/", "utils/", "pipeline/", "benchmark/", "resources/", "suite/",
                    "inspect_ai/", "renderers/")
UPSTREAM_FILES = frozenset({"models/api_requester.py", "models/qwen_2_5.py", "models/llama_3_1.py",
                            "models/deepseek_r1.py"})


#: Folder names of this repository and its package: a path starting with one is ours to check,
#: even where an installed package has the same name (``datasets``).
OUR_FOLDERS = frozenset(p.name for folder in (REPO, PACKAGE) for p in folder.iterdir()
                        if p.is_dir())


def installed_elsewhere(path: str) -> bool:
    """Whether ``path`` lies in an installed package other than this one (``_pytest/...``)."""
    top = path.split("/", 1)[0]
    return (top not in OUR_FOLDERS and top.isidentifier()
            and importlib.util.find_spec(top) is not None)


def texts() -> list[Path]:
    """The package's modules and READMEs, and the top-level README."""
    found = [p for p in PACKAGE.rglob("*")
             if p.suffix in (".py", ".md") and "__pycache__" not in p.parts]
    return sorted([*found, REPO / "README.md"])


def resolves(path: str, named_in: Path) -> bool:
    above = [d for d in named_in.parents if d == PACKAGE or PACKAGE in d.parents]
    folders = [REPO, PACKAGE, *above]
    return any((folder / path).is_file() for folder in folders)


def dangling(text: str, named_in: Path) -> list[str]:
    """The module paths in ``text`` that name no file (upstream ones aside)."""
    return [path for path in MODULE_PATH.findall(text)
            if not path.startswith(UPSTREAM_FOLDERS) and path not in UPSTREAM_FILES
            and not installed_elsewhere(path) and not resolves(path, named_in)]


def test_every_named_module_path_exists() -> None:
    missing = [f"{f.relative_to(REPO)}:{n}: {path}"
               for f in texts()
               for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), start=1)
               for path in dangling(line, f)]
    assert not missing, "module paths that name no file:\n" + "\n".join(missing)


#: A citation of the project's working notes: ``../shared/specs/...``, ``spec §3.1``,
#: ``toolhop.md §0``.
SPEC_CITATION = re.compile(r"shared/specs|\bspecs?\W{0,3}§|\b\w+\.md\W{0,3}§", re.IGNORECASE)


def test_nothing_cites_the_shared_specs() -> None:
    """Comments cite the upstream files and functions or the paper, never a section of the
    project's notes in ../shared/specs, which a user of the package does not have."""
    found = [f"{f.relative_to(REPO)}:{n}: {line.strip()}"
             for f in texts()
             for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), start=1)
             if SPEC_CITATION.search(line)]
    assert not found, "citations of ../shared/specs:\n" + "\n".join(found)


@pytest.mark.parametrize("line", ["Spec: `../shared/specs/toolhop.md`.", "(spec §3.1)",
                                  "Spec §4: T=0", "(toolhop.md §0, S3)"])
def test_a_spec_citation_is_seen(line: str) -> None:
    assert SPEC_CITATION.search(line)
    assert not SPEC_CITATION.search("the paper's sentences (§3.3.2), paper §2.6")


@pytest.mark.parametrize(("line", "expected"), [
    ("the journal (results/journal.py) and session/fixtures.py", []),
    ("see results/renamed_away.py and models/open_parsers.py", ["results/renamed_away.py",
                                                                 "models/open_parsers.py"]),
    ("relative to this package: toolhop/runner.py", []),
    ("upstream ``code/evaluation_open.py`` and ``utils/process.py``", []),
    ("pytest's own _pytest/config/__init__.py (an installed package's, not checked)", []),
    ("datasets/gone.py is ours even if a datasets package is installed", ["datasets/gone.py"]),
    ("a URL https://example.org/a/b.py and a dotted x.results/y.py are not paths", []),
])
def test_the_check_sees_a_dangling_path(line: str, expected: list[str]) -> None:
    """The check finds a path that names nothing, and only such paths (read as if in
    benchmarks/README.md, so ``toolhop/runner.py`` is relative to it)."""
    assert dangling(line, PACKAGE / "benchmarks" / "README.md") == expected
