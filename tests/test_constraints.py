"""constraints.txt, the versions ``make setup`` installs, against pyproject.toml's ranges.

The file is what a fresh machine installs (the Makefile passes it with ``-c``), so a dependency
added to pyproject.toml without a pin, or a range moved past its pin, would install an untested
version or fail pip's resolution on a fresh machine only. Both fail here instead.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]


def pins(text: str) -> dict[str, Version]:
    """Each ``name==version`` line of a constraints file, by canonical name; anything else (a
    range, an option, a name twice) is an error naming its line."""
    found: dict[str, Version] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise ValueError(f"constraints.txt line {number}: {exc}") from None
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or req.marker or req.url:
            raise ValueError(f"constraints.txt line {number}: not a plain name==version: {line!r}")
        name = canonicalize_name(req.name)
        if name in found:
            raise ValueError(f"constraints.txt line {number}: {req.name} pinned twice")
        found[name] = Version(specs[0].version)
    return found


def declared() -> list[Requirement]:
    """Every requirement pyproject.toml names: the dependencies and those of every extra."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    texts = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        texts.extend(extra)
    return [Requirement(t) for t in texts]


def unpinned(requirements: list[Requirement], pinned: dict[str, Version]) -> list[str]:
    """What a fresh set-up would install untested: a requirement with no pin, or one whose pin
    lies outside its range."""
    problems = []
    for req in requirements:
        version = pinned.get(canonicalize_name(req.name))
        if version is None:
            problems.append(f"{req.name}: not pinned")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req.name}: pinned {version}, outside {req.specifier}")
    return problems


def test_every_declared_dependency_is_pinned_within_its_range() -> None:
    pinned = pins((REPO / "constraints.txt").read_text())
    assert unpinned(declared(), pinned) == []
    # The CPU build of torch is the one on these machines' disk (a bare pin pulls a CUDA build).
    assert pinned["torch"] == Version("2.13.0+cpu")


def test_pip_and_the_setuptools_that_builds_the_project_are_pinned_within_its_range() -> None:
    pinned = pins((REPO / "constraints.txt").read_text())
    build = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    assert unpinned([Requirement("pip"), *map(Requirement, build)], pinned) == []


def test_a_new_dependency_or_a_range_past_its_pin_is_caught() -> None:
    pinned = pins("pytest==9.2.0\nopenai==3.60.0\n")
    assert unpinned([Requirement("pytest>=8.3"), Requirement("openai>=2.0")], pinned) == []
    assert unpinned([Requirement("pytest>=10"), Requirement("faiss-cpu>=1.8")], pinned) == [
        "pytest: pinned 9.2.0, outside >=10", "faiss-cpu: not pinned"]


@pytest.mark.parametrize("text", ["pytest>=9\n", "pytest==9.2.0\nPytest==9.1\n", "--index-url x\n"])
def test_a_line_that_is_not_one_pin_names_its_line(text: str) -> None:
    with pytest.raises(ValueError, match="constraints.txt line [12]"):
        pins(text)


def test_the_setup_installs_with_the_constraints() -> None:
    makefile = (REPO / "Makefile").read_text()
    installs = [line for line in makefile.splitlines()
                if re.search(r"\$\(PIP\) install .*-e \"\.\[", line)]
    assert installs and all("$(CONSTRAINTS)" in line and "--no-build-isolation" in line
                            for line in installs)
    # pip and setuptools come first, pinned: the project's build uses that setuptools
    tools = [line for line in makefile.splitlines() if re.search(r"\$\(PIP\) install .*\bpip setuptools\b", line)]
    assert len(tools) == 1 and "$(CONSTRAINTS)" in tools[0]
    assert makefile.index(tools[0]) < makefile.index(installs[0])
    # `make lock` alone empties it, on its own command line.
    assert re.search(r"^CONSTRAINTS := -c constraints\.txt$", makefile, re.MULTILINE)
