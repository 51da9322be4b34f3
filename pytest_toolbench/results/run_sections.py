"""The typed sections of a run record's ``run`` part: settings, server, sandbox, endpoints, data
sources and tokens (results/run_record.py).

Each section is read from the dict its producer writes (config.RunSettings dumped, the managed
server's facts, sandbox/pool.py ``merge_isolation_states``, models/endpoint_pool.py
``endpoint_totals``, benchmarks/data_source.py ``DataSource``) and written back as exactly that
dict: the keys it was given, in the producer's order, values as given. A report written before
a key existed is read all the same (every field has a default) and a key this version does not
know is kept (``extra="allow"``), so ``toolbench compare``, ``--baseline``, ``toolbench runs`` and
run folders keep reading older records. tests/test_run_sections.py checks that each declared
order is still its producer's.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, SerializerFunctionWrapHandler, model_serializer

from pytest_toolbench.deferred_model import DeferredModel


class RecordSection(DeferredModel):
    """A section written as it was read: only the keys it was given (a default filled in for
    an older record's missing key is not written), extra keys kept after the declared ones."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _given_keys_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped = handler(self)
        given = self.model_fields_set | set(self.model_extra or ())
        return {k: v for k, v in dumped.items() if k in given}

    def as_json(self) -> dict[str, Any]:
        """The section as the report's JSON holds it."""
        return self.model_dump(mode="json")


class SettingsSection(RecordSection):
    """``run.settings``: config.RunSettings as JSON, without the API key (fields in its order)."""

    model: str | None = None
    backend: str | None = None
    base_url: str | None = None
    base_urls: list[str] | None = None
    request_timeout_s: float | None = None
    max_retries: int | None = None
    retry_after_max_s: float | None = None
    unreachable_after_s: float | None = None
    case_timeout_s: float | None = None
    upstream_lost_turns: bool | None = None
    concurrency: int | None = None
    http_transport: str | None = None
    sdk_process: str | None = None
    decoding: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    cache_dir: str | None = None
    runs_dir: str | None = None
    use_cache: bool | None = None
    cache_only: bool | None = None
    rescore: bool | None = None
    record_path: str | None = None
    data: str | None = None
    data_revisions: list[str] | None = None
    data_dir: str | None = None
    scenarios: list[str] | None = None
    limit: int | None = None
    sample_ids: list[str] | None = None
    repeats: int | None = None
    json_path: str | None = None
    gates: list[str] | None = None
    max_error_rate: float | None = None
    bootstrap_samples: int | None = None
    baseline_path: str | None = None
    allow_different_data: bool | None = None
    md_path: str | None = None
    seed: int | None = None
    #: config.SandboxLimits, VLLMSettings and each benchmark's options, as JSON.
    sandbox: dict[str, Any] | None = None
    vllm: dict[str, Any] | None = None
    benchmark_options: dict[str, dict[str, Any]] | None = None


class ServerSection(RecordSection):
    """``run.server``: the managed vLLM server's facts (None in a run without one)."""

    base_url: str | None = None
    served_model: str | None = None
    pid: int | None = None
    #: ``VLLMServer.describe()``: everything about the server that changes answers.
    describe: dict[str, Any] | None = None
    rendezvous: str | None = None
    startup_timeout_s: float | None = None
    started: bool | None = None
    startup_s: float | None = None
    error: str | None = None


class SandboxSection(RecordSection):
    """``run.sandbox``: the isolation the tool sandbox really had, over all its pools."""

    kernel_isolation: bool | None = None
    insecure: bool | None = None
    missing_layers: list[str] | None = None
    missing_notes: dict[str, str] | None = None
    landlock_abi: int | None = None
    landlock: bool | None = None
    seccomp: bool | None = None
    bubblewrap: bool | None = None
    network_namespace: bool | None = None
    filesystem_view: str | None = None
    capabilities: str | None = None
    privileged_start: bool | None = None
    user_namespace: bool | None = None
    pid_namespace: bool | None = None
    memory_cap: str | None = None
    absent_layers: dict[str, str] | None = None
    pools: int | None = None


class EndpointCounts(RecordSection):
    """``run.endpoints[url]``: requests sent to one endpoint and how many failed."""

    requests: int = 0
    errors: int = 0


class DataSourceEntry(RecordSection):
    """One entry of ``run.data_sources``: a data file the run read, and its provenance. A field
    an older record lacks reads None, as results/provenance.py expects of an unknown."""

    benchmark: str | None = None
    path: str | None = None
    records: int | None = None
    #: What ``records`` counts: "records", "KG triples", "library tools" (None: older records).
    unit: str | None = None
    sha256: str | None = None
    bundled: bool | None = None
    kind: str | None = None
    source: str | None = None
    url: str | None = None
    upstream_path: str | None = None
    revision: str | None = None
    pinned_revision: str | None = None
    pinned: bool | None = None
    commit: str | None = None
    expected_sha256: str | None = None
    expected_records: int | None = None
    size: int | None = None
    verified: bool | None = None
    fingerprint: str | None = None
    registry: str | None = None
    notes: list[str] | None = None


class TokenTotals(DeferredModel):
    """The tokens the endpoint reported over the run's scored replies (``usage`` of each chat
    completion, summed): what a model comparison costs, as BFCL's leaderboard puts it beside the
    scores. A reply from the response cache counts with the tokens it was recorded with."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def text(self, model_calls: int | None = None, cached_calls: int = 0) -> str | None:
        """``1,234,567 prompt + 8,901 completion over 952 model calls``, saying how many came
        from the cache (as recorded, not spent again); None when the replies reported none (the
        oracle, a replay, an endpoint that sends no ``usage``): never a "0 tokens" line."""
        if not (self.prompt_tokens or self.completion_tokens):
            return None
        calls = f" over {model_calls:,} model calls" if model_calls else ""
        cached = f" ({cached_calls:,} from the cache, as recorded)" if cached_calls else ""
        return f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion{calls}{cached}"


__all__ = [
    "DataSourceEntry",
    "EndpointCounts",
    "RecordSection",
    "SandboxSection",
    "ServerSection",
    "SettingsSection",
    "TokenTotals",
]
