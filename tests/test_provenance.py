"""Provenance everywhere (issue 29 item 6): every output names the data (real or sample, revision,
fingerprint), and --baseline / ``toolbench compare`` refuse runs on different data or with no case
in common (exit 4, one line) unless --allow-different-data, which every output then states.

One oracle run on the bundled ToolHop sample is recorded once (module fixture); the other side of
each comparison is that report edited the way another run's would read: real data at another
revision, an older report without provenance, a run with no case in common.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_toolbench.results.provenance import BenchmarkData, mismatch, provenance_dict, run_data

REPO = Path(__file__).resolve().parents[1]
GATE = "toolhop.direct.accuracy>=baseline-0.02"


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GITHUB_"))}
    out.update(TOOLBENCH_DATA="sample", COLUMNS="80")
    return out


def suite(tmp: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "--model", "oracle", "-n", "0", "-q",
           "-p", "no:randomly", "-p", "no:cacheprovider", "--cache-dir", str(tmp / "cache"),
           "--runs-dir", str(tmp / "runs"), "--toolbench-json", str(tmp / f"{name}.json"),
           "--junitxml", str(tmp / f"{name}.xml"), "--toolbench-md", str(tmp / f"{name}.md"), *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env())


def compare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "compare", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env())


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("provenance")
    proc = suite(tmp, "sample", "--gate", "toolhop.direct.accuracy>=0.5")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads((tmp / "sample.json").read_text())
    real = json.loads(json.dumps(report))
    for d in real["run"]["data_sources"]:
        d.update(kind="real", sha256="0a51f71a" * 8, revision="b439d72" + "0" * 33, bundled=False,
                 pinned=True, source="huggingface:bytedance-research/ToolHop")
    real["run"].pop("data")
    (tmp / "real.json").write_text(json.dumps(real))
    old = json.loads(json.dumps(report))  # a report from before provenance: no kind, no run.data
    old["run"].pop("data")
    old["run"]["data_sources"] = []
    (tmp / "old.json").write_text(json.dumps(old))
    for c in old["cases"]:
        c["case_id"] = "x" + c["case_id"]
    (tmp / "old_disjoint.json").write_text(json.dumps(old))
    return {"tmp": tmp, "proc": proc, "report": report}


def test_every_output_names_the_data(runs):
    tmp, proc, report = runs["tmp"], runs["proc"], runs["report"]
    data = report["run"]["data"]
    fp = data["fingerprint"]
    assert data["kind"] == "sample" and data["benchmarks"][0]["fingerprint"] == fp
    section = proc.stdout.split("= pytest-toolbench =", 1)[1]
    lines = section.splitlines()
    assert all(len(ln) <= 80 and ln == ln.rstrip() for ln in lines if ln.startswith(("data", "    "))), section
    flat = " ".join(ln.strip() for ln in lines)
    assert (f"data: toolhop: bundled sample (not the real benchmark), no upstream revision, "
            f"fingerprint {fp}") in flat
    gate_lines = " ".join(ln.strip() for ln in proc.stdout.split("== gates:", 1)[1].splitlines())
    assert gate_lines.count(f"[data: toolhop sample fp {fp}]") == 4  # the gate and 3 error rates
    md = (tmp / "sample.md").read_text()
    assert f"**data:** toolhop: bundled sample (not the real benchmark), no upstream revision, fingerprint {fp}" in md
    suite_props = {p.get("name"): p.get("value") for p in
                   ET.parse(tmp / "sample.xml").getroot().find("testsuite").find("properties")}
    assert suite_props["toolbench.data.kind"] == "sample" and suite_props["toolbench.data.fingerprint"] == fp
    assert suite_props["toolbench.data.toolhop"] == f"sample revision none fingerprint {fp}"
    gate_case = next(tc for tc in ET.parse(tmp / "sample.xml").iter("testcase")
                     if tc.get("classname") == "toolbench-gates")
    reason = next(p.get("value") for p in gate_case.iter("property")
                  if p.get("name") == "toolbench.gate.reason")
    assert reason.endswith(f"[data: toolhop sample fp {fp}]")
    listed = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "runs", "--runs-dir",
                             str(tmp / "runs")], cwd=REPO, capture_output=True, text=True, env=env())
    first, *fields = listed.stdout.splitlines()  # one block (80 columns off a terminal)
    assert any(f.split() == ["data:", "toolhop", "sample", "fp", fp] for f in fields), listed.stdout


def test_allure_first_screen_names_each_run_s_data():
    from pytest_toolbench.report import allure_folder
    from pytest_toolbench.results.aggregate import RunMetrics

    record = allure_folder.make_entry(RunMetrics(scenarios=[]), [], run_id="r1", model="m",
                                       info={"data": "toolhop: real, revision b439d72, fingerprint 1a2b"})
    assert ("m", "data: toolhop: real, revision b439d72, fingerprint 1a2b") in \
        allure_folder.metadata_entries([record])


def test_a_baseline_on_other_data_is_refused_before_any_model_call(runs):
    tmp = runs["tmp"]
    proc = suite(tmp, "refused", "--baseline", str(tmp / "real.json"), "--gate", GATE)
    assert proc.returncode == 4, proc.stdout[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1, proc.stderr
    assert "different data" in errors[0] and "real vs sample" in errors[0]
    assert "--allow-different-data" in errors[0] and "passed" not in proc.stdout


def test_allow_different_data_says_so_everywhere(runs):
    tmp = runs["tmp"]
    proc = suite(tmp, "allowed", "--baseline", str(tmp / "real.json"), "--gate", GATE,
                 "--allow-different-data")
    assert proc.returncode == 0, proc.stdout[-3000:]
    flat = " ".join(ln.strip() for ln in proc.stdout.splitlines())
    assert "DIFFERENT DATA, compared anyway (--allow-different-data)" in flat
    assert "(DIFFERENT DATA, --allow-different-data)" in flat  # the comparison's table title
    gate = next(g for g in json.loads((tmp / "allowed.json").read_text())["gates"] if g["gate"] == GATE)
    assert "baseline toolhop real@b439d7200000" in gate["reason"]
    assert "DIFFERENT DATA, compared anyway" in gate["reason"]
    report = json.loads((tmp / "allowed.json").read_text())
    assert report["baseline"]["different_data"][0].startswith("DIFFERENT DATA")
    assert "DIFFERENT DATA" in (tmp / "allowed.md").read_text()
    props = {p.get("name") for p in ET.parse(tmp / "allowed.xml").getroot().iter("property")}
    assert "toolbench.baseline.different_data" in props


def test_an_older_baseline_without_provenance_is_compared_when_cases_pair(runs):
    tmp = runs["tmp"]
    proc = suite(tmp, "old", "--baseline", str(tmp / "old.json"), "--gate", GATE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    flat = " ".join(ln.strip() for ln in proc.stdout.splitlines())
    assert "baseline toolhop unknown data" in flat
    proc = suite(tmp, "old2", "--baseline", str(tmp / "old_disjoint.json"), "--gate", GATE)
    assert proc.returncode == 4
    assert "no case in common" in proc.stderr and "unknown in one of them" in proc.stderr


def test_toolbench_compare_refuses_unlike_runs_and_allows_them_on_request(runs):
    tmp = runs["tmp"]
    refused = compare(str(tmp / "real.json"), str(tmp / "sample.json"))
    assert refused.returncode == 4 and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1 and "different data" in refused.stderr
    allowed = compare(str(tmp / "real.json"), str(tmp / "sample.json"), "--allow-different-data",
                      "--json", str(tmp / "cmp.json"))
    assert allowed.returncode == 0, allowed.stderr
    assert "DIFFERENT DATA" in allowed.stdout and "data: toolhop real@b439d7200000" in allowed.stdout
    assert json.loads((tmp / "cmp.json").read_text())["different_data"]
    same = compare(str(tmp / "sample.json"), str(tmp / "sample.json"))
    assert same.returncode == 0 and "DIFFERENT DATA" not in same.stdout
    older = compare(str(tmp / "old.json"), str(tmp / "sample.json"))  # unknown, cases pair
    assert older.returncode == 0, older.stderr
    disjoint = compare(str(tmp / "old_disjoint.json"), str(tmp / "sample.json"))
    assert disjoint.returncode == 4 and "no case in common" in disjoint.stderr


def test_runs_of_different_benchmarks_are_named_not_counted():
    from pytest_toolbench.compare.same_data import keys_mismatch

    toolhop = run_data([{"benchmark": "toolhop", "sha256": "a" * 64, "kind": "sample", "bundled": True}])
    familytool = run_data([{"benchmark": "familytool", "sha256": "b" * 64, "kind": "sample",
                            "bundled": True}])
    what = keys_mismatch("the baseline", familytool, {("familytool", "extraction", "b-0")},
                         "this run", toolhop, {("toolhop", "direct", "1"), ("toolhop", "free", "1")})
    assert what == "the baseline ran familytool and this run ran toolhop: no benchmark in common"
    assert keys_mismatch("A", [], set(), "B", toolhop, set()) == (
        "A ran nothing and B ran toolhop: no benchmark in common")


def test_fingerprints_and_mismatches_in_memory():
    sample = [{"benchmark": "toolhop", "sha256": "a" * 64, "kind": "sample", "bundled": True,
               "records": 6}]
    real = [{"benchmark": "toolhop", "sha256": "b" * 64, "kind": "real", "revision": "c" * 40,
             "pinned": True, "records": 995, "source": "huggingface:bytedance-research/ToolHop"}]
    old = [{"benchmark": "toolhop", "path": "x"}]  # no sha256, no kind
    (s,), (r,), (o,) = run_data(sample), run_data(real), run_data(old)
    assert s.kind == "sample" and s.known and r.kind == "real" and r.revision == "c" * 12
    assert o.kind == "unknown" and not o.known
    assert provenance_dict(real)["kind"] == "real"
    assert "real@cccccccccccc" in r.short() and "huggingface:bytedance-research/ToolHop" in r.text()
    what = mismatch("A", [r], "B", [s], ["toolhop"], n_common=6, n_only_ref=0, n_only_other=0)
    assert what and "real vs sample" in what and "another revision" in what
    assert mismatch("A", [s], "B", [s], ["toolhop"], n_common=1, n_only_ref=0, n_only_other=0) is None
    assert mismatch("A", [o], "B", [s], ["toolhop"], n_common=1, n_only_ref=0, n_only_other=0) is None
    assert "no case in common" in mismatch("A", [o], "B", [s], ["toolhop"], n_common=0,
                                           n_only_ref=80, n_only_other=6)
    assert BenchmarkData(benchmark="metabench", kind="reconstruction", fingerprint="f").text() == (
        "metabench: this project's reconstruction (nothing released upstream), no upstream "
        "revision, fingerprint f")
