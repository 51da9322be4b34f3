"""A package "installed" from a folder for a test, as pip would: a dist-info with its METADATA
and entry points on a site folder, both on PYTHONPATH. The outside-benchmark and provider tests
use it instead of pip, so nothing is written into the venv the other tests share."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path


def write_dist_info(site: Path, name: str, version: str, entry_points: dict[str, dict[str, str]]) -> Path:
    """A ``<name>-<version>.dist-info`` in ``site`` declaring ``entry_points`` (group -> name -> object)."""
    dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                                   encoding="utf-8")
    (dist / "entry_points.txt").write_text(
        "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items())
                for group, points in entry_points.items()),
        encoding="utf-8")
    return dist


def install_project(project_dir: Path, site: Path, code_dir: Path) -> dict[str, str]:
    """The environment of an interpreter where the project in ``project_dir`` (its pyproject.toml:
    name, version, entry points) is installed, its code importable from ``code_dir``."""
    project = tomllib.loads((project_dir / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    write_dist_info(site, project["name"], project["version"], project["entry-points"])
    path = os.pathsep.join([str(site), str(code_dir), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}
