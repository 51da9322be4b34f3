"""The run record's typed sections (results/run_sections.py) read and write the JSON report's
``run`` part exactly as before they were typed: the same keys, in the same order, the same
values; older records (keys missing, keys this version does not know) load and write back as
they were; and each section declares its fields in its producer's order."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_toolbench.benchmarks.data_source import DataSource
from pytest_toolbench.compare.load import load_record
from pytest_toolbench.config import RunSettings
from pytest_toolbench.results.run_record import RunRecord
from pytest_toolbench.results.run_sections import (
    DataSourceEntry,
    SandboxSection,
    ServerSection,
    SettingsSection,
)
from pytest_toolbench.runs.record import index_from_report
from pytest_toolbench.sandbox.isolation_report import merge_isolation_states

#: A report written before the sections were typed (an oracle run on the sample, trimmed to one
#: case; its server and endpoints as a vLLM run writes them).
BEFORE = Path(__file__).parent / "data" / "report_before_typed_sections.json"


def test_a_report_written_before_the_typed_sections_reads_and_writes_back_byte_for_byte():
    record = load_record(BEFORE)
    assert record.to_json() == BEFORE.read_bytes()
    run = record.run
    assert run.settings.model == "oracle" and run.settings.gates == ["toolhop.direct.accuracy>=0.5"]
    assert run.server is not None and run.server.started and run.server.pid == 4242
    assert run.sandbox is not None and run.sandbox.pools == 1
    assert run.endpoint_counts() == {"http://127.0.0.1:41234/v1": {"requests": 14, "errors": 1}}
    assert [d.benchmark for d in run.data_sources] == ["toolhop", "familytool", "familytool",
                                                        "familytool", "familytool"]


def test_an_older_record_keeps_its_keys_and_the_ones_this_version_does_not_know(tmp_path):
    """Keys missing from an older record are not written back filled in; unknown keys stay."""
    run = {
        "settings": {"model": "m", "repeats": 2, "a_future_setting": [1]},
        "server": {"started": False},
        "data_sources": [{"benchmark": "toolhop", "path": "ToolHop.json", "sha256": "ab" * 32}],
        "sandbox": {"kernel_isolation": True, "pools": 1, "a_future_layer": "on"},
        "endpoints": {"http://h/v1": {"requests": 3, "errors": 0}},
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"run": run, "cases": []}))
    record = load_record(path)
    written = json.loads(record.to_json())["run"]
    for key, section in run.items():
        assert json.dumps(written[key]) == json.dumps(section), key
    assert record.model == "m" and record.run.settings.repeats == 2
    assert record.run.data_sources[0].kind is None  # unknown provenance, as a dict read it
    index = index_from_report(record, tmp_path)  # toolbench runs
    assert (index.model, index.repeats, index.backend, index.json_path) == ("m", 2, "", None)
    assert index.data[0].benchmark == "toolhop" and index.data[0].kind is None


def test_settings_declare_run_settings_keys_in_its_order():
    dumped = RunSettings(model="x").model_dump(mode="json", exclude={"api_key"})
    assert list(SettingsSection.model_fields) == list(dumped)
    assert json.dumps(SettingsSection.model_validate(dumped).as_json()) == json.dumps(dumped)


def test_data_sources_declare_data_source_keys_in_its_order():
    source = DataSource(benchmark="toolhop", path=Path("ToolHop.json"), records=3, sha256="ab" * 32,
                        notes=["a note"], size=10)
    dumped = source.model_dump(mode="json")
    assert list(DataSourceEntry.model_fields) == list(dumped)
    assert json.dumps(DataSourceEntry.model_validate(dumped).as_json()) == json.dumps(dumped)


def test_sandbox_declares_the_merged_isolation_keys_in_their_order():
    state = {"kernel_isolation": True, "insecure": False, "missing_layers": [], "landlock_abi": 3,
             "seccomp": True, "bubblewrap": False, "network_namespace": True,
             "absent_layers": {"user_namespace": "not permitted"}}
    merged = merge_isolation_states([state, state])
    assert merged is not None
    assert list(SandboxSection.model_fields) == list(merged)
    assert json.dumps(SandboxSection.model_validate(merged).as_json()) == json.dumps(merged)


def test_server_declares_the_managed_servers_keys_in_their_order():
    from pytest_toolbench.models.spec import ServerInfo

    dumped = ServerInfo(served_model="m", describe={"model": "m"}, startup_timeout_s=600.0).record()
    assert list(ServerSection.model_fields) == list(dumped)
    assert json.dumps(ServerSection.model_validate(dumped).as_json()) == json.dumps(dumped)


def test_a_record_without_optional_sections_writes_none_of_them():
    record = RunRecord(cases=[])
    run = json.loads(record.to_json())["run"]
    assert run["settings"] == {} and run["server"] is None and run["sandbox"] is None
    assert "endpoints" not in run and run["data_sources"] == []


def test_the_record_names_the_provider_backend_auto_resolved_to(monkeypatch, tmp_path):
    """``--backend auto`` resolves from the environment as the run starts; the record keeps what
    it resolved to (a run folder read elsewhere, by ``toolbench finish`` or the leaderboard,
    could not tell), and a backend the user named stays as named."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    recorded = {
        "oracle": RunSettings(model="oracle").recorded(),
        "endpoint": RunSettings(model="m", base_url="http://127.0.0.1:9/v1").recorded(),
        "model folder": RunSettings(model=str(tmp_path)).recorded(),
        "named": RunSettings(model="m", backend="vllm", base_url="http://127.0.0.1:9/v1").recorded(),
    }
    assert {k: v["backend"] for k, v in recorded.items()} == {
        "oracle": "oracle", "endpoint": "openai", "model folder": "vllm", "named": "vllm"}
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert RunSettings(model="gpt-4o").recorded()["backend"] == "openai"
    # a key in the environment names no server: the embedded model and a model folder stay
    # on vLLM (make run in a shell that holds a key went to api.openai.com)
    assert RunSettings().recorded()["backend"] == "vllm"
    assert RunSettings(model=str(tmp_path)).recorded()["backend"] == "vllm"
    assert RunSettings(model=str(tmp_path), base_url="http://127.0.0.1:9/v1").recorded()["backend"] == "openai"
    assert "sk-test" not in json.dumps(RunSettings(model="gpt-4o").recorded())
