"""Which folders a site may be built into: a build clears the folder's ``data/``, ``static/``
and pages first (site.py), so a folder the view did not build is refused, before any run is
read (``toolbench view --out``) or any case runs (``pytest --toolbench-view``). Stdlib only: the
plugin checks ``--toolbench-view`` at configure without loading the site's code.
"""

from __future__ import annotations

from pathlib import Path

from pytest_toolbench.defaults import VIEW_MARKER

class SiteFolderError(ValueError):
    """The site's folder is one a build may not clear (message: the folder and why)."""


#: Written into every site folder: the folder is the view's to clear on the next build.
MARKER = VIEW_MARKER
#: What a site holds, marker aside (a folder built before the marker is recognised by these).
_SITE_ENTRIES = ("index.html", "case.html", "data", "static", "run-*.html", "diff-*.html")


def out_folder_problem(out: Path) -> str | None:
    """Why the site cannot be built into ``out``, or None: a new folder, an empty one or one the
    view built (its marker; before the marker: an index.html and static/, and only what a site
    holds). Any other folder is refused, since a build deletes its ``data/``, ``static/`` and
    pages first."""
    if not out.exists():
        return None
    if not out.is_dir():
        return "not a folder"
    if (out / MARKER).is_file():
        return None
    entries = sorted(out.iterdir())
    foreign = [e.name for e in entries if not any(e.match(pattern) for pattern in _SITE_ENTRIES)]
    older_site = (out / "index.html").is_file() and (out / "static").is_dir() and not foreign
    if not entries or older_site:
        return None
    shown = foreign or [e.name for e in entries]  # a lone data/ is no site either
    return (f"a folder toolbench view did not build (it holds {', '.join(shown[:3])}"
            f"{' ...' if len(shown) > 3 else ''}), which a build would clear; give a new or "
            "empty folder")
