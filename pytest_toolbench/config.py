"""Run settings: every command-line option, validated once, shared by all parts of a run.

Built from pytest options in plugin.py (``RunSettings.from_pytest_config``) but plain pydantic, so
library code and unit tests build it directly.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, Field, SerializeAsAny

from pytest_toolbench.models.base import DECODING_PRESETS, Sampling

OptionsT = TypeVar("OptionsT", bound=BaseModel)

#: The model used when none is given: SmolLM2-135M-Instruct served by vLLM on the CPU.
EMBEDDED_MODEL = "smollm2-135m"


class SandboxLimits(BaseModel):
    """Limits for the process that runs untrusted tool code."""

    cpu_seconds: float = 20.0  # CPU time per call (the wall-clock limit is the benchmark's)
    memory_mb: int = 1024  # address-space limit of a sandbox worker
    file_size_mb: int = 16  # largest file a tool may write (inside its temp dir)
    disk_mb: int = 256  # all a call may write in its temp dir (a RAM-backed tmpfs where available)
    disk_inodes: int = 10000  # files, directories, links... a call may create in its temp dir
    workers: int = 4  # warm worker processes per pytest process
    output_cap: int = 20000  # chars of a tool's result / error text kept (the cut is marked)
    insecure: bool = False  # run tools even where the kernel layers are unavailable (reported)


class VLLMSettings(BaseModel):
    extra_args: list[str] = Field(default_factory=list)  # --vllm-arg pass-through
    startup_timeout_s: float = 600.0
    tool_call_parser: str | None = None  # overrides the model-family table
    chat_template: str | None = None
    python: str | None = None  # interpreter that has vllm installed (default: this one)


class RunSettings(BaseModel):
    # --- model under test
    model: str = EMBEDDED_MODEL
    backend: Literal["auto", "openai", "vllm"] = "auto"
    base_url: str | None = None
    #: Every endpoint of the model (--base-url repeated / --base-urls-file); base_url is the first.
    base_urls: tuple[str, ...] = ()
    api_key: str | None = None
    request_timeout_s: float = 120.0  # one HTTP attempt
    max_retries: int = 6
    retry_after_max_s: float = 60.0  # the longest Retry-After wait honoured (larger ones are cut)
    #: An endpoint that never answered since the run's first request is given up after this long.
    unreachable_after_s: float = 10.0
    case_timeout_s: float | None = None  # a whole case (every call, retry and tool); None: no limit
    #: Upstream's closed script on an API error: no retry, the turn is lost (nothing appended).
    upstream_lost_turns: bool = False
    concurrency: int = 8
    #: HTTP transport under the openai SDK (models/openai_backend.py explains the default).
    http_transport: Literal["aiohttp", "httpx"] = "aiohttp"
    #: Where the SDK runs: one shared process per run, or inside each pytest process
    #: (models/sdk_process/server.py explains the default).
    sdk_process: Literal["shared", "inline"] = "shared"
    #: None: per backend (API: closed, vLLM: open). "open" is upstream's open-model protocol (raw
    #: text, parsed as each benchmark declares); "open-server-parser" decodes the same but keeps
    #: the server's parser for every benchmark.
    decoding: Literal["closed", "open", "open-server-parser"] | None = None
    temperature: float | None = None  # overrides the preset
    max_tokens: int | None = None  # overrides the preset
    # --- cache, record, replay
    cache_dir: Path = Path(".toolbench/cache")
    runs_dir: Path = Path(".toolbench/runs")  # one folder per run (report, journal, logs)
    use_cache: bool = True
    cache_only: bool = False  # a cache miss is an error, never a model call
    record_path: Path | None = None
    # --- case selection
    data_dir: Path | None = None
    scenarios: tuple[str, ...] | None = None  # None: all of each benchmark's scenarios
    limit: int | None = None
    sample_ids: tuple[str, ...] | None = None
    #: --repeats K: every case runs K times (pass@k / pass^k, unstable cases; results/repeats.py).
    repeats: int = 1
    # --- reporting and gating
    json_path: Path | None = None
    gates: tuple[str, ...] = ()
    max_error_rate: float = 0.0
    bootstrap_samples: int = 2000
    baseline_path: Path | None = None  # --baseline: an earlier --toolbench-json report
    md_path: Path | None = None  # --toolbench-md: Markdown summary
    seed: int = 0
    # --- environments and benchmark options
    sandbox: SandboxLimits = Field(default_factory=SandboxLimits)
    vllm: VLLMSettings = Field(default_factory=VLLMSettings)
    #: Benchmark name -> that benchmark's own options model (declared in its folder).
    benchmark_options: dict[str, SerializeAsAny[BaseModel]] = Field(default_factory=dict)

    def options_for(self, name: str, model: type[OptionsT]) -> OptionsT:
        """The named benchmark's options (its defaults, i.e. upstream behaviour, when unset)."""
        found = self.benchmark_options.get(name)
        if found is None:
            return model()
        return found if isinstance(found, model) else model.model_validate(found.model_dump())

    @property
    def resolved_backend(self) -> Literal["openai", "vllm", "oracle", "replay"]:
        if self.model == "oracle":
            return "oracle"
        if self.model.startswith("replay:"):
            return "replay"
        if self.backend != "auto":
            return self.backend
        if self.base_url or os.environ.get("OPENAI_BASE_URL") or self.api_key or os.environ.get(
            "OPENAI_API_KEY"
        ):
            return "openai"
        if self.model == EMBEDDED_MODEL or Path(self.model).is_dir():
            return "vllm"
        return "openai"

    @property
    def resolved_decoding(self) -> Literal["closed", "open", "open-server-parser"]:
        return self.decoding or ("open" if self.resolved_backend == "vllm" else "closed")

    @property
    def open_protocol(self) -> bool:
        """Upstream's open-model protocol: raw text through the chat template, read by the parser
        each benchmark declares (``open_protocol`` in benchmarks/base.py;
        ``pytest_toolbench.models.open_protocol``). Real endpoints only."""
        return self.resolved_decoding == "open" and self.resolved_backend in ("openai", "vllm")

    @property
    def sampling(self) -> Sampling:
        preset_name = "closed" if self.resolved_decoding == "closed" else "open"
        preset = DECODING_PRESETS[preset_name]
        return preset.model_copy(
            update={
                k: v
                for k, v in {"temperature": self.temperature, "max_tokens": self.max_tokens}.items()
                if v is not None
            }
        )
