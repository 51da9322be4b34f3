"""Run settings: every core option, declared once, validated once, shared by all parts of a run.

Each setting that is also a command-line flag says so in its declaration (:func:`option`): the
flag's name, help text, metavar and the pydantic constraints its values must meet. ``options.py``
derives the flags, their ini keys (``option_sources.py``), their ``--help`` text and the one-line
errors for bad values from these declarations, and builds a :class:`RunSettings` from the parsed
values (``settings_from_config``); benchmark options are declared the same way in each benchmark's
folder (``benchmarks/options.py``). The models stay plain pydantic, so library code and unit tests
build them directly.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, SerializeAsAny

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.defaults import DEFAULT_CACHE_DIR, DEFAULT_RUNS_DIR
from pytest_toolbench.secret_args import redact_secret_args


OptionsT = TypeVar("OptionsT", bound=BaseModel)

#: The model used when none is given: SmolLM2-135M-Instruct served by vLLM on the CPU.
EMBEDDED_MODEL = "smollm2-135m"

_UNSET: Any = object()

#: The most repeats of a case: each repeat is a pytest item of every case, all built at
#: collection (10 samples x 3 scenarios x 1000 = 30,000 items); a billion hung collection.
MAX_REPEATS = 1000


def option(
    default: Any = None,
    *,
    flag: str,
    help: str = "",
    metavar: str | None = None,
    default_factory: Any = None,
    flag_default: Any = _UNSET,
    repeatable: bool = False,
    split: bool = False,
    negate: bool = False,
    why: str | None = None,
    exclude: bool | None = None,
    **constraints: Any,
) -> Any:
    """A setting that is also a command-line flag and an ini key (``toolbench_<flag>``).

    - ``flag``, ``help``, ``metavar``: as argparse shows them; ``Literal`` types become choices,
      ``int``/``float`` typed values, ``bool`` a switch. ``--help`` appends the default
      (``option_sources.help_with_default``) unless the help text speaks of it.
    - ``flag_default``: the flag's default where it differs from the field's (``None`` so that a
      reader of the raw flag can tell "not given"; the setting then keeps its own default).
    - ``repeatable``: the flag may be given several times; ``split``: values are also
      comma-separated; ``negate``: a ``--no-...`` switch that turns the setting off.
    - ``constraints`` (``ge``, ``gt``, ``le``...): checked by pydantic, and reported for a flag or
      ini value as one line (``--limit 0: must be at least 1``), with ``why`` appended.
    - ``exclude``: read by the pytest side of the run only, not part of the run record's settings.
    """
    extra: dict[str, Any] = {"flag": flag}
    for key, value in (("metavar", metavar), ("repeatable", repeatable), ("split", split),
                       ("negate", negate), ("why", why)):
        if value:
            extra[key] = value
    if flag_default is not _UNSET:
        extra["flag_default"] = flag_default
    if default_factory is not None:
        return Field(default_factory=default_factory, description=help, json_schema_extra=extra,
                     exclude=exclude, **constraints)
    return Field(default, description=help, json_schema_extra=extra, exclude=exclude, **constraints)


class SandboxLimits(DeferredModel):
    """Limits for the process that runs untrusted tool code."""

    #: Warm worker processes per pytest process.
    workers: int = option(4, flag="--sandbox-workers", help="warm tool-sandbox processes", ge=1)
    #: Address-space limit of a sandbox worker.
    memory_mb: int = option(1024, flag="--sandbox-memory-mb", help="tool memory limit", ge=1)
    #: All a call may write in its temp dir (a RAM-backed tmpfs where available).
    disk_mb: int = option(256, flag="--sandbox-disk-mb", metavar="MB", ge=1,
                          help="all a tool call may write in its temp dir (a RAM-backed tmpfs "
                               "where available)")
    #: Files, directories, links... a call may create in its temp dir.
    disk_inodes: int = option(10000, flag="--sandbox-disk-inodes", metavar="N", ge=1,
                              help="files, directories and links a tool call may create in its "
                                   "temp dir")
    #: Characters of a tool's result / error text kept (the cut is marked).
    output_cap: int = option(20000, flag="--sandbox-output-cap", metavar="CHARS", ge=1,
                             why="(0 or less would turn the cap off)",
                             help="longest tool result / error text kept; the cut is marked "
                                  "(default 20000)")
    #: Run tools even where the kernel layers are unavailable (the report says so).
    insecure: bool = option(False, flag="--sandbox-insecure",
                            help="run tool code even where the kernel isolation layers (Landlock, "
                                 "seccomp) are unavailable; the report says so")
    cpu_seconds: float = 20.0  # CPU time per call (the wall-clock limit is the benchmark's)
    file_size_mb: int = 16  # largest file a tool may write (inside its temp dir)


class VLLMSettings(DeferredModel):
    extra_args: list[str] = option(
        flag="--vllm-arg", default_factory=list, metavar="ARG", repeatable=True,
        help="extra argument passed to the vLLM server (repeatable), e.g. "
             "--vllm-arg=--max-model-len=4096")
    startup_timeout_s: float = option(
        600.0, flag="--vllm-startup-timeout", gt=0, allow_inf_nan=False, metavar="SECONDS",
        help="seconds the harness's own vLLM server may take to start and serve the model; "
             "past it the run stops with the last lines of its log")
    #: Overrides the model-family table.
    tool_call_parser: str | None = option(None, flag="--tool-call-parser",
                                          help="override vLLM's tool-call parser")
    chat_template: str | None = option(
        None, flag="--chat-template",
        help="override vLLM's chat template (file; 'model' = the checkpoint's own). "
             "Default: the checkpoint's own, except vLLM's Llama 3.x JSON example "
             "template beside its parser (decodings closed / open-server-parser) and "
             "our Hermes template for SmolLM2, whose own template ignores tools")
    python: str | None = None  # interpreter that has vllm installed (default: this one)


class RunSettings(DeferredModel):
    # --- model under test
    model: str = option(
        EMBEDDED_MODEL, flag="--model", flag_default=None, min_length=1,
        # An empty name would silently become the embedded model's, sent to the user's endpoint.
        why=f"(leave --model out for the default, {EMBEDDED_MODEL})",
        help=f"model under test: an API model name, a local model path or name for "
             f"--backend vllm, 'oracle' (gold answers), 'replay:PATH' (recorded responses). "
             f"Default: {EMBEDDED_MODEL}, served by vLLM on the CPU.")
    #: A model provider's name (models/providers.py: the bundled openai, vllm, oracle and replay,
    #: or one a package registers), checked against the registry when the run starts; "auto"
    #: picks openai or vllm. The metavar lists the bundled choices, as --help always has.
    backend: str = option(
        "auto", flag="--backend", metavar="{auto,openai,vllm}", min_length=1,
        help="openai: any OpenAI-compatible endpoint; vllm: the harness starts one vLLM "
             "server for the session (default: vllm for local models, else openai)")
    #: The first of :attr:`base_urls` (None: $OPENAI_BASE_URL, or the managed server).
    base_url: str | None = None
    #: Every endpoint of the model (--base-url repeated, then --base-urls-file); base_url is the first.
    base_urls: tuple[str, ...] = option(
        (), flag="--base-url", flag_default=None, repeatable=True,
        help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL). With --backend vllm, "
             "attach to this running server instead of starting one. Repeat it for "
             "several replicas of one model: least-loaded routing with per-endpoint health")
    #: Read into :attr:`base_urls` when the settings are built.
    base_urls_file: Path | None = option(
        None, flag="--base-urls-file", metavar="FILE", exclude=True,
        help="endpoints of one model, one URL per line (# comments), added to --base-url")
    api_key: str | None = option(None, flag="--api-key", help="API key (default $OPENAI_API_KEY)")
    request_timeout_s: float = option(  # one HTTP attempt
        120.0, flag="--request-timeout", gt=0, allow_inf_nan=False,
        help="seconds for one HTTP attempt (each retry gets its own)")
    max_retries: int = option(
        6, flag="--max-retries", ge=0,
        help="retries on 429/5xx/timeouts/invalid 200 replies (exponential backoff, "
             "honours Retry-After up to --retry-after-max)")
    #: The longest Retry-After wait honoured (larger ones are cut).
    retry_after_max_s: float = option(
        60.0, flag="--retry-after-max", metavar="SECONDS", ge=0, allow_inf_nan=False,
        help="longest Retry-After wait honoured; a server asking for more waits this long")
    #: An endpoint that never answered (or never served a usable reply) since the run's first
    #: request is given up after this long (models/reachability.py).
    unreachable_after_s: float = option(
        10.0, flag="--unreachable-after", metavar="SECONDS", ge=0, allow_inf_nan=False,
        help="give up an endpoint that has not answered once since the run's first request "
             "and fails every attempt (connection refused, DNS, TLS, timeouts) after this "
             "long, or that has answered only with server errors (5xx, replies that are no "
             "chat completion) once this long has passed and a call has spent all its "
             "retries: every case then fails at once as an infrastructure error naming the "
             "URL and the cause")
    #: A whole case (every call, retry and tool); None: no limit.
    case_timeout_s: float | None = option(
        None, flag="--case-timeout", metavar="SECONDS", gt=0, allow_inf_nan=False,
        help="deadline for a whole case (all model calls, retries and tools); a case "
             "past it is an infrastructure error of kind case_timeout (default: none)")
    #: Upstream's closed script on an API error: no retry, the turn is lost (nothing appended).
    upstream_lost_turns: bool = option(
        False, flag="--upstream-lost-turns",
        help="reproduce upstream's closed script on an API error: the failed call is "
             "not retried and silently consumes a turn (default: retry, then the case "
             "is an infrastructure error)")
    concurrency: int = option(8, flag="--concurrency", ge=1,
                              help="model requests in flight per pytest process (as many cases "
                                   "run at once, a quarter more where the backend holds its "
                                   "requests to this itself: the openai one does)")
    #: HTTP transport under the openai SDK (models/openai_backend.py explains the default).
    http_transport: Literal["aiohttp", "httpx"] = option(
        "aiohttp", flag="--http-transport",
        help="HTTP transport under the openai SDK: aiohttp (openai.DefaultAioHttpClient; "
             "a fraction of httpx's CPU per request at hundreds in flight) or httpx "
             "(the SDK's default); both honour HTTP(S)_PROXY and NO_PROXY")
    #: Where the SDK runs: one shared process per run, or inside each pytest process
    #: (models/sdk_process/server.py explains the default).
    sdk_process: Literal["shared", "inline"] = option(
        "shared", flag="--sdk-process",
        help="where the openai SDK runs: shared = one process per run, started with pytest "
             "and used by every xdist worker (its import and per-request CPU off pytest's "
             "GIL; one endpoint pool for the whole run); inline = inside each pytest process")
    #: None: per backend (API: closed, vLLM: open). "open" is upstream's open-model protocol (raw
    #: text, parsed as each benchmark declares); "open-server-parser" decodes the same but keeps
    #: the server's parser for every benchmark. Each benchmark turns the resolved decoding and
    #: the two overrides below into the sampling it sends.
    decoding: Literal["closed", "open", "open-server-parser"] | None = option(
        None, flag="--decoding",
        help="upstream protocol preset: closed = T=0, max_tokens=256, the endpoint's tool "
             "calls (API scripts); open = greedy, 1024 new tokens, raw text parsed by "
             "upstream's qwen25/llama31 parsers (local-model scripts); open-server-parser "
             "= open decoding with the server's own tool parser (NOT upstream). "
             "Default: open for vLLM, closed otherwise")
    #: OpenAI's range; a value outside it is refused by the API (and meaningless elsewhere).
    temperature: float | None = option(None, flag="--temperature", ge=0, le=2, allow_inf_nan=False,
                                       help="override the preset temperature (0 to 2)")
    max_tokens: int | None = option(None, flag="--max-tokens", ge=1,
                                    help="override the preset max_tokens")
    # --- cache, record, replay
    cache_dir: Path = option(Path(DEFAULT_CACHE_DIR), flag="--cache-dir",
                             help="response cache directory")
    #: One folder per run (report, journal, logs); options.py gives the flag the
    #: $TOOLBENCH_RUNS_DIR default.
    runs_dir: Path = option(
        Path(DEFAULT_RUNS_DIR), flag="--runs-dir",
        help="one folder per run (report, journal, logs) for `toolbench runs`; "
             f"$TOOLBENCH_RUNS_DIR sets the default (default: {DEFAULT_RUNS_DIR})")
    use_cache: bool = option(True, flag="--no-cache", negate=True,
                             help="do not read or write the response cache (nor the result cache)")
    #: A cache miss is an error, never a model call.
    cache_only: bool = option(
        False, flag="--cache-only",
        help="answer only from the response cache; a miss is an infrastructure error "
             "(re-score or re-report a finished run without any model call)")
    #: Score the response cache's replies again instead of returning a case's stored result
    #: (runtime/result_cache.py); the new results replace the stored ones.
    rescore: bool = option(
        False, flag="--rescore",
        help="do not answer cases from the result cache (each case's stored result, returned "
             "without scoring on a re-run of unchanged code, data and settings); score the "
             "response cache's replies again and store the new results")
    record_path: Path | None = option(
        None, flag="--record", metavar="PATH",
        help="write every case's assistant messages to a JSONL file for --model replay:PATH")
    # --- case selection
    #: real: each benchmark's own files, pinned, fetched once into the Hugging Face cache and
    #: verified (pytest_toolbench/datasets); sample: the small samples bundled in data/.
    #: $TOOLBENCH_DATA sets the default (options.py). --data-dir wins over both.
    data: Literal["real", "sample"] = option(
        "real", flag="--data",
        help="real: each suite's real benchmark files, pinned to a revision, downloaded once into "
             "the Hugging Face cache ($HF_HOME) and verified (sha256, records) before any model "
             "call; sample: the small samples bundled in data/ (a wiring check, not the "
             "benchmark). --data-dir wins over both. Default: $TOOLBENCH_DATA, else real")
    #: NAME=REV: another revision of a benchmark's real data, chosen knowingly (the report says
    #: so; the pinned sha256 and record counts then only warn).
    data_revisions: tuple[str, ...] = option(
        (), flag="--data-revision", flag_default=[], metavar="NAME=REV", repeatable=True,
        help="use revision REV of benchmark NAME's real data instead of the pinned one "
             "(repeatable), e.g. toolhop=main; the report says so, and the pinned sha256 and "
             "record counts then only warn")
    #: None: with --data sample, the project's ``data`` folder where it has a benchmark's
    #: (options.py ``project_samples``); with --data real, the folder of fetched files (session/data.py).
    data_dir: Path | None = option(
        None, flag="--data-dir",
        help="directory with one folder per benchmark (DIR/toolhop/*.json ...), used as it is "
             "(default: the real data, see --data)")
    #: None: all of each benchmark's scenarios.
    scenarios: tuple[str, ...] | None = option(
        None, flag="--scenario", repeatable=True, split=True, min_length=1,
        why="(leave --scenario out to run every scenario)",
        help="scenario(s) to run (repeatable or comma-separated); default: all")
    limit: int | None = option(None, flag="--limit", ge=1,
                               help="first N samples of each benchmark (file order)")
    sample_ids: tuple[str, ...] | None = option(None, flag="--sample-ids", split=True,
                                                help="comma-separated sample ids to run")
    #: Every case runs K times (pass@k / pass^k, unstable cases; results/repeats.py).
    repeats: int = option(
        1, flag="--repeats", metavar="K", ge=1, le=MAX_REPEATS,
        help=f"run each case K times (node ids end in -r1..-rK; each repeat has its own "
             f"cache entries; use --temperature to sample). Reports the mean over all "
             f"repeats (CI over cases), pass@k and pass^k, and unstable cases (default 1). "
             f"At most {MAX_REPEATS}: every repeat is a test item, all made at collection")
    # --- reporting and gating
    json_path: Path | None = option(
        None, flag="--toolbench-json", metavar="PATH",
        help="write metrics and every case result (transcripts included) as JSON")
    gates: tuple[str, ...] = option(
        (), flag="--gate", flag_default=[], metavar="EXPR", repeatable=True,
        help="metric gate, e.g. 'toolhop.mandatory.accuracy>=0.45' (repeatable). With "
             "gates, the exit status is decided by them, not by single wrong answers")
    max_error_rate: float = option(
        0.0, flag="--max-error-rate", ge=0, le=1, allow_inf_nan=False,
        help="with gates: the largest share of infrastructure errors per scenario "
             "that still passes (default 0)")
    bootstrap_samples: int = option(2000, flag="--bootstrap-samples", ge=0,
                                    help="bootstrap resamples for CIs")
    #: An earlier --toolbench-json report, or a run folder (its report.json).
    baseline_path: Path | None = option(
        None, flag="--baseline", metavar="RUN.json",
        help="compare this run with an earlier --toolbench-json report, run folder "
             "(.toolbench/runs/ID) or run id under --runs-dir (paired by case id) "
             "in the summary and the JSON report; enables baseline gates such as "
             "'toolhop.mandatory.accuracy>=baseline-0.02' or '...accuracy.diff_lower>=-0.05'")
    allow_different_data: bool = option(
        False, flag="--allow-different-data",
        help="compare with a --baseline run on different data (another fingerprint, real vs "
             "sample, another revision) or with no case in common, which is otherwise refused "
             "(exit 4); every output then says so")
    md_path: Path | None = option(
        None, flag="--toolbench-md", metavar="PATH",
        help="write a GitHub-flavoured Markdown summary (metric tables, gates, baseline "
             "comparison), e.g. $GITHUB_STEP_SUMMARY")
    allure_html: Path | None = option(
        None, flag="--allure-html", metavar="DIR", exclude=True,
        help="at the end of the session, build the HTML report from --alluredir with "
             "Allure 3 (npm package 'allure', see README) into DIR (default: not built)")
    view_dir: Path | None = option(
        None, flag="--toolbench-view", metavar="DIR", exclude=True,
        help="at the end of the session, rebuild the toolbench view site (leaderboard, "
             "runs, cases, side by side) of every run in --runs-dir into DIR; it opens "
             "from disk (default: not built)")
    plots: bool = option(
        True, flag="--no-plots", negate=True, exclude=True,
        help="do not write the metric plots (PNG beside the JSON report and in Allure; "
             "default: written when --toolbench-json or --alluredir is given)")
    progress: bool = option(
        True, flag="--no-progress", negate=True, exclude=True,
        help="do not draw the live progress line (it is drawn only on a terminal, at "
             "normal verbosity, see report/progress.py)")
    seed: int = 0
    # --- environments and benchmark options
    sandbox: SandboxLimits = Field(default_factory=SandboxLimits)
    vllm: VLLMSettings = Field(default_factory=VLLMSettings)
    #: Benchmark name -> that benchmark's own options model (declared in its folder).
    benchmark_options: dict[str, SerializeAsAny[BaseModel]] = Field(default_factory=dict)

    def recorded(self) -> dict[str, Any]:
        """The settings as a run's record keeps them: JSON values, without the API key, and
        with any secret among the vLLM server's arguments masked (``--vllm-arg=--hf-token=X``;
        secret_args.py). ``--backend auto`` is kept as the provider it resolved to here, from
        the environment (``OPENAI_BASE_URL``, a model folder): "auto" would leave the leaderboard,
        ``toolbench runs`` and a ``toolbench finish`` run elsewhere unable to say what served it."""
        dumped = self.model_dump(mode="json", exclude={"api_key"})
        if dumped["backend"] == "auto":
            dumped["backend"] = self.resolved_backend
        dumped["vllm"]["extra_args"] = redact_secret_args(self.vllm.extra_args)
        return dumped

    def options_for(self, name: str, model: type[OptionsT]) -> OptionsT:
        """The named benchmark's options (its defaults, i.e. upstream behaviour, when unset)."""
        found = self.benchmark_options.get(name)
        if found is None:
            return model()
        return found if isinstance(found, model) else model.model_validate(found.model_dump())

    @property
    def resolved_backend(self) -> str:
        """The provider that builds the model: ``oracle``/``replay`` from ``--model``, else
        ``--backend``, else (``auto``) openai or vllm: an endpoint named (``--base-url``,
        ``$OPENAI_BASE_URL``) is served there; else the embedded model or a model folder is
        served by vLLM here, whatever key the environment holds (no OpenAI endpoint serves
        either, and ``make run`` with ``$OPENAI_API_KEY`` set sent the embedded model's name,
        and the key, to api.openai.com); else OpenAI."""
        if self.model == "oracle":
            return "oracle"
        if self.model.startswith("replay:"):
            return "replay"
        if self.backend != "auto":
            return self.backend
        if self.base_url or os.environ.get("OPENAI_BASE_URL"):
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
