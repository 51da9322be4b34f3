"""The Allure 3 HTML report in headless Chromium: a real oracle run on the bundled ToolHop sample,
built with ``--allure-html``, served over http on localhost, screenshotted (overview, the
metrics table, one case) into ``.toolbench/test-artifacts/allure/``, and checked on the DOM for
the metric table, the gate verdict and the conversation steps.

Skips with a reason when node/Allure 3 (``npm install --prefix .toolbench/allure allure@3``) or
Debian's ``chromium`` is missing.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_toolbench.report.allure_html import missing_reason

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / ".toolbench" / "test-artifacts" / "allure"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.slow,  # a real run, an npm Allure build and six Chromium page loads: ~30 s
    pytest.mark.skipif(missing_reason([REPO]) is not None,
                       reason=f"Allure HTML cannot be built: {missing_reason([REPO])}"),
    pytest.mark.skipif(CHROMIUM is None,
                       reason="chromium is not installed (apt-get install -y chromium)"),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(base URL, html dir) of a report built from a 2-sample oracle run, served on localhost."""
    tmp = tmp_path_factory.mktemp("allure-browser")
    html = tmp / "html"
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider", "-q",
           "-p", "no:randomly", "--cache-dir", str(tmp / "cache"), "--model", "oracle",
           "--limit", "2", "--alluredir", str(tmp / "results"), "--allure-html", str(html),
           "--toolbench-json", str(tmp / "run.json"), "--gate", "toolhop.mandatory.accuracy>=0.5"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Allure HTML report: " in proc.stdout, proc.stdout[-2000:]
    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Handler, directory=str(html))

    class Quiet(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):  # a closed browser socket is not news
            pass

    server = Quiet(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/index.html", html
    finally:
        server.shutdown()
        server.server_close()


def _chromium(tmp_path: Path, url: str, *extra: str) -> str:
    cmd = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
           "--virtual-time-budget=15000", *extra, url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return proc.stdout


def _visible_text(dom: str) -> str:
    body = dom[dom.find("<body"):]
    body = re.sub(r"<script.*?</script>", "", body, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))


def _page(tmp_path: Path, url: str, shot: str, size: str = "1400,1400", raw: bool = False) -> str:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / shot
    png.unlink(missing_ok=True)
    _chromium(tmp_path, url, f"--window-size={size}", f"--screenshot={png}")
    assert png.is_file() and png.stat().st_size > 10_000, f"no screenshot of {url}"
    dom = _chromium(tmp_path, url, "--dump-dom")
    return dom if raw else _visible_text(dom)


def test_overview_shows_metrics_and_gate_verdict(report: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = report
    text = _page(tmp_path, url, "overview.png")
    # First screen: the environment block leads with the gate verdict and headline metrics.
    assert "gates PASSED (4/4 passed)" in text
    assert re.search(r"toolhop\.mandatory accuracy 100\.0% \[95% CI 100\.0%, 100\.0%\] n=2", text), text[:2000]
    assert "model oracle" in text
    # The run-level metric table (HTML) and plots are global attachments of the run.
    text = _page(tmp_path, url + "#/globalAttachments", "global-attachments.png")
    assert "toolbench metrics (html)" in text and "plot toolhop.mandatory.accuracy.by-hops" in text
    # Allure 3's metrics view lists every metric with its CI bounds and subgroups.
    text = _page(tmp_path, url + "#/metrics", "metrics.png")
    assert "toolhop.mandatory accuracy (hops=3)" in text
    assert "toolhop.mandatory accuracy (ci_low)" in text


def test_case_page_shows_conversation_steps_gold_and_metrics(report: tuple[str, Path],
                                                             tmp_path: Path) -> None:
    url, html = report
    results = [json.loads(p.read_text()) for p in (html / "data" / "test-results").glob("*.json")]
    case = next(r for r in results if "-mandatory" in r.get("name", ""))
    dom = _page(tmp_path, f"{url}#/{case['id']}", "case.png", size="1400,1800", raw=True)
    text = _visible_text(dom)
    assert "turn 1 · user:" in text and "turn 2 · assistant:" in text
    assert "score: passed" in text
    # The description (gold vs prediction, per-metric values) is rendered in a sandboxed frame
    # whose document is part of the DOM as markup.
    assert "Gold answer:" in dom and "Model answer:" in dom
    assert "answer_correct" in dom  # the per-metric values table
    assert "model 'oracle'" in text and "hops '3'" in text  # readable parameters
