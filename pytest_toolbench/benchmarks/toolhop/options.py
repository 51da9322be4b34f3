"""ToolHop run options. Every default is the upstream behaviour; each deviation is named.

Each field is also a command-line flag (``--toolhop-<field>``), derived by
:mod:`pytest_toolbench.benchmarks.options`; the description is the flag's help.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pytest_toolbench.benchmarks.declaration import Declaration
from pytest_toolbench.deferred_model import DeferredModel

#: The longest tool timeout accepted (an hour).
MAX_TOOL_TIMEOUT_S = 3600.0


class ToolHopOptions(DeferredModel):
    #: "upstream": substring test over the whole final message with the rstrip('.0') quirk
    #: (upstream ``code/evaluation_*.py``).
    #: "strict": extract <answer>...</answer>, normalised exact match (NOT upstream; labelled).
    scorer: Literal["upstream", "strict"] = Field(
        "upstream",
        description="upstream: substring + rstrip('.0') quirk (default); strict: <answer> exact "
        "match (NOT upstream)",
    )
    #: Invocation-error classification (paper Table 4; no released code): "schema" (default)
    #: or "feedback" (by error text).
    error_mode: Literal["schema", "feedback"] = Field(
        "schema", description="how invocation errors are classified"
    )
    #: Minimal-feedback ablation (paper Table 5; no released code): replace failed calls'
    #: feedback with "Failed!".
    minimal_feedback: Literal["off", "exceptions", "exceptions+error_payloads"] = Field(
        "off", description="minimal-feedback ablation: failed calls answer 'Failed!'"
    )
    #: Upstream turn budget (``--max_turns``, 9, in ``code/evaluation_*.py``).
    max_turns: int = Field(9, ge=1, description="model turns per case (upstream: 9)")
    #: Tool wall-clock limit in seconds (upstream func_set_timeout(10)). 0 or less timed every
    #: call out, inf overflowed the sandbox's clock; past an hour a hung tool only holds a worker.
    tool_timeout_s: float = Field(
        10.0, gt=0, le=MAX_TOOL_TIMEOUT_S, allow_inf_nan=False,
        description="wall-clock seconds per tool call, at most 3600 (upstream: 10)",
        json_schema_extra={"flag": "--toolhop-tool-timeout"},
    )
    #: Deviation: exec tool sources in a clean namespace instead of emulating the upstream
    #: script's module globals and Python <= 3.12 exec/locals semantics (``get_feedback``'s
    #: ``exec``).
    clean_namespace: bool = Field(
        False,
        description="deviation: run tool sources in a clean namespace instead of emulating the "
        "upstream script's globals",
    )


#: What pytest reads of ToolHop in every command (benchmarks/declaration.py); the benchmark
#: class takes these attributes from here.
DECLARATION = Declaration(
    name="toolhop", title="ToolHop", options_model=ToolHopOptions,
    label_markers={"hops": "n", "domain": "name"},
)
