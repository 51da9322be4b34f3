"""Secrets never travel with a run's reports (secret_args.py): an option's value, a secret among
the vLLM server's pass-through arguments, a secret-named ``VLLM_*`` variable of the server, a
password in a URL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_toolbench.config import RunSettings, VLLMSettings
from pytest_toolbench.models.spec import ServerInfo
from pytest_toolbench.secret_args import masked_url, masked_urls_in, redact_secret_args
from test_ci_gates import run_suite


@pytest.mark.parametrize(("args", "reported"), [
    (["suites/toolhop", "--api-key", "sk-1", "--api-key=sk-2", "--max-tokens", "64"],
     ["suites/toolhop", "--api-key", "***", "--api-key=***", "--max-tokens", "64"]),
    # inside --vllm-arg: the flag and its value in one pass-through, or in two
    (["--vllm-arg=--hf-token=X", "--vllm-arg=--api-key", "--vllm-arg=Y", "--vllm-arg=--dtype=float32"],
     ["--vllm-arg=--hf-token=***", "--vllm-arg=--api-key", "--vllm-arg=***", "--vllm-arg=--dtype=float32"]),
    (["--vllm-arg", "--api-key", "--vllm-arg", "Z", "--model", "m", "--vllm-arg", "--max-model-len=4096"],
     ["--vllm-arg", "--api-key", "--vllm-arg", "***", "--model", "m", "--vllm-arg", "--max-model-len=4096"]),
    # a secret flag's value is the next value of its own command line, not the next argument
    (["--vllm-arg=--api-key", "--model", "m", "--vllm-arg=W"],
     ["--vllm-arg=--api-key", "--model", "m", "--vllm-arg=***"]),
    (["--api-key"], ["--api-key"]),
    (["--vllm-arg"], ["--vllm-arg"]),
])
def test_secret_values_are_masked_among_the_arguments_and_the_pass_throughs(args, reported):
    assert redact_secret_args(args) == reported


def test_recorded_settings_mask_the_vllm_arguments_and_drop_the_key():
    settings = RunSettings(model="m", api_key="sk-x",
                           vllm=VLLMSettings(extra_args=["--hf-token", "hf_1", "--max-model-len=64"]))
    recorded = settings.recorded()
    assert "api_key" not in recorded
    assert recorded["vllm"]["extra_args"] == ["--hf-token", "***", "--max-model-len=64"]
    assert settings.vllm.extra_args == ["--hf-token", "hf_1", "--max-model-len=64"]  # unchanged


def test_the_server_record_masks_secrets_the_workers_copy_keeps_them():
    """Workers build cache keys from the server's facts: their copy is whole; the report's is
    masked."""
    info = ServerInfo(served_model="m", describe={
        "server_args": ["--model", "/m", "--api-key=s3", "--hf-token", "hf_2"],
        "vllm_env": {"VLLM_API_KEY": "s4", "VLLM_CPU_OMP_THREADS_BIND": "all"}})
    reported = info.reported()["describe"]
    assert reported["server_args"] == ["--model", "/m", "--api-key=***", "--hf-token", "***"]
    assert reported["vllm_env"] == {"VLLM_API_KEY": "***", "VLLM_CPU_OMP_THREADS_BIND": "all"}
    assert info.record()["describe"]["server_args"][2] == "--api-key=s3"


def test_no_report_of_a_run_holds_a_secret_given_to_vllm(tmp_path: Path):
    proc, report = run_suite(tmp_path, "--model", "oracle", "--data", "sample", "--limit", "1",
                             "--vllm-arg=--hf-token=hf_SECRET1", "--vllm-arg=--api-key",
                             "--vllm-arg=SECRET2", "--api-key", "SECRET3")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert report is not None
    written = [tmp_path / "report.json", tmp_path / "junit.xml",
               *(p for p in (tmp_path / "runs").rglob("*") if p.is_file())]
    for path in written:
        data = path.read_bytes()
        if path.suffix == ".gz":
            import gzip

            data = gzip.decompress(data)
        assert b"SECRET" not in data, path
    assert "SECRET" not in proc.stdout + proc.stderr
    assert report["run"]["settings"]["vllm"]["extra_args"] == ["--hf-token=***", "--api-key", "***"]
    assert json.dumps(report["run"]["pytest_args"]).count("***") == 3


@pytest.mark.parametrize("url,shown", [
    ("http://localhost:8000/v1", "http://localhost:8000/v1"),
    ("https://user:pw@mirror.corp/hf", "https://user:***@mirror.corp/hf"),
    ("https://user@mirror.corp/hf", "https://user@mirror.corp/hf"),  # a user name alone is no secret
    ("https://:pw@mirror.corp", "https://:***@mirror.corp"),
    ("https://user:p/w#x?y@mirror.corp:9/v1", "https://user:***@mirror.corp:9/v1"),  # no parser would split it
    ("user:pw@mirror.corp", "user:***@mirror.corp"),
    ("https://mirror.corp/v1/@x", "https://mirror.corp/v1/@x"),
])
def test_masked_url(url, shown):
    assert masked_url(url) == shown


def test_masked_urls_in_a_message():
    text = ("ProxyError: http://proxy-user:hunter2@proxy:3128 refused; "
            "Invalid URL 'https://u:p4ss@mirror/x' and https://plain.host/y")
    assert masked_urls_in(text) == ("ProxyError: http://proxy-user:***@proxy:3128 refused; "
                                    "Invalid URL 'https://u:***@mirror/x' and https://plain.host/y")
