"""Command-line options and their translation into :class:`RunSettings`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_toolbench.config import (
    EMBEDDED_MODEL,
    RunSettings,
    SandboxLimits,
    VLLMSettings,
)
from pytest_toolbench.benchmarks import registry
from pytest_toolbench.benchmarks.options import add_benchmark_options, benchmark_options_from
from pytest_toolbench.option_sources import ToolbenchGroup, resolve_option_sources
from pytest_toolbench.runs.store import RUNS_DIR_ENV, default_runs_dir


def add_options(parser: pytest.Parser) -> None:
    # Every option shows its default in --help and has an ini key (option_sources.py).
    g = ToolbenchGroup(parser, parser.getgroup("toolbench", "pytest-toolbench: LLM tool-use benchmarks"))
    # model under test
    g.addoption("--model", default=None,
                help=f"model under test: an API model name, a local model path or name for "
                     f"--backend vllm, 'oracle' (gold answers), 'replay:PATH' (recorded responses). "
                     f"Default: {EMBEDDED_MODEL}, served by vLLM on the CPU.")
    g.addoption("--backend", default="auto", choices=["auto", "openai", "vllm"],
                help="openai: any OpenAI-compatible endpoint; vllm: the harness starts one vLLM "
                     "server for the session (default: vllm for local models, else openai)")
    g.addoption("--base-url", action="append", default=None,
                help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL). With --backend vllm, "
                     "attach to this running server instead of starting one. Repeat it for "
                     "several replicas of one model: least-loaded routing with per-endpoint health")
    g.addoption("--base-urls-file", default=None, metavar="FILE",
                help="endpoints of one model, one URL per line (# comments), added to --base-url")
    g.addoption("--api-key", default=None, help="API key (default $OPENAI_API_KEY)")
    g.addoption("--request-timeout", type=float, default=120.0,
                help="seconds for one HTTP attempt (each retry gets its own)")
    g.addoption("--max-retries", type=int, default=6,
                help="retries on 429/5xx/timeouts/invalid 200 replies (exponential backoff, "
                     "honours Retry-After up to --retry-after-max)")
    g.addoption("--retry-after-max", type=float, default=60.0, metavar="SECONDS",
                help="longest Retry-After wait honoured; a server asking for more waits this long")
    g.addoption("--unreachable-after", type=float, default=10.0, metavar="SECONDS",
                help="give up an endpoint that has not answered once since the run's first request "
                     "and fails every attempt (connection refused, DNS, TLS, timeouts) after this "
                     "long: every case then fails at once as an infrastructure error naming the URL "
                     "and the cause")
    g.addoption("--case-timeout", type=float, default=None, metavar="SECONDS",
                help="deadline for a whole case (all model calls, retries and tools); a case "
                     "past it is an infrastructure error of kind case_timeout (default: none)")
    g.addoption("--upstream-lost-turns", action="store_true",
                help="reproduce upstream's closed script on an API error: the failed call is "
                     "not retried and silently consumes a turn (default: retry, then the case "
                     "is an infrastructure error)")
    g.addoption("--concurrency", type=int, default=8,
                help="cases (and requests) in flight per pytest process")
    g.addoption("--http-transport", choices=["aiohttp", "httpx"], default="aiohttp",
                help="HTTP transport under the openai SDK: aiohttp (openai.DefaultAioHttpClient; "
                     "a fraction of httpx's CPU per request at hundreds in flight) or httpx "
                     "(the SDK's default; honours HTTP(S)_PROXY)")
    g.addoption("--sdk-process", choices=["shared", "inline"], default="shared",
                help="where the openai SDK runs: shared = one process per run, started with pytest "
                     "and used by every xdist worker (its import and per-request CPU off pytest's "
                     "GIL; one endpoint pool for the whole run); inline = inside each pytest process")
    g.addoption("--decoding", choices=["closed", "open", "open-server-parser"], default=None,
                help="upstream protocol preset: closed = T=0, max_tokens=256, the endpoint's tool "
                     "calls (API scripts); open = greedy, 1024 new tokens, raw text parsed by "
                     "upstream's qwen25/llama31 parsers (local-model scripts); open-server-parser "
                     "= open decoding with the server's own tool parser (NOT upstream). "
                     "Default: open for vLLM, closed otherwise")
    g.addoption("--temperature", type=float, default=None, help="override the preset temperature")
    g.addoption("--max-tokens", type=int, default=None, help="override the preset max_tokens")
    # cache / record
    g.addoption("--cache-dir", default=".toolbench/cache", help="response cache directory")
    g.addoption("--runs-dir", default=default_runs_dir(),
                help=f"one folder per run (report, journal, logs) for `toolbench runs`; "
                     f"${RUNS_DIR_ENV} sets the default (default: .toolbench/runs)")
    g.addoption("--no-cache", action="store_true", help="do not read or write the response cache")
    g.addoption("--cache-only", action="store_true",
                help="answer only from the response cache; a miss is an infrastructure error "
                     "(re-score or re-report a finished run without any model call)")
    g.addoption("--record", default=None, metavar="PATH",
                help="write every case's assistant messages to a JSONL file for --model replay:PATH")
    # selection
    g.addoption("--data-dir", default=None,
                help="directory with one folder per benchmark (DIR/toolhop/*.json ...); "
                     "default: the bundled samples in data/")
    g.addoption("--scenario", action="append", default=None,
                help="scenario(s) to run (repeatable or comma-separated); default: all")
    g.addoption("--limit", type=int, default=None,
                help="first N samples of each benchmark (file order)")
    g.addoption("--sample-ids", default=None, help="comma-separated sample ids to run")
    g.addoption("--repeats", type=int, default=1, metavar="K",
                help="run each case K times (node ids end in -r1..-rK; each repeat has its own "
                     "cache entries; use --temperature to sample). Reports the mean over all "
                     "repeats (CI over cases), pass@k and pass^k, and unstable cases (default 1)")
    # reporting / gating
    g.addoption("--toolbench-json", default=None, metavar="PATH",
                help="write metrics and every case result (transcripts included) as JSON")
    g.addoption("--gate", action="append", default=[], metavar="EXPR",
                help="metric gate, e.g. 'toolhop.mandatory.accuracy>=0.45' (repeatable). With "
                     "gates, the exit status is decided by them, not by single wrong answers")
    g.addoption("--max-error-rate", type=float, default=0.0,
                help="with gates: the largest share of infrastructure errors per scenario "
                     "that still passes (default 0)")
    g.addoption("--bootstrap-samples", type=int, default=2000, help="bootstrap resamples for CIs")
    g.addoption("--baseline", default=None, metavar="RUN.json",
                help="compare this run with an earlier --toolbench-json report (paired by case id) "
                     "in the summary and the JSON report; enables baseline gates such as "
                     "'toolhop.mandatory.accuracy>=baseline-0.02' or '...accuracy.diff_lower>=-0.05'")
    g.addoption("--toolbench-md", default=None, metavar="PATH",
                help="write a GitHub-flavoured Markdown summary (metric tables, gates, baseline "
                     "comparison), e.g. $GITHUB_STEP_SUMMARY")
    g.addoption("--allure-html", default=None, metavar="DIR",
                help="at the end of the session, build the HTML report from --alluredir with "
                     "Allure 3 (npm package 'allure', see README) into DIR (default: not built)")
    g.addoption("--no-plots", action="store_true", default=False,
                help="do not write the metric plots (PNG beside the JSON report and in Allure; "
                     "default: written when --toolbench-json or --alluredir is given)")
    g.addoption("--no-progress", action="store_true",
                help="do not draw the live progress line (it is drawn only on a terminal, at "
                     "normal verbosity, see report/progress.py)")
    # sandbox
    g.addoption("--sandbox-workers", type=int, default=4, help="warm tool-sandbox processes")
    g.addoption("--sandbox-memory-mb", type=int, default=1024, help="tool memory limit")
    g.addoption("--sandbox-output-cap", type=int, default=20000, metavar="CHARS",
                help="longest tool result / error text kept; the cut is marked (default 20000)")
    g.addoption("--sandbox-insecure", action="store_true", default=False,
                help="run tool code even where the kernel isolation layers (Landlock, seccomp) "
                     "are unavailable; the report says so")
    # vLLM
    g.addoption("--vllm-arg", action="append", default=[], metavar="ARG",
                help="extra argument passed to the vLLM server (repeatable), e.g. "
                     "--vllm-arg=--max-model-len=4096")
    g.addoption("--vllm-startup-timeout", type=float, default=600.0)
    g.addoption("--tool-call-parser", default=None, help="override vLLM's tool-call parser")
    g.addoption("--chat-template", default=None,
                help="override vLLM's chat template (file; 'model' = the checkpoint's own). "
                     "Default: the checkpoint's own, except vLLM's Llama 3.x JSON example "
                     "template beside its parser (decodings closed / open-server-parser) and "
                     "our Hermes template for SmolLM2, whose own template ignores tools")
    # Benchmarks declare their own flags (benchmarks/options.py).
    for benchmark in registry().values():
        add_benchmark_options(parser, benchmark.name, benchmark.title, benchmark.options_model)

def _split(values: list[str] | None) -> tuple[str, ...] | None:
    if not values:
        return None
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def validate_options(config: pytest.Config) -> None:
    """Numbers that cannot work, rejected with one line before anything starts (ValueError)."""
    opt = config.getoption
    checks = [
        ("--limit", opt("--limit"), lambda v: v >= 1, "must be at least 1"),
        ("--repeats", opt("--repeats"), lambda v: v >= 1, "must be at least 1"),
        ("--sandbox-workers", opt("--sandbox-workers"), lambda v: v >= 1, "must be at least 1"),
        ("--sandbox-output-cap", opt("--sandbox-output-cap"), lambda v: v >= 1,
         "must be at least 1 (0 or less would turn the cap off)"),
        ("--sandbox-memory-mb", opt("--sandbox-memory-mb"), lambda v: v >= 1, "must be at least 1"),
        ("--concurrency", opt("--concurrency"), lambda v: v >= 1, "must be at least 1"),
        ("--max-retries", opt("--max-retries"), lambda v: v >= 0, "must be 0 or more"),
        ("--request-timeout", opt("--request-timeout"), lambda v: v > 0, "must be positive"),
        ("--case-timeout", opt("--case-timeout"), lambda v: v > 0, "must be positive"),
        ("--retry-after-max", opt("--retry-after-max"), lambda v: v >= 0, "must be 0 or more"),
        ("--unreachable-after", opt("--unreachable-after"), lambda v: v >= 0, "must be 0 or more"),
        ("--max-error-rate", opt("--max-error-rate"), lambda v: 0 <= v <= 1,
         "must be between 0 and 1"),
        ("--bootstrap-samples", opt("--bootstrap-samples"), lambda v: v >= 0, "must be 0 or more"),
    ]
    for flag, value, ok, rule in checks:
        if value is not None and not ok(value):
            raise ValueError(f"{flag} {value}: {rule}")
    if opt("--sample-ids") is not None and not _split([opt("--sample-ids")]):
        raise ValueError("--sample-ids: no sample id given")
    for url in opt("--base-url") or []:
        check_base_url(url, "--base-url")


def check_base_url(url: str, source: str) -> None:
    """An http(s) URL with a host (and a valid port, if any): one ValueError line otherwise, so a
    typo is a usage error at configure, not an infrastructure error in every case."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError on a port out of range or not a number
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and " " not in url.strip()
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{source} {url!r}: not an http(s) URL with a host "
                         "(e.g. http://localhost:8000/v1)")


def settings_from_config(config: pytest.Config) -> RunSettings:
    resolve_option_sources(config)  # command line > ini file > default
    validate_options(config)
    opt = config.getoption
    data_dir = opt("--data-dir")
    if data_dir is None and (config.rootpath / "data").is_dir():
        data_dir = str(config.rootpath / "data")
    return RunSettings(
        model=opt("--model") or EMBEDDED_MODEL,
        backend=opt("--backend"),
        base_url=urls[0] if (urls := _base_urls(config)) else None,
        base_urls=tuple(urls),
        api_key=opt("--api-key"),
        request_timeout_s=opt("--request-timeout"),
        max_retries=opt("--max-retries"),
        retry_after_max_s=opt("--retry-after-max"),
        unreachable_after_s=opt("--unreachable-after"),
        case_timeout_s=opt("--case-timeout"),
        upstream_lost_turns=opt("--upstream-lost-turns"),
        concurrency=opt("--concurrency"),
        http_transport=opt("--http-transport"),
        sdk_process=opt("--sdk-process"),
        decoding=opt("--decoding"),
        temperature=opt("--temperature"),
        max_tokens=opt("--max-tokens"),
        cache_dir=_absolute(config, opt("--cache-dir")),
        runs_dir=_absolute(config, opt("--runs-dir")),
        use_cache=not opt("--no-cache"),
        cache_only=opt("--cache-only"),
        record_path=_absolute(config, opt("--record")) if opt("--record") else None,
        data_dir=_absolute(config, data_dir) if data_dir else None,
        scenarios=_split(opt("--scenario")),
        limit=opt("--limit"),
        sample_ids=_split([opt("--sample-ids")] if opt("--sample-ids") else None),
        repeats=opt("--repeats"),
        json_path=_absolute(config, opt("--toolbench-json")) if opt("--toolbench-json") else None,
        gates=tuple(opt("--gate")),
        max_error_rate=opt("--max-error-rate"),
        bootstrap_samples=opt("--bootstrap-samples"),
        baseline_path=_absolute(config, opt("--baseline")) if opt("--baseline") else None,
        md_path=_absolute(config, opt("--toolbench-md")) if opt("--toolbench-md") else None,
        sandbox=SandboxLimits(
            workers=opt("--sandbox-workers"),
            memory_mb=opt("--sandbox-memory-mb"),
            output_cap=opt("--sandbox-output-cap"),
            insecure=opt("--sandbox-insecure"),
        ),
        vllm=VLLMSettings(
            extra_args=list(opt("--vllm-arg")),
            startup_timeout_s=opt("--vllm-startup-timeout"),
            tool_call_parser=opt("--tool-call-parser"),
            chat_template=opt("--chat-template"),
        ),
        benchmark_options={
            b.name: benchmark_options_from(opt, b.name, b.options_model) for b in registry().values()
        },
    )


def _absolute(config: pytest.Config, path: str) -> Path:
    """Relative paths are taken from where pytest was invoked, as users expect."""
    p = Path(os.path.expanduser(path))
    return p if p.is_absolute() else Path(config.invocation_params.dir) / p


def _base_urls(config: pytest.Config) -> list[str]:
    """--base-url (repeatable) then --base-urls-file, duplicates dropped, order kept."""
    from pytest_toolbench.models.endpoint_pool import read_urls_file

    urls = list(config.getoption("--base-url") or [])
    path = config.getoption("--base-urls-file")
    if path:
        urls += read_urls_file(_absolute(config, path))
    return list(dict.fromkeys(urls))
