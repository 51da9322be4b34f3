"""Write the site: HTML pages rendered with Jinja2 from the page models, the data the browser
needs as ``.js`` files loaded by ``<script>`` (``file://`` pages may not ``fetch()`` local files),
and the vendored libraries (static/vendor/README.md).

Layout of ``OUT``::

    index.html                 the leaderboard (one table per data group) and the paper tables
    run-<key>.html             one run: metrics, breakdowns, gates, settings, case list
    case.html#run=<key>&i=<n>  one case (any run): rendered from its chunk
    diff-<a>--<b>.html         two runs side by side
    data/<key>/index.js        the run's case list (small rows)
    data/<key>/c<k>.js         cases k*50 .. k*50+49 in full (transcripts), repeated texts once,
                               gzipped (pack_chunk)
    static/                    app.js, app.css, vendor/

The old ``data/`` and pages are replaced on every build, so a pruned run leaves no page behind.
That clearing is why a build refuses a folder it did not make (site_folder.py): ``--out .`` in
the project would otherwise delete the project's own ``data/``.
"""

from __future__ import annotations

import base64
import gzip
import json
import shutil
import time
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any


from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.view.case_data import CHUNK, case_entry, case_payload, share_texts
from pytest_toolbench.view.diff_page import DiffPage, build_diff, diff_file, refusal
from pytest_toolbench.view.groups import data_groups
from pytest_toolbench.view.leaderboard import build_leaderboard
from pytest_toolbench.view.load import ViewRun, load_view_runs
from pytest_toolbench.view.run_page import build_run_page
from pytest_toolbench.view.site_folder import MARKER, SiteFolderError, out_folder_problem

PACKAGE = Path(__file__).resolve().parent
#: Most pairs given a side-by-side page (newest pairs first); each is a paired bootstrap.
MAX_PAIRS = 60


class SiteResult(DeferredModel):
    out: str
    index: str
    runs: int
    pairs: int
    skipped: list[str]
    seconds: float


def js_literal(value: Any) -> str:
    """``value`` as a JavaScript literal: JSON, where a benchmark's own NaN stays ``NaN`` (a JS
    global, so no value is rewritten), and ``</`` escaped so that no text can close an inline
    ``<script>``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True, default=str)
    return text.replace("</", "<\\/")


def pack_chunk(cases: list[dict[str, Any]], texts: list[str] | None) -> str:
    """A chunk's ``[cases, texts]`` literal, gzipped, as base64: ``static/app.js``
    (``TB.chunkz``) unpacks it with the browser's ``DecompressionStream`` and reads the literal
    as the plain chunk file was read (NaN and all). The shared texts are once per chunk and
    gzip's window is 32 KB, so a FamilyTool case's tool list (~4 KB each, 23 MB over the shared
    data's 5,628 cases) and each chunk's knowledge graphs stayed: its site took 47 MB for a
    2.9 MB run folder; packed, 2.7 MB."""
    literal = js_literal([cases, texts]).encode("utf-8", "surrogatepass")
    return base64.b64encode(gzip.compress(literal, 6, mtime=0)).decode("ascii")


def unpack_chunk(packed: str) -> tuple[list[dict[str, Any]], list[str] | None]:
    """:func:`pack_chunk`'s ``(cases, texts)``, as the page reads them (Python's ``json`` reads
    the literal's NaN; ``<\\/`` is JSON's own escape of ``</``)."""
    literal = gzip.decompress(base64.b64decode(packed)).decode("utf-8", "surrogatepass")
    cases, texts = json.loads(literal)
    return cases, texts


def js_data(call: str, *args: Any) -> str:
    """``TB.call(arg, ...);``: how a data file hands its data to static/app.js."""
    return f"TB.{call}({','.join(js_literal(a) for a in args)});\n"


def _environment():  # noqa: ANN202 - jinja2.Environment, imported here: only a build needs it
    import jinja2
    import markupsafe

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(PACKAGE / "templates")),
                             autoescape=jinja2.select_autoescape(("html",)),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["js"] = lambda v: markupsafe.Markup(js_literal(v))
    env.globals["diff_file"] = diff_file
    return env


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _write_cases(run: ViewRun, data: Path) -> None:
    cases = run.record.cases
    folder = data / run.key
    rows = [case_entry(i, c).model_dump() for i, c in enumerate(cases)]
    _write(folder / "index.js", js_data("index", run.key, len(cases), CHUNK, rows))
    for k in range(0, max(len(cases), 1), CHUNK):
        chunk, texts = share_texts([case_payload(i, cases[i]) for i in range(k, min(k + CHUNK, len(cases)))])
        _write(folder / f"c{k // CHUNK}.js",
               js_data("chunkz", run.key, k // CHUNK, pack_chunk(chunk, texts)))


def _pairs(runs: Sequence[ViewRun], max_pairs: int) -> tuple[list[tuple[ViewRun, ViewRun]], dict[str, str]]:
    """The pairs (older A, newer B) ``toolbench compare`` accepts, newest first, at most
    ``max_pairs``; and for the leaderboard's compare button, ``"a|b"`` -> page or reason."""
    ok: list[tuple[ViewRun, ViewRun]] = []
    lookup: dict[str, str] = {}
    for a, b in combinations(runs, 2):  # runs are oldest first, so a is the older one
        why = refusal(a, b)
        if why is None:
            ok.append((a, b))
        else:
            lookup[f"{a.key}|{b.key}"] = "refused: " + why
    ok.sort(key=lambda p: -(p[1].record.run.started or 0.0))
    for a, b in ok[max_pairs:]:
        lookup[f"{a.key}|{b.key}"] = (f"not built: more than {max_pairs} comparable pairs "
                                      f"(toolbench compare {a.run_id} {b.run_id})")
    kept = ok[:max_pairs]
    for a, b in kept:
        lookup[f"{a.key}|{b.key}"] = diff_file(a.key, b.key)
    return kept, lookup


def build_site(paths: Sequence[str | Path], out: str | Path, *, n_boot: int = 2000,
               max_pairs: int = MAX_PAIRS) -> SiteResult:
    """Build the site for every run under ``paths`` into ``out`` and return where it is."""
    from pytest_toolbench.benchmarks import registry
    from pytest_toolbench.compare.core import registry_specs

    start = time.monotonic()
    out = Path(out)
    loaded = load_view_runs(paths)
    runs = loaded.runs
    benchmarks = registry()
    specs, labels = registry_specs()
    meanings = {n: {m.name: m.description for m in b.metrics} for n, b in benchmarks.items()}
    env = _environment()
    groups = data_groups(runs)
    board = build_leaderboard(runs, groups, benchmarks, loaded.skipped)
    pairs, lookup = _pairs(runs, max_pairs)
    diffs: list[DiffPage] = [build_diff(a, b, specs, labels, n_boot=n_boot) for a, b in pairs]

    why = out_folder_problem(out)
    if why is not None:  # checked again: the folder may have changed while the runs were read
        raise SiteFolderError(f"{out}: {why}")
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("built by toolbench view; the next build clears this folder's "
                              "pages, data/ and static/\n", encoding="utf-8")
    for old in [*out.glob("run-*.html"), *out.glob("diff-*.html")]:
        old.unlink()
    shutil.rmtree(out / "data", ignore_errors=True)
    shutil.rmtree(out / "static", ignore_errors=True)
    shutil.copytree(PACKAGE / "static", out / "static")
    models = {r.key: r.model for r in runs}
    ids = {r.key: r.run_id for r in runs}
    _write(out / "index.html", env.get_template("leaderboard.html").render(
        board=board, pairs=lookup, diffs=diffs, models=models, ids=ids, title="Leaderboard"))
    for run in runs:
        page = build_run_page(run, meanings)
        mine = [d for d in diffs if run.key in (d.a, d.b)]
        _write(out / f"run-{run.key}.html", env.get_template("run.html").render(
            page=page, diffs=mine, models=models, ids=ids, title=page.title))
        _write_cases(run, out / "data")
    _write(out / "case.html", env.get_template("case.html").render(
        runs=[(r.key, r.model, r.run_id) for r in runs], chunk=CHUNK, title="Case"))
    for d in diffs:
        _write(out / d.file, env.get_template("diff.html").render(
            d=d, ids=ids, title=f"{d.b_model} vs {d.a_model}"))
    return SiteResult(out=str(out), index=str(out / "index.html"), runs=len(runs), pairs=len(diffs),
                      skipped=loaded.skipped, seconds=time.monotonic() - start)
