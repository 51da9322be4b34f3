"""The cause of each kind of failed model call and the option that would help, with the calls.

The endpoint layer (``openai_backend.py``, ``reachability.py``, ``lazy_server.py``) puts a precise
hint on the :class:`~pytest_toolbench.models.base.ModelCallError` it raises, where it knows the
run's own figures; :data:`KIND_HINTS` covers every other kind. The results layer
(``results/infra_errors.py``) summarises and prints them.
"""

from __future__ import annotations

#: In the message of an endpoint given up as unreachable (models/reachability.py), right after its
#: URL: ``endpoint http://host:port/v1 unreachable since the run began: connection refused ...``.
UNREACHABLE_MARK = "unreachable:"

#: Kinds of a request that never got an HTTP reply (models/reachability.py): the error message
#: quotes the cause found down the exception chain, not the SDK's generic words.
TRANSPORT_KINDS = frozenset({"connection_refused", "dns_failure", "tls_failure", "connect_timeout",
                             "connection", "timeout"})


def is_server_failure(kind: str) -> bool:
    """An answer that serves nothing: a 5xx status, or a reply that is no chat completion."""
    return kind == "bad_response" or (kind.startswith("http_5") and kind[5:].isdigit())


#: kind -> (cause, option that would help). "http_5xx" stands for every 5xx status.
KIND_HINTS: dict[str, tuple[str, str]] = {
    "timeout": ("no reply within the request timeout",
                "raise --request-timeout, or lower --max-tokens / --concurrency"),
    "connection": ("the connection failed, or the reply came cut short or undecodable",
                   "check the endpoint (--base-url); --max-retries rides out short outages"),
    "connection_refused": ("connection refused: nothing listens at the endpoint's host and port",
                           "start the server, or fix the host and port in --base-url"),
    "dns_failure": ("the endpoint's host name does not resolve (DNS failure)",
                    "fix the host name in --base-url"),
    "tls_failure": ("the TLS handshake with the endpoint failed (certificate, or https:// to a "
                    "plain-HTTP server)",
                    "check http:// vs https:// in --base-url, or trust the server's certificate "
                    "(SSL_CERT_FILE)"),
    "connect_timeout": ("the endpoint did not accept the connection within --request-timeout",
                        "check the host in --base-url and the network (firewall) in between"),
    "http_429": ("rate limited by the endpoint", "lower --concurrency, or raise --max-retries"),
    "http_408": ("the endpoint timed out the request", "raise --max-retries or lower --concurrency"),
    "http_5xx": ("the endpoint returned a server error", "raise --max-retries; check the server log"),
    "http_4xx": ("the endpoint rejected the request", "check --model / --api-key / --base-url"),
    "bad_response": ("the endpoint's reply was not a chat completion", "raise --max-retries"),
    "server_died": ("the managed vLLM server exited during the run",
                    "see vllm.log in the run folder (e.g. out of memory: --vllm-arg)"),
    "server_start_failed": ("the managed vLLM server did not start",
                            "see vllm.log in the run folder; --vllm-startup-timeout, --vllm-arg"),
    "cache_miss": ("--cache-only and no cached reply", "run once without --cache-only"),
    "case_timeout": ("the case ran past --case-timeout", "raise --case-timeout"),
    "test_timeout": ("a per-test timeout outside the harness (pytest-timeout's --timeout or the "
                     "project's timeout setting) stopped the test while its case waited for the "
                     "model or its tools",
                     "raise it for the suites (-o timeout=N; 0 for none); --case-timeout bounds "
                     "a case in the harness"),
    "sdk_process_gone": ("the shared SDK process exited", "--sdk-process inline"),
    "replay_exhausted": ("the replay file has no more replies for the case",
                         "record again with --record"),
    "replay_missing_case": ("the replay file holds no recording of the case (it was recorded "
                            "on other data or another selection)",
                            "run the data and selection it was recorded on (--data, "
                            "--sample-ids, --scenario), or record again with --record"),
    "scoring_error": ("the benchmark's upstream scorer would crash on this record and reply "
                      "(its evaluator does not handle their shape)",
                      "nothing to rerun: the case's error message names the record; report it "
                      "with the dataset"),
    "oracle_unavailable": ("the oracle has no gold policy for this benchmark or scenario",
                           "deselect it (--scenario, -m), or run a model"),
    "open_protocol_unsupported": ("the endpoint answers with structured tool calls where the "
                                  "open protocol asks for raw text",
                                  "--decoding open-server-parser or --decoding closed"),
    # The runner is the benchmark's code (an installed benchmark's, too) as much as the harness's:
    # the traceback in the case's error message says whose.
    "internal_error": ("the case's runner raised an exception (a bug in the benchmark's code or "
                       "the harness's)", "see the traceback in the case's error message"),
    "data_error": ("a case's record could not be read back from its data file: the file changed "
                   "or went away after the run read it",
                   "leave the data files alone while a run uses them; run again to read them afresh"),
    "sandbox_failed": ("the tool sandbox failed on the harness's side (a worker killed, stopped "
                       "or hung from outside, or one that would not restart)",
                       "see the log for the worker's stderr; check for memory pressure or another "
                       "process signalling the run; rerun the errored cases with --lf"),
}


def kind_hint(kind: str) -> tuple[str, str]:
    """(cause, option) for an error kind; status codes fall back to their class."""
    if kind in KIND_HINTS:
        return KIND_HINTS[kind]
    if kind.startswith("http_5"):
        return KIND_HINTS["http_5xx"]
    if kind.startswith("http_4"):
        return KIND_HINTS["http_4xx"]
    return (f"infrastructure error of kind {kind}", "see the case's error message")


def timeout_hint(timeout_s: float, max_tokens: int | None, retried: bool) -> tuple[str, str]:
    """The cause and option for a request timeout, with the run's own figures."""
    cause = f"no reply within --request-timeout {timeout_s:g} s"
    if not retried:
        cause += (" (not resent: the harness's own local server would take as long again "
                  "on the same greedy request)")
    tokens = f" (now {max_tokens})" if max_tokens else ""
    return cause, f"raise --request-timeout, or lower --max-tokens{tokens} / --concurrency"


def encode_hint(cause: str, option: str) -> str:
    """One string for ``ModelCallError.hint`` (split again by :func:`summarize_errors`)."""
    return f"{cause} | try: {option}"
