"""Build the HTML report with Allure 3 (the npm package ``allure``) from a results folder.

Allure 3 is a Node program, so it is not a Python dependency: install it project-locally with
``npm install --prefix .toolbench/allure allure@3`` (``make allure``). We look for it there
(relative to the working directory and to the pytest rootdir), then at ``$TOOLBENCH_ALLURE``,
then for an ``allure`` on PATH that reports version 3. Nothing is downloaded at run time: a
missing node or allure is one clear line, not an error.

The report is a single file (``singleFile`` in allurerc.mjs, report/allure_run.py): its data is
inside ``index.html``, so it opens from disk (a downloaded CI artifact), where the multi-file
report's fetch() of its data files fails under ``file://`` and the page spins forever.

The build runs ``allure_build.mjs`` beside this module (Allure's own ``generate`` plus its
quality-gate validation, which ``allure generate`` skips, so the "Quality Gates" tab shows the
gates); if that script cannot run against the installed Allure, plain ``allure generate``
builds the report without the tab's results.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from pytest_toolbench.report.allure_run import CONFIG_FILE

LOCAL_BIN = Path(".toolbench/allure/node_modules/.bin/allure")
BUILD_SCRIPT = Path(__file__).with_name("allure_build.mjs")
INSTALL_HINT = "npm install --prefix .toolbench/allure allure@3"


def find_allure(roots: Iterable[Path] = ()) -> str | None:
    """Path of an Allure 3 executable, or None."""
    env = os.environ.get("TOOLBENCH_ALLURE")
    if env and Path(env).is_file():
        return env
    for root in [Path.cwd(), *roots]:
        candidate = root / LOCAL_BIN
        if candidate.is_file():
            return str(candidate)
    on_path = shutil.which("allure")
    if on_path:
        try:
            out = subprocess.run([on_path, "--version"], capture_output=True, text=True, timeout=30)
            if out.stdout.strip().startswith("3."):
                return on_path
        except (OSError, subprocess.SubprocessError):
            return None
    return None


def missing_reason(roots: Iterable[Path] = ()) -> str | None:
    """Why the HTML cannot be built here (one line), or None when it can."""
    if shutil.which("node") is None:
        return f"node is not installed (Allure 3 needs Node.js; then {INSTALL_HINT})"
    if find_allure(roots) is None:
        return f"Allure 3 is not installed ({INSTALL_HINT})"
    return None


def build_html(results_dir: str | Path, out_dir: str | Path, *, roots: Iterable[Path] = (),
               timeout: float = 300) -> tuple[bool, str]:
    """Build OUT from RESULTS with its allurerc.mjs (gates validated); (ok, one-line message)."""
    roots = list(roots)
    reason = missing_reason(roots)
    if reason is not None:
        return False, f"Allure HTML report skipped: {reason}"
    exe = find_allure(roots)
    assert exe is not None
    results, out = Path(results_dir).resolve(), Path(out_dir).resolve()
    config = results / CONFIG_FILE
    package = allure_package_dir(exe)
    note = ""
    if config.is_file() and package is not None and BUILD_SCRIPT.is_file():
        cmd = [shutil.which("node") or "node", str(BUILD_SCRIPT), str(package), str(config),
               str(results), str(out)]
        ok, detail = _run(cmd, out, results, timeout)
        if ok:
            finish_page(out / "index.html", results)
            return True, _built(out, exe)
        note = f" (quality gates not shown: {detail})"
    cmd = [exe, "generate", str(results), "-o", str(out)]
    if config.is_file():
        cmd[2:2] = ["-c", str(config)]
    ok, detail = _run(cmd, out, results, timeout)
    if not ok:
        return False, f"Allure HTML report failed: {detail}"
    finish_page(out / "index.html", results)
    return True, _built(out, exe) + note


def finish_page(index: Path, results: Path) -> None:
    """What the built page needs before anyone opens it: no analytics, the first model shown."""
    strip_analytics(index)
    open_first_model(index, results)


#: Allure 3's "awesome" page always embeds Google Analytics (``analyticsEnable: true`` in its
#: generators.js; only the allure2 plugin honours ``ALLURE_NO_ANALYTICS``): a script fetched from
#: googletagmanager.com and an inline ``gtag(...)`` block sending the report's uuid. A report of
#: a model evaluation must not call out when opened (offline CI artifacts, private runs).
_ANALYTICS = re.compile(
    r"<script[^>]*googletagmanager\.com[^>]*>\s*</script>\s*"
    r"|<script>(?:(?!</script>).)*?\bgtag\((?:(?!</script>).)*?</script>\s*",
    re.DOTALL,
)


def strip_analytics(index: Path) -> None:
    """Remove Allure's analytics scripts from ``index`` (left as is where there are none)."""
    if not index.is_file():
        return
    page = index.read_text(encoding="utf-8")
    cleaned = _ANALYTICS.sub("", page)
    if cleaned != page:
        index.write_text(cleaned, encoding="utf-8")


#: Allure's web app keeps the chosen environment in localStorage under this key (its app bundle:
#: ``localStorage.setItem("currentEnvironment", JSON.stringify(...))``).
ENVIRONMENT_KEY = "currentEnvironment"


def open_first_model(index: Path, results: Path) -> None:
    """With several models in the report, open it on the first model's environment: "All"
    leads with a pass-rate donut over every model's cases, which measures none of them. A
    choice of one of this report's environments made before is kept; "All" stays one click
    away in the Environment menu. A report of one model is left as Allure built it."""
    from pytest_toolbench.report import allure_folder
    from pytest_toolbench.report.allure_run import environments

    ids = [ident for ident, _, _ in environments(allure_folder.load_entries(results))]
    if len(ids) < 2 or not index.is_file():
        return
    page = index.read_text(encoding="utf-8")
    script = ("<script>try{var k=" + json.dumps(ENVIRONMENT_KEY) + ",ids=" + json.dumps(ids)
              + ",c=JSON.parse(localStorage.getItem(k)||'null');if(ids.indexOf(c)<0)"
              "localStorage.setItem(k,JSON.stringify(ids[0]))}catch(e){}</script>")
    at = page.find("<head>")
    if at < 0:
        return
    at += len("<head>")
    index.write_text(page[:at] + script + page[at:], encoding="utf-8")


def allure_package_dir(exe: str) -> Path | None:
    """The installed ``allure`` npm package behind an executable (``.bin/allure`` links to its
    ``cli.js``), where the build script resolves Allure's core from."""
    for parent in Path(exe).resolve().parents:
        manifest = parent / "package.json"
        if manifest.is_file():
            try:
                return parent if json.loads(manifest.read_text())["name"] == "allure" else None
            except (OSError, ValueError, KeyError):
                return None
    return None


def _run(cmd: list[str], out: Path, cwd: Path, timeout: float) -> tuple[bool, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(cwd),
                              env={**os.environ, "ALLURE_NO_ANALYTICS": "true"})
    except (OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    if proc.returncode != 0 or not (out / "index.html").is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return False, f"exit {proc.returncode}: {tail[0]}"
    return True, ""


def _built(out: Path, exe: str) -> str:
    return (f"Allure HTML report: {out / 'index.html'} (one file: open it from disk, or "
            f"`{exe} open {out}`)")
