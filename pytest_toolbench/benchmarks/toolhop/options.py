"""ToolHop run options. Every default is the upstream behaviour; each deviation is named."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class ToolHopOptions(BaseModel):
    #: "upstream": substring test over the whole final message with the rstrip('.0') quirk (§3.1).
    #: "strict": extract <answer>...</answer>, normalised exact match (NOT upstream; labelled).
    scorer: Literal["upstream", "strict"] = "upstream"
    #: Invocation-error classification (§3.2): "schema" (default) or "feedback" (by error text).
    error_mode: Literal["schema", "feedback"] = "schema"
    #: Minimal-feedback ablation (§2.6): replace failed calls' feedback with "Failed!".
    minimal_feedback: Literal["off", "exceptions", "exceptions+error_payloads"] = "off"
    #: Upstream turn budget (§2.3).
    max_turns: int = 9
    #: Tool wall-clock limit in seconds (upstream func_set_timeout(10)).
    tool_timeout_s: float = 10.0
    #: Deviation: exec tool sources in a clean namespace instead of emulating the upstream
    #: script's module globals and Python <= 3.12 exec/locals semantics (§2.5-1).
    clean_namespace: bool = False
