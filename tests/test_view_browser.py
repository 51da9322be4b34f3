"""The ``toolbench view`` site in headless Chromium, opened from disk (``file://``, no server):
built from three real ToolHop runs (tests/view_runs.py), then the leaderboard sorted, two runs
compared side by side, a flipped case opened from both transcripts, a run's case list filtered
and paged, with screenshots saved under the test's tmp dir. No page may raise a script error or
ask for anything but local files.

Drives Debian's ``/usr/bin/chromium`` through playwright (never a downloaded browser); skips with
the reason when either is missing. ``-m "not browser"`` leaves it out locally.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from view_runs import make_runs

from pytest_toolbench.view.site import build_site, unpack_chunk

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and Path(p).exists()), None)
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

try:
    import playwright.sync_api  # noqa: F401

    NO_PLAYWRIGHT = None
except ImportError:
    NO_PLAYWRIGHT = "the playwright package is not installed (pip install playwright; the dev extra has it)"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)"),
    pytest.mark.skipif(NO_PLAYWRIGHT is not None, reason=str(NO_PLAYWRIGHT)),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("view-browser")
    records = make_runs(tmp)
    build_site([tmp / "runs"], tmp / "site")
    # a 120-case record (the half-wrong run's cases, repeated under new ids) for the pager, as
    # recorded before a case's wall time was kept
    big = json.loads((tmp / "half.json").read_text())
    cases = big["cases"]
    big["cases"] = [{**c, "case_id": f"{c['case_id']}-copy{k}", "wall_s": None}
                    for k in range(120 // len(cases) + 1) for c in cases][:120]
    big["run"]["run_id"] = "big"
    (tmp / "big.json").write_text(json.dumps(big))
    build_site([tmp / "big.json"], tmp / "big-site")
    return {"tmp": tmp, "site": tmp / "site", "big": tmp / "big-site",
            "ids": {k: v["run"]["run_id"] for k, v in records.items()}, "records": records}


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, tmp_path: Path) -> Iterator:
    """A fresh page that fails the test on a script error or on any non-file request."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    outside: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("request", lambda r: outside.append(r.url) if not r.url.startswith("file://") else None)
    yield pg
    context.close()
    assert not errors, errors
    assert not outside, outside


def _rows(pg, group: str) -> list[str]:
    return pg.eval_on_selector_all(f"#board-{group} tbody tr", "rs => rs.map(r => r.dataset.key)")


def test_leaderboard_sorts_within_its_group_and_opens_a_side_by_side(site: dict, page, tmp_path: Path) -> None:
    ids = site["ids"]
    page.goto((site["site"] / "index.html").as_uri())
    assert page.locator("section.group").count() == 2
    assert sorted(_rows(page, "A")) == sorted([ids["oracle"], ids["half"]])
    assert _rows(page, "B") == [ids["subset"]]
    header = page.locator("#board-A th.metric", has_text="mandatory")
    header.click()  # tablesort: descending first (highest accuracy on top)
    assert _rows(page, "A") == [ids["oracle"], ids["half"]]
    header.click()
    assert _rows(page, "A") == [ids["half"], ids["oracle"]]
    page.screenshot(path=str(tmp_path / "leaderboard.png"), full_page=True)

    page.check(f"input.pick[value='{ids['oracle']}']")
    page.check(f"input.pick[value='{ids['half']}']")
    page.click("#compare-btn")
    page.wait_for_url(f"**/diff-{ids['oracle']}--{ids['half']}.html")
    assert "replay:" in page.locator("h1").inner_text()
    page.screenshot(path=str(tmp_path / "diff.png"), full_page=True)
    flip = page.locator("li.flip", has_text="toolhop-9001-mandatory")
    flip.locator("a.case-b").click()
    page.wait_for_selector("#transcript")
    assert page.locator("#case-outcome").inner_text() == "failed"
    assert "definitely-wrong" in page.locator("#transcript").inner_text()
    page.screenshot(path=str(tmp_path / "case-b.png"), full_page=True)
    page.go_back()
    page.locator("li.flip", has_text="toolhop-9001-mandatory").locator("a.case-a").click()
    page.wait_for_selector("#transcript")
    assert page.locator("#case-outcome").inner_text() == "passed"
    transcript = page.locator("#transcript").inner_text().lower()  # roles are drawn upper-case
    assert "calls film_director_finder" in transcript and "tool result of film_director_finder" in transcript
    # its wall time and start
    assert re.search(r"latency \S+ s · ran \d+\.\d\d s from \d\d:\d\d:\d\d\.\d{3} UTC",
                     page.inner_text("body"))
    page.screenshot(path=str(tmp_path / "case-a.png"), full_page=True)
    assert (tmp_path / "leaderboard.png").stat().st_size > 10_000


def test_compare_button_says_why_when_a_pair_is_not_comparable(site: dict, page) -> None:
    page.goto((site["site"] / "index.html").as_uri())
    page.check(f"input.pick[value='{site['ids']['oracle']}']")
    page.click("#compare-btn")
    assert "tick exactly two runs (1 ticked)" in page.locator("#compare-msg").inner_text()


def test_run_page_filters_searches_and_plots(site: dict, page, tmp_path: Path) -> None:
    key = site["ids"]["half"]
    page.goto((site["site"] / f"run-{key}.html").as_uri())
    page.wait_for_selector("#cases-table tbody tr")
    info = page.locator(".pageinfo")
    assert info.inner_text() == "1–18 of 18 cases"
    page.select_option("select[data-filter=outcome]", "failed")
    assert info.inner_text() == "1–6 of 6 cases (18 in all)"
    ids = page.eval_on_selector_all("#cases-table tbody a", "as => as.map(a => a.textContent)")
    assert sorted(ids) == sorted(f"toolhop-{r}-{s}" for r in (9001, 9003) for s in ("direct", "mandatory", "free"))
    page.select_option("select[data-filter=outcome]", "")
    page.select_option("select[data-filter=hops]", "3")
    assert info.inner_text() == "1–6 of 6 cases (18 in all)"
    page.select_option("select[data-filter=hops]", "")
    page.fill("#case-search", "eiffel")  # 9002's question: "... the Eiffel Tower ..."
    page.wait_for_function("document.querySelector('.pageinfo').textContent.startsWith('1–3 of 3')")
    assert page.evaluate("Array.from(document.querySelectorAll('canvas[data-plot]'))"
                         ".every(c => window.Chart.getChart(c) !== undefined)")
    page.locator("#cases-table tbody a").first.click()
    page.wait_for_selector("#transcript")
    assert page.locator("h1 .mono").inner_text().startswith("toolhop-9002-")
    page.go_back()
    page.wait_for_selector("#cases-table tbody tr")
    # last: a full-page shot resizes the viewport, and the charts' redraw can swallow a click
    page.screenshot(path=str(tmp_path / "run.png"), full_page=True)


def test_the_case_list_pages_through_a_long_run(site: dict, page) -> None:
    page.goto((site["big"] / "run-big.html").as_uri())
    page.wait_for_selector("#cases-table tbody tr")
    info = page.locator(".pageinfo")
    assert info.inner_text() == "1–50 of 120 cases"
    assert page.locator("#cases-table tbody tr").count() == 50
    page.click("text=next ›")
    page.click("text=next ›")
    assert info.inner_text() == "101–120 of 120 cases"
    page.locator("#cases-table tbody a").last.click()  # case 119: in the third chunk file
    page.wait_for_selector("#transcript")
    assert page.evaluate("TB.hashParams()") == {"run": "big", "i": "119"}
    assert page.locator("h1 .mono").inner_text() == page.evaluate("TB.chunks['big/2'][19].id")
    assert "latency" in page.inner_text("body") and " · ran " not in page.inner_text("body")
    # the chunk file stores its repeated long texts once; the page got every case back whole
    # (the copies repeat each tool's source and the transcripts' long texts)
    _, _, packed = json.loads("[" + re.search(r"TB\.chunkz\((.*)\);", (
        site["big"] / "data" / "big" / "c2.js").read_text(), re.S).group(1) + "]")
    shared, texts = unpack_chunk(packed)
    assert texts, "the 120 copies share no long text: this test no longer checks TB.unshare"
    cases = json.loads((site["tmp"] / "big.json").read_text())["cases"]
    assert page.evaluate("TB.chunks['big/2'][19].transcript") == cases[119]["transcript"]
    assert page.evaluate("TB.chunks['big/2'][19].details") == cases[119]["details"]
