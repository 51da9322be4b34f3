"""Who ran what, where: the run's id, the command line as reported (secrets masked), the data's
checksums, the wall time as a user waited for it, and the sandbox warning."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_toolbench.benchmarks.data_source import file_sha256
from pytest_toolbench.sandbox.isolation_report import merge_isolation_states
from pytest_toolbench.secret_args import redact_secret_args
from pytest_toolbench.session.state import ToolbenchState

#: When this process imported the plugin (about when pytest started): the run's wall time counts
#: from here, so model conversion and server start, which pytest's "in N s" leaves out, are in it.
PROCESS_T0 = time.monotonic()

if TYPE_CHECKING:
    from pytest_toolbench.session.finish import RunIdentity


def new_run_id() -> str:
    """``20250101-120000-1a2b3c``: sortable by start time, unique across machines."""
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def wall_time_note(st: ToolbenchState) -> str:
    """``wall time 3:41 (model conversion 2:31, vLLM start 0:58)``: the whole run as a user
    waited for it, from the plugin's import, which pytest's own "in N s" (counted from its
    session start, after a conversion) does not show."""
    from pytest_toolbench.runtime.startup_progress import clock

    parts = [f"{k} {clock(v)}" for k, v in (st.startup.durations if st.startup else {}).items()]
    if st.server is not None and not st.server.started:
        parts.append("vLLM never started: no request missed the cache")
    return f"wall time {clock(time.monotonic() - PROCESS_T0)}" + (f" ({', '.join(parts)})" if parts else "")


def sandbox_warning(states: list[dict[str, Any]]) -> str | None:
    """The terminal warning, only when tool code really ran without the kernel layers (the pool
    refuses that unless ``--sandbox-insecure``); the flag alone on a capable machine says nothing."""
    merged = merge_isolation_states(states)
    if merged is None:
        return None
    if merged["kernel_isolation"]:
        absent = merged.get("absent_layers") or {}
        if not absent:
            return None
        # Not a warning: the floor held; the machine (an ordinary user without user namespaces,
        # no cgroup access) gave fewer layers, and the user should know which.
        return (f"sandbox: this machine gave no {', '.join(sorted(absent))} (run.sandbox.absent_layers "
                "says why; README 'Tool sandbox' says what each costs)")
    why = "; ".join(f"{k}: {v}" for k, v in merged["missing_notes"].items())
    return ("WARNING: tool code ran WITHOUT kernel isolation (--sandbox-insecure; missing "
            f"{', '.join(merged['missing_layers'])}: {why}); contained by the audit hook only, "
            "do not trust this run with hostile datasets")


def dataset_checksums(data_dir: Path | None, benchmarks: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    if data_dir is None:
        return out
    for name in sorted(benchmarks):
        folder = data_dir / name
        if folder.is_dir():
            for path in sorted(p for p in folder.iterdir() if p.is_file()):
                out[str(path)] = file_sha256(path)
    return out


def run_identity(config: Any, st: ToolbenchState) -> RunIdentity:
    """The run's identity for its record, as of now (its end)."""
    from pytest_toolbench.servers.managed import server_record
    from pytest_toolbench.session.finish import RunIdentity

    return RunIdentity(
        run_id=st.run_id, started=st.started, finished=time.time(),
        wall_s=time.monotonic() - PROCESS_T0, settings=st.settings,
        pytest_args=redact_secret_args(config.invocation_params.args),
        server=server_record(st.server),
        datasets=dataset_checksums(st.settings.data_dir, {r.benchmark for r in st.results.values()}),
        data_sources=[d.model_dump(mode="json") for d in st.data_sources],
        sandbox=merge_isolation_states(st.sandbox_states),  # None: no tool sandbox started
        startup_s=dict(st.startup.durations) if st.startup else {},
        suite_sizes=dict(st.suite_sizes),
    )
