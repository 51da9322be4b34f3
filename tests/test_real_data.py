"""The real benchmark data (issue 29): fetched once, pinned, verified, cached, refused offline.

Every run here talks to a local server that plays the Hugging Face Hub (``HF_ENDPOINT``) and the
GitHub raw host (``TOOLBENCH_GITHUB_RAW_BASE``), serving small files whose pins a test registry
holds (``TOOLBENCH_DATA_REGISTRY``); the caches live in a temporary ``HF_HOME``. Nothing reaches
the internet. The real pins are checked against ``../shared/datasets`` where those files are.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fake_data_hub import FakeDataHub
from shared_data import REAL_FAMILYTOOL

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
TOOLHOP_REPO, TBH_REPO, FT_REPO = "test-org/ToolHop", "test-org/ToolBeHonest", "test-org/FamilyTool"
TOOLHOP_REV, TBH_REV, FT_REV = "a" * 40, "b" * 40, "c" * 40
OTHER_REV = "d" * 40
TOOLHOP_URL = f"/datasets/{TOOLHOP_REPO}/resolve/{TOOLHOP_REV}/data/ToolHop.json"
FT_FILES = {"familytool-b.jsonl": "datasets/familytool-b.jsonl",
            "familytool-e.jsonl": "datasets/familytool-e.jsonl",
            "familykg-b.txt": "KG/familykg-b.txt", "familykg-e.txt": "KG/familykg-e.txt"}
FT_URL = f"/{FT_REPO}/{FT_REV}/datasets/familytool-b.jsonl"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def lines(data: bytes) -> int:
    return sum(1 for line in data.splitlines() if line.strip())


def toolhop_bytes() -> bytes:
    return (DATA / "toolhop" / "ToolHop.json").read_bytes()


def registry_json() -> dict:
    th = toolhop_bytes()
    en = (DATA / "toolbehonest" / "sample_en.json").read_bytes()
    zh = (DATA / "toolbehonest" / "sample_zh.json").read_bytes()
    ft = {name: (DATA / "familytool" / name).read_bytes() for name in FT_FILES}
    return {"benchmarks": [
        {"benchmark": "toolhop", "host": "huggingface", "repo": TOOLHOP_REPO, "revision": TOOLHOP_REV,
         "files": [{"name": "ToolHop.json", "path": "data/ToolHop.json", "sha256": sha(th),
                    "size": len(th), "records": len(json.loads(th))}]},
        {"benchmark": "toolbehonest", "host": "huggingface", "repo": TBH_REPO, "revision": TBH_REV,
         "files": [{"name": "test_en.json", "path": "test_en.json", "sha256": sha(en),
                    "sha256_confirmed": False, "size": len(en), "records": len(json.loads(en))},
                   {"name": "test_zh.json", "path": "test_zh.json", "records": len(json.loads(zh))}]},
        {"benchmark": "familytool", "host": "github", "repo": FT_REPO, "revision": FT_REV,
         "files": [{"name": name, "path": path, "sha256": sha(ft[name]), "size": len(ft[name]),
                    "records": lines(ft[name]), "counting": "lines"} for name, path in FT_FILES.items()]},
        {"benchmark": "metabench", "host": "none"},
    ]}


def serve_all(hub: FakeDataHub) -> FakeDataHub:
    hub.add_hub_file(TOOLHOP_REPO, TOOLHOP_REV, "data/ToolHop.json", toolhop_bytes())
    hub.add_hub_file(TBH_REPO, TBH_REV, "test_en.json", (DATA / "toolbehonest" / "sample_en.json").read_bytes())
    hub.add_hub_file(TBH_REPO, TBH_REV, "test_zh.json", (DATA / "toolbehonest" / "sample_zh.json").read_bytes())
    for name, path in FT_FILES.items():
        hub.add_github_file(FT_REPO, FT_REV, path, (DATA / "familytool" / name).read_bytes())
    return hub


@pytest.fixture
def hub():
    with FakeDataHub() as server:
        yield serve_all(server)


@pytest.fixture
def env(tmp_path: Path, hub: FakeDataHub) -> dict[str, str]:
    """A subprocess environment: real data (no $TOOLBENCH_DATA), a fresh HF_HOME, the local hub."""
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps(registry_json()), encoding="utf-8")
    out = {k: v for k, v in os.environ.items()
           if k not in ("TOOLBENCH_DATA", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE",
                        "HUGGINGFACE_HUB_CACHE", "HF_ASSETS_CACHE", "HF_TOKEN")}
    out.update(HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT=hub.url, TOOLBENCH_GITHUB_RAW_BASE=hub.url,
               TOOLBENCH_DATA_REGISTRY=str(registry), TOOLBENCH_RUNS_DIR=str(tmp_path / "runs"),
               HF_HUB_DISABLE_TELEMETRY="1")
    return out


def run_suite(env: dict[str, str], suite: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", f"suites/{suite}", "--model", "oracle", "-q",
           "-p", "no:cacheprovider", "-p", "no:randomly", "--no-cache", *args]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def toolbench(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if "pytest-toolbench:" in line]


def report(tmp_path: Path, name: str = "r.json") -> dict:
    return json.loads((tmp_path / name).read_text(encoding="utf-8"))


# --- end to end ----------------------------------------------------------------------------------


def test_first_fetch_then_a_cached_rerun_with_the_server_gone(tmp_path: Path, hub: FakeDataHub, env):
    """No data option: the real (here: test-pinned) file is downloaded once, verified, run on;
    the report says real, with source, revision, sha256, records and fingerprint. The second
    run reads the cache with the server stopped."""
    first = run_suite(env, "toolhop", "-n", "0", "--toolbench-json", str(tmp_path / "r.json"))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "18 passed" in first.stdout
    assert hub.gets[TOOLHOP_URL] == 1
    assert "toolbench data: downloaded toolhop data/ToolHop.json" in first.stderr  # progress
    sources = [d for d in report(tmp_path)["run"]["data_sources"] if d["benchmark"] == "toolhop"]
    assert len(sources) == 1
    src = sources[0]
    assert src["kind"] == "real" and src["bundled"] is False and src["verified"] is True
    assert src["source"] == f"huggingface:{TOOLHOP_REPO}" and src["revision"] == TOOLHOP_REV
    assert src["pinned"] is True and src["commit"] == TOOLHOP_REV
    assert src["sha256"] == sha(toolhop_bytes()) and src["fingerprint"] == src["sha256"][:12]
    assert src["records"] == 6 and src["expected_records"] == 6
    assert src["url"] == hub.url + TOOLHOP_URL
    assert str(tmp_path / "hf" / "hub") in src["path"]  # shown at its place in the HF cache
    screen = " ".join(first.stdout.split())  # the data line, however it is wrapped
    assert "data: toolhop: real" in screen and f"{TOOLHOP_REPO}" in screen and TOOLHOP_REV[:12] in screen

    hub.stop()
    again = run_suite(env, "toolhop", "-n", "0")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "18 passed" in again.stdout and "downloaded" not in again.stderr


def test_two_xdist_workers_read_what_the_controller_fetched_once(tmp_path: Path, hub: FakeDataHub, env):
    """-n 2: the controller fetches at configure, before the workers start; each file is
    downloaded once (GitHub files through the harness's own downloader)."""
    hub.delay_s = 0.3
    proc = run_suite(env, "familytool", "-n", "2", "--scenario", "tooluse-golden")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "passed" in proc.stdout
    gets = {p: n for p, n in hub.gets.items() if p.startswith(f"/{FT_REPO}/")}
    assert sorted(gets) == sorted(f"/{FT_REPO}/{FT_REV}/{p}" for p in FT_FILES.values())
    assert set(gets.values()) == {1}


def test_two_runs_started_together_download_each_file_once(hub: FakeDataHub, env):
    """The file lock: two processes fetching at once download each file once; the second waits
    and then finds it."""
    hub.delay_s = 1.0
    cmd = [sys.executable, "-m", "pytest_toolbench.cli", "data", "fetch", "familytool", "toolhop"]
    procs = [subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert all(n == 1 for n in hub.gets.values()), hub.gets
    assert len(hub.gets) == 5  # 4 GitHub files + ToolHop
    assert any("waiting" in err for _, err in outs)


def test_checksum_mismatch_is_refused_before_any_model_call(tmp_path: Path, hub: FakeDataHub, env):
    """The hub serves other bytes than the pin: exit 4, one line naming the file, the expected
    and the actual sha256; a GitHub file that does not match is not even kept in the cache."""
    wrong = toolhop_bytes().replace(b"9001", b"9999", 1)
    hub.add_hub_file(TOOLHOP_REPO, TOOLHOP_REV, "data/ToolHop.json", wrong)
    proc = run_suite(env, "toolhop", "-n", "0")
    assert proc.returncode == 4
    [line] = error_lines(proc)
    assert "data/ToolHop.json" in line and f"expected {sha(toolhop_bytes())}" in line
    assert f"got {sha(wrong)}" in line and "refused" in line
    assert "passed" not in proc.stdout

    bad = b'[{"role": "id"}]\n'
    hub.add_github_file(FT_REPO, FT_REV, "datasets/familytool-b.jsonl", bad)
    proc = run_suite(env, "familytool", "-n", "0")
    assert proc.returncode == 4
    [line] = error_lines(proc)
    assert "datasets/familytool-b.jsonl" in line and f"got {sha(bad)}" in line and "not kept" in line
    ft_cache = tmp_path / "hf" / "assets" / "pytest-toolbench" / "github"
    assert not list(ft_cache.rglob("familytool-b.jsonl"))


def test_a_corrupted_cached_file_is_refused_then_fetched_again(tmp_path: Path, hub: FakeDataHub, env):
    assert run_suite(env, "toolhop", "-n", "0", "--collect-only").returncode == 0
    [blob] = [p for p in (tmp_path / "hf" / "hub").rglob("blobs/*") if p.is_file()]
    blob.chmod(0o644)
    blob.write_bytes(b"[]")
    proc = run_suite(env, "toolhop", "-n", "0")
    assert proc.returncode == 4
    [line] = error_lines(proc)
    assert f"got {sha(b'[]')}" in line and "toolbench data fetch toolhop --force" in line
    fixed = toolbench(env, "data", "fetch", "toolhop", "--force")
    assert fixed.returncode == 0, fixed.stderr
    assert run_suite(env, "toolhop", "-n", "0").returncode == 0


def test_a_transfer_cut_short_leaves_no_file(tmp_path: Path, hub: FakeDataHub, env):
    """GitHub file: Content-Length announced, half sent, connection closed; Hub file: fewer bytes
    than its HEAD announced. Both refused with one line; nothing a later run could read is left;
    with the server fixed the next run downloads and passes."""
    hub.cut[FT_URL] = 1000
    proc = run_suite(env, "familytool", "-n", "0", "--scenario", "tooluse-golden")
    assert proc.returncode == 4
    [line] = error_lines(proc)
    assert "datasets/familytool-b.jsonl" in line and "cut short" in line and "ways out" in line
    ft_cache = tmp_path / "hf" / "assets" / "pytest-toolbench" / "github"
    assert not [p for p in ft_cache.rglob("*") if p.is_file()]
    del hub.cut[FT_URL]
    assert run_suite(env, "familytool", "-n", "0", "--scenario", "tooluse-golden").returncode == 0

    hub.short[TOOLHOP_URL] = 500
    proc = run_suite(env, "toolhop", "-n", "0")
    assert proc.returncode == 4
    [line] = error_lines(proc)
    assert "data/ToolHop.json" in line and "cut short" in line
    assert not [p for p in (tmp_path / "hf" / "hub").rglob("blobs/*") if p.is_file()]


def test_server_down_is_one_line_with_the_url_the_cause_and_the_ways_out(env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**env, "HF_ENDPOINT": f"http://127.0.0.1:{port}", "TOOLBENCH_GITHUB_RAW_BASE": f"http://127.0.0.1:{port}"}
    started = time.monotonic()
    proc = run_suite(env, "toolhop", "-n", "2")
    assert time.monotonic() - started < 60  # no library backoff
    assert proc.returncode == 4
    [line] = error_lines(proc)
    assert f"http://127.0.0.1:{port}{TOOLHOP_URL}" in line and "connection refused" in line
    assert "toolbench data fetch toolhop" in line and "--data-dir" in line and "--data sample" in line
    proc = run_suite(env, "familytool", "-n", "0")
    assert proc.returncode == 4 and "connection refused" in error_lines(proc)[0]


def test_a_mirror_password_in_the_endpoints_stays_out_of_the_reports(tmp_path: Path, hub: FakeDataHub, env):
    """A mirror behind basic auth, given as $HF_ENDPOINT / $TOOLBENCH_GITHUB_RAW_BASE with its
    password: the password is used, but the data provenance, the terminal and an error line show
    it masked."""
    secret = "s3cret-Pa55"
    with_password = f"http://mirror-user:{secret}@127.0.0.1:{hub.port}"
    env = {**env, "HF_ENDPOINT": with_password, "TOOLBENCH_GITHUB_RAW_BASE": with_password}
    for suite in ("toolhop", "familytool"):
        proc = run_suite(env, suite, "-n", "0", "--limit", "1", "--toolbench-json", str(tmp_path / "r.json"))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        written = (tmp_path / "r.json").read_text(encoding="utf-8")
        assert secret not in written and secret not in proc.stdout + proc.stderr
        sources = report(tmp_path)["run"]["data_sources"]
        assert sources and all(src["url"].startswith(f"http://mirror-user:***@127.0.0.1:{hub.port}/")
                               for src in sources)
    listed = toolbench(env, "data", "list", "--json")
    assert listed.returncode == 0 and secret not in listed.stdout + listed.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = f"http://mirror-user:{secret}@127.0.0.1:{port}"
    proc = run_suite({**env, "HF_ENDPOINT": down, "TOOLBENCH_GITHUB_RAW_BASE": down,
                      "HF_HOME": str(tmp_path / "empty-hf")}, "toolhop", "-n", "0")
    assert proc.returncode == 4 and secret not in proc.stdout + proc.stderr
    [line] = error_lines(proc)
    assert f"http://mirror-user:***@127.0.0.1:{port}{TOOLHOP_URL}" in line and "connection refused" in line


def test_hf_hub_offline_reads_only_the_cache(hub: FakeDataHub, env):
    offline = {**env, "HF_HUB_OFFLINE": "1"}
    proc = run_suite(offline, "toolhop", "-n", "0")
    assert proc.returncode == 4 and not hub.log
    [line] = error_lines(proc)
    assert "HF_HUB_OFFLINE is set" in line and "not in the cache" in line and "--data sample" in line
    assert toolbench(env, "data", "fetch").returncode == 0
    hub.log.clear()
    for suite in ("toolhop", "familytool", "toolbehonest"):
        proc = run_suite(offline, suite, "-n", "0", "--limit", "1")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not hub.log


def test_a_run_refused_for_its_data_leaves_nothing_in_a_new_folder(tmp_path: Path, env):
    """Run from a folder of its own (the cache and runs folders default to `.toolbench` there),
    offline with no data: refused, and nothing made there (the kept-parse folder was made at
    configure, before the data was resolved)."""
    here = tmp_path / "new-project"
    here.mkdir()
    offline = {k: v for k, v in env.items() if k != "TOOLBENCH_RUNS_DIR"}
    offline["HF_HUB_OFFLINE"] = "1"
    proc = subprocess.run([sys.executable, "-m", "pytest", str(REPO / "suites" / "toolhop"),
                           "--model", "oracle", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
                          cwd=here, env=offline, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4 and "HF_HUB_OFFLINE is set" in proc.stdout + proc.stderr
    assert list(here.iterdir()) == []


def test_another_revision_is_chosen_knowingly(tmp_path: Path, hub: FakeDataHub, env):
    """--data-revision toolhop=main: the branch's file (other bytes) is used; the checks only warn
    and the report says the revision is not the pinned one."""
    other = json.dumps(json.loads(toolhop_bytes())[:2]).encode()
    hub.add_hub_file(TOOLHOP_REPO, OTHER_REV, "data/ToolHop.json", other, branch="main")
    proc = run_suite(env, "toolhop", "-n", "0", "--data-revision", "toolhop=main",
                     "--toolbench-json", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "6 passed" in proc.stdout
    assert "chosen with --data-revision" in proc.stdout  # the warnings summary
    [src] = [d for d in report(tmp_path)["run"]["data_sources"] if d["benchmark"] == "toolhop"]
    assert src["kind"] == "real" and src["pinned"] is False and src["revision"] == "main"
    assert src["commit"] == OTHER_REV and src["verified"] is False and src["records"] == 2
    assert report(tmp_path)["run"]["settings"]["data_revisions"] == ["toolhop=main"]


def test_sample_and_data_dir_never_touch_the_network(tmp_path: Path, hub: FakeDataHub, env):
    proc = run_suite(env, "toolhop", "-n", "0", "--data", "sample", "--toolbench-json", str(tmp_path / "r.json"))
    assert proc.returncode == 0 and not hub.log
    [src] = report(tmp_path)["run"]["data_sources"]
    assert src["kind"] == "sample" and src["bundled"] is True
    proc = run_suite({**env, "TOOLBENCH_DATA": "sample"}, "toolhop", "-n", "0")
    assert proc.returncode == 0 and not hub.log
    proc = run_suite(env, "toolhop", "-n", "0", "--data-dir", str(DATA), "--toolbench-json",
                     str(tmp_path / "d.json"))
    assert proc.returncode == 0 and not hub.log
    # the bundled file is the one the test registry pins: a local copy of the pinned file is real
    [src] = report(tmp_path, "d.json")["run"]["data_sources"]
    assert src["kind"] == "sample"  # ... but inside data/ it is the bundled sample, said so
    proc = run_suite(env, "toolhop", "--data", "sample", "--data-revision", "toolhop=main")
    assert proc.returncode == 4 and "--data-revision" in error_lines(proc)[0]


def test_meta_bench_is_this_projects_reconstruction_in_a_real_run(tmp_path: Path, hub: FakeDataHub, env):
    proc = run_suite(env, "metabench", "-n", "0", "--limit", "1", "--toolbench-json", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not hub.log
    sources = report(tmp_path)["run"]["data_sources"]
    assert sources and {d["kind"] for d in sources} == {"reconstruction"}
    assert all(d["source"] == "this project's reconstruction" for d in sources)
    assert "this project's reconstruction" in proc.stdout + json.dumps(sources)


def test_data_list_fetch_verify(tmp_path: Path, hub: FakeDataHub, env):
    listed = toolbench(env, "data", "list", "--json")
    assert listed.returncode == 0
    rows = json.loads(listed.stdout)
    assert {r["benchmark"] for r in rows} == {"toolhop", "toolbehonest", "familytool", "metabench"}
    assert not any(r["cached"] for r in rows if r["cached"] is not None)
    assert toolbench(env, "data", "verify").returncode == 1
    fetched = toolbench(env, "data", "fetch")
    assert fetched.returncode == 0, fetched.stderr
    assert "toolbench data: warning" not in fetched.stderr
    rows = json.loads(toolbench(env, "data", "list", "--json").stdout)
    assert all(r["cached"] for r in rows if r["cached"] is not None)
    assert all(r["where"].startswith(str(tmp_path / "hf")) for r in rows if r["cached"])
    text = toolbench(env, "data", "list").stdout
    assert "huggingface:test-org/ToolHop" in text and "(unconfirmed)" in text and "cached at:" in text
    verified = toolbench(env, "data", "verify")
    assert verified.returncode == 0, verified.stdout
    hub.stop()
    assert toolbench(env, "data", "fetch").returncode == 0  # all cached: no network needed
    [path] = list((tmp_path / "hf" / "assets" / "pytest-toolbench" / "github").rglob("familykg-e.txt"))
    path.write_text("[1, 2, 3]\n")
    bad = toolbench(env, "data", "verify", "familytool")
    assert bad.returncode == 1 and "MISMATCH" in bad.stdout and "familykg-e.txt" in bad.stdout


def test_an_unconfirmed_checksum_warns(hub: FakeDataHub, env, tmp_path: Path):
    """ToolBeHonest's test_en.json pin is a third party's: other bytes with the right record
    count warn, and the run goes on."""
    en = json.loads((DATA / "toolbehonest" / "sample_en.json").read_bytes())
    hub.add_hub_file(TBH_REPO, TBH_REV, "test_en.json", json.dumps(en, indent=1).encode())
    proc = run_suite(env, "toolbehonest", "-n", "0", "--limit", "1", "--toolbench-json", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "differs from the unconfirmed pin" in proc.stdout
    src = [d for d in report(tmp_path)["run"]["data_sources"] if d["benchmark"] == "toolbehonest"][0]
    assert src["kind"] == "real" and src["verified"] is False


# --- the real pins --------------------------------------------------------------------------------


@pytest.mark.skipif(not REAL_FAMILYTOOL.is_dir(), reason=f"../shared not available at {REAL_FAMILYTOOL}")
def test_the_real_familytool_pins_match_the_shared_copies():
    """Every FamilyTool pin (sha256, size, records) against the copy in ../shared/datasets; the
    ToolHop file there is an 80-record subset, not the pinned file, so it is not checkable."""
    from pytest_toolbench.datasets.fetch import count_records
    from pytest_toolbench.datasets.registry import BUILTIN

    spec = BUILTIN.get("familytool")
    assert spec is not None and spec.revision == "c3c5fc7e2496df3db4ffa045f0dbf34114c27802"
    for file in spec.files:
        path = REAL_FAMILYTOOL / file.name
        data = path.read_bytes()
        assert (sha(data), len(data), count_records(path, file.counting)) == (
            file.sha256, file.size, file.records), file.name


@pytest.mark.skipif(not REAL_FAMILYTOOL.is_dir(), reason=f"../shared not available at {REAL_FAMILYTOOL}")
def test_data_dir_with_the_real_files_is_reported_real(monkeypatch: pytest.MonkeyPatch):
    """--data-dir pointing at the real FamilyTool files: no fetch, and the report says real (the
    files match their pins), with the pinned revision."""
    from pytest_toolbench.benchmarks.familytool.benchmark import FAMILYTOOL

    monkeypatch.delenv("TOOLBENCH_DATA_REGISTRY", raising=False)
    sources = FAMILYTOOL.data_sources(REAL_FAMILYTOOL.parent)
    assert len(sources) == 4 and {s.kind for s in sources} == {"real"}
    assert all(s.revision == "c3c5fc7e2496df3db4ffa045f0dbf34114c27802" and s.verified for s in sources)


def test_the_builtin_pins():
    from pytest_toolbench.datasets.registry import BUILTIN

    toolhop = BUILTIN.get("toolhop")
    assert toolhop is not None and toolhop.revision == "b439d7279af359fda46e8117ae4f0245b75f5c6b"
    [f] = toolhop.files
    assert (f.sha256, f.size, f.records) == (
        "0a51f71a44b7025645e452123af3caf2e348301922af91778e268db0188a7fab", 19_720_396, 995)
    tbh = BUILTIN.get("toolbehonest")
    assert tbh is not None and tbh.revision == "524ef5422f63899e7c1a97c791197c37ace0e051"
    assert [(f.name, f.records, f.sha256_confirmed) for f in tbh.files] == [
        ("test_en.json", 350, False), ("test_zh.json", 350, True)]
    assert BUILTIN.get("metabench").host == "none"


# --- options --------------------------------------------------------------------------------------


def test_data_revision_values_are_checked():
    from pytest_toolbench.datasets.registry import BUILTIN
    from pytest_toolbench.datasets.resolve import parse_revisions

    assert parse_revisions(["toolhop=main", "familytool=abc"], BUILTIN) == {"toolhop": "main", "familytool": "abc"}
    for value, words in [("toolhop", "expected NAME=REV"), ("=main", "expected NAME=REV"),
                         ("nope=main", "no benchmark 'nope'"), ("metabench=x", "no released data")]:
        with pytest.raises(ValueError, match=words):
            parse_revisions([value], BUILTIN)


def test_a_bad_toolbench_data_value_is_one_line(env):
    proc = run_suite({**env, "TOOLBENCH_DATA": "everything"}, "toolhop", "-n", "0")
    assert proc.returncode == 4
    assert "$TOOLBENCH_DATA 'everything': must be real or sample" in proc.stdout + proc.stderr


def test_a_plain_static_mirror_of_the_hub_works_too(tmp_path: Path, env):
    """HF_ENDPOINT pointing at a static file server (no X-Repo-Commit, no ETag, which
    huggingface_hub refuses): the pinned files are fetched with the harness's downloader,
    checked against the pins, kept in the assets cache, and read again offline."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    root = tmp_path / "mirror"
    target = root / "datasets" / TOOLHOP_REPO / "resolve" / TOOLHOP_REV / "data" / "ToolHop.json"
    target.parent.mkdir(parents=True)
    target.write_bytes(toolhop_bytes())
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        mirror = {**env, "HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}"}
        proc = run_suite(mirror, "toolhop", "-n", "0", "--toolbench-json", str(tmp_path / "r.json"))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "18 passed" in proc.stdout
    finally:
        server.shutdown()
        server.server_close()
    [src] = report(tmp_path)["run"]["data_sources"]
    assert src["kind"] == "real" and src["verified"] is True and src["sha256"] == sha(toolhop_bytes())
    assert "assets/pytest-toolbench/huggingface" in src["path"]
    proc = run_suite({**mirror, "HF_HUB_OFFLINE": "1"}, "toolhop", "-n", "0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_a_github_branch_is_fetched_again_and_its_last_copy_kept_offline(hub: FakeDataHub, env):
    """--data-revision familytool=main: a branch moves, so each run fetches it again (the
    checks only warn); with the host gone the last copy is used."""
    for name, path in FT_FILES.items():
        hub.add_github_file(FT_REPO, "main", path, (DATA / "familytool" / name).read_bytes())
    args = ("-n", "0", "--scenario", "tooluse-golden", "--data-revision", "familytool=main")
    assert run_suite(env, "familytool", *args).returncode == 0
    assert run_suite(env, "familytool", *args).returncode == 0
    assert hub.gets[f"/{FT_REPO}/main/datasets/familytool-b.jsonl"] == 2
    hub.stop()
    proc = run_suite(env, "familytool", *args)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_a_read_only_cache_still_gets_its_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The run's folder of links goes to the temp dir when the cache cannot be written (a cache
    copied read-only onto an air-gapped machine)."""
    from pytest_toolbench.datasets import resolve

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setattr(resolve.cache, "assets_cache", lambda: blocker / "pytest-toolbench")
    target = tmp_path / "ToolHop.json"
    target.write_text("[]")
    view = resolve.make_view({"toolhop/ToolHop.json": target})
    assert (view / "toolhop" / "ToolHop.json").read_text() == "[]"
    assert not view.is_relative_to(blocker)
    assert resolve.shown_path(view / "toolhop" / "ToolHop.json") == target.resolve()
