"""The Allure 3 HTML report in headless Chromium: two real runs on the bundled ToolHop sample in
one results folder (the oracle, then a replay of wrong answers), the HTML built with
``--allure-html``, opened from disk (``file://``, as a downloaded CI artifact is), screenshotted
(overview, quality gates, the metrics, one case) into ``.toolbench/test-artifacts/allure/``, and
checked on the DOM: the report is one file that renders (no spinner), it opens on the first
model's environment (its donut, gates and attachments, no pass rate of two models mixed), titles
and suite paths name the model, the first screen has both runs' gates, data, backend and headline
metrics with their CI, the metrics view has one row per metric, the Quality Gates tab lists every
verdict under its model, and no step is "unknown".

Skips with a reason when node/Allure 3 (``npm install --prefix .toolbench/allure allure@3``) or
Debian's ``chromium`` is missing.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest

from pytest_toolbench.report.allure_html import missing_reason

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / ".toolbench" / "test-artifacts" / "allure"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.slow,  # two real runs, an Allure build and ten Chromium page loads: ~60 s
    pytest.mark.skipif(missing_reason([REPO]) is not None,
                       reason=f"Allure HTML cannot be built: {missing_reason([REPO])}"),
    pytest.mark.skipif(CHROMIUM is None,
                       reason="chromium is not installed (apt-get install -y chromium)"),
]


GATE = "toolhop.mandatory.accuracy>=0.5"


def _run(tmp: Path, model: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider", "-q",
           "-p", "no:randomly", "--cache-dir", str(tmp / "cache"), "--runs-dir", str(tmp / "runs"), "--model", model,
           "--limit", "2", "--alluredir", str(tmp / "results"), "--gate", GATE, *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(file:// URL of index.html, html dir) of a report built from two runs in one results
    folder: the oracle (gates pass), then wrong answers replayed (its accuracy gate fails)."""
    tmp = tmp_path_factory.mktemp("allure-browser")
    html = tmp / "html"
    proc = _run(tmp, "oracle", "--toolbench-json", str(tmp / "run.json"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ids = [c["case_id"] for c in json.loads((tmp / "run.json").read_text())["cases"]]
    wrong = tmp / "wrong.jsonl"
    wrong.write_text("".join(json.dumps({"case_id": i, "responses": [
        {"role": "assistant", "content": "<answer>no idea</answer>"}]}) + "\n" for i in ids))
    proc = _run(tmp, f"replay:{wrong}", "--allure-html", str(html))
    assert proc.returncode == 10, proc.stdout[-3000:] + proc.stderr[-2000:]  # its gate failed
    assert "Allure HTML report: " in proc.stdout and "quality gates not shown" not in proc.stdout, \
        proc.stdout[-2000:]
    assert "open it from disk" in proc.stdout
    assert not (html / "data").exists() and not (html / "widgets").exists()  # one file
    page = (html / "index.html").read_text(encoding="utf-8")
    assert "googletagmanager" not in page and "gtag(" not in page  # opening it calls nobody
    yield (html / "index.html").as_uri(), html


def embedded(html: Path) -> dict[str, bytes]:
    """The data files a single-file report carries inside index.html (``d("path","base64")``)."""
    page = (html / "index.html").read_text(encoding="utf-8")
    return {path: base64.b64decode(body)
            for path, body in re.findall(r'd\("([^"]+)","([A-Za-z0-9+/=]*)"\)', page)}


def _chromium(tmp_path: Path, url: str, *extra: str) -> str:
    cmd = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
           "--virtual-time-budget=15000", *extra, url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return proc.stdout


def _visible_text(dom: str) -> str:
    body = dom[dom.find("<body"):]
    body = re.sub(r"<script.*?</script>", "", body, flags=re.S)
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))


def _page(tmp_path: Path, url: str, shot: str, size: str = "1400,1400", raw: bool = False) -> str:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / shot
    png.unlink(missing_ok=True)
    _chromium(tmp_path, url, f"--window-size={size}", f"--screenshot={png}")
    assert png.is_file() and png.stat().st_size > 10_000, f"no screenshot of {url}"
    dom = _chromium(tmp_path, url, "--dump-dom")
    return dom if raw else _visible_text(dom)


def test_first_screen_shows_every_runs_gates_and_headline_metrics(report: tuple[str, Path],
                                                                   tmp_path: Path) -> None:
    url, _ = report
    dom = _page(tmp_path, url, "overview.png", raw=True)
    assert "allure-app-loader" not in dom[dom.find("<body"):]  # rendered from disk, no spinner
    text = _visible_text(dom)
    assert "pytest-toolbench: oracle, replay:wrong.jsonl" in text  # the report's name
    # Opened on the first model: its pass rate, gates and attachments, not both models' mixed.
    assert "Environment: oracle" in text, text[:3000]
    assert re.search(r"Total 6 Passed 6", text) and "Failed" not in text.split("Metadata")[0]
    assert re.search(r"Quality Gates 4 Global Attachments 5", text), text[:3000]
    # The Metadata block: both runs' gate verdicts, data and backend, then each scenario's
    # headline with its CI, run by run; each failed gate whole.
    assert re.search(r"oracle\s+gates PASSED 4/4", text), text[:3000]
    assert re.search(r"replay:wrong\.jsonl\s+gates FAILED 3/4", text), text[:3000]
    assert re.search(r"oracle\s+data: toolhop sample fp [0-9a-f]{12}", text)
    assert re.search(r"replay:wrong\.jsonl\s+backend: replay", text)
    assert re.search(r"oracle\s+direct accuracy 100\.0% CI 100-100 n=2", text)
    # The tree starts with the environment's model (model / benchmark / scenario).
    assert text.index("oracle", text.index("Sort by")) > text.index("Sort by")
    # Each run's metric table and plots are global attachments under its model, in order.
    text = _page(tmp_path, url + "#/globalAttachments", "global-attachments.png")
    names = re.findall(r"oracle · run [0-9a-f-]+ · ([a-z ()]+?)(?= [a-z]+/[a-z]+ )", text)
    assert names == ["toolbench metrics (html)", "toolbench metrics", "toolbench metrics (json)",
                     "plot overview", "plot toolhop"], text[:3000]
    assert "replay:wrong.jsonl · run" not in text
    # Allure 3's metrics view: one row per metric, its CI and n in the name, models apart.
    text = _page(tmp_path, url + "#/metrics", "metrics.png")
    assert "oracle · toolhop.mandatory accuracy · 100.0% [95% CI 100.0%, 100.0%] n=2" in text
    assert "replay:wrong.jsonl · toolhop.mandatory accuracy · 0.0% [95% CI 0.0%, 0.0%] n=2" in text
    assert "ci_low" not in text and "(hops=3)" not in text


def test_quality_gates_tab_lists_every_runs_verdicts(report: tuple[str, Path],
                                                     tmp_path: Path) -> None:
    url, html = report
    gates = json.loads(embedded(html)["widgets/quality-gate.json"])  # environment id -> results
    by_model = {env: sorted((r["rule"].split(" · ")[0], r["success"]) for r in results)
                for env, results in gates.items()}
    assert by_model == {"oracle": [("oracle", True)] * 4,
                        "replay-wrong-jsonl": [("replay:wrong.jsonl", False)]
                        + [("replay:wrong.jsonl", True)] * 3}
    text = _page(tmp_path, url + "#/qualityGate", "quality-gates.png")
    assert "No quality gate results" not in text
    assert "oracle: toolhop.mandatory.accuracy>=0.5 passed: actual 1 satisfies" in text


def test_case_pages_name_the_model_and_have_no_unknown_steps(report: tuple[str, Path],
                                                             tmp_path: Path) -> None:
    url, html = report
    results = [json.loads(body) for path, body in embedded(html).items()
               if path.startswith("data/test-results/")]
    assert len(results) == 12
    titles = {r["name"] for r in results}
    assert len(titles) == 12  # the same case of two models: two titles
    assert {t.split("]")[0] + "]" for t in titles} == {"[oracle]", "[replay:wrong.jsonl]"}
    for r in results:  # suite path model / benchmark / scenario, no step without a status
        suite = [lab["value"] for name in ("parentSuite", "suite", "subSuite")
                 for lab in r["labels"] if lab["name"] == name]
        assert suite[0] == r["name"][1:].split("]")[0] and suite[1] == "toolhop", suite
        stages = r.get("setup", []) + r.get("teardown", [])
        assert all(s.get("status") not in (None, "unknown") for s in stages), stages
        assert not any("<lambda>" in s.get("name", "") for s in stages)
    case = next(r for r in results if r["name"].startswith("[replay:wrong.jsonl] toolhop-9001-mandatory"))
    dom = _page(tmp_path, f"{url}#/{case['id']}", "case.png", size="1400,2200", raw=True)
    text = _visible_text(dom)
    assert "[replay:wrong.jsonl] toolhop-9001-mandatory" in text
    assert "turn 1 · user:" in text and "turn 2 · assistant:" in text
    assert "score: wrong answer" in text
    assert "<lambda>" not in text  # pytest's own finalizers were "unknown" tear-down steps
    # The description (gold vs prediction, per-metric values) is rendered in a sandboxed frame
    # whose document is part of the DOM as markup.
    assert "Gold answer:" in dom and "Model answer:" in dom
    assert "answer_correct" in dom  # the per-metric values table
    assert "model 'replay:" in text and "hops '3'" in text  # readable parameters
