"""What a run's report says about the tool sandbox's isolation: one pool's state from its
``describe()``, and the states of several pools (xdist workers) merged into one.

Apart from the pool (standard library only): the controller merges the workers' states at the
run's end without starting a pool or loading its modules (asyncio among them).
"""

from __future__ import annotations

from typing import Any, Sequence


def isolation_state(described: dict[str, Any]) -> dict[str, Any]:
    """What a report needs from ``ToolSandbox.describe()``: whether the kernel layers held, which
    were missing and why (their probe notes), and the optional layers (bubblewrap, netns)."""
    info = described.get("isolation", {})
    missing = list(info.get("missing_layers", []))
    return {
        "kernel_isolation": bool(described.get("kernel_isolation")),
        "insecure": bool(described.get("insecure")),
        "missing_layers": missing,
        "missing_notes": {k: info.get(f"{k}_note") or "not verified" for k in missing},
        "landlock_abi": int(info.get("landlock_abi") or 0),
        # A layer is reported on only when it held: never "seccomp: true" beside a missing
        # seccomp, whatever a worker's own flags said.
        "landlock": bool(info.get("landlock_abi")) and "landlock" not in missing,
        "seccomp": bool(info.get("seccomp")) and "seccomp" not in missing,
        "bubblewrap": bool(info.get("bubblewrap")),
        "network_namespace": bool(info.get("network_namespace")),
        # "jail": tools saw only what they may read (other paths did not exist for them);
        # "host": the host's tree, whose contents Landlock refuses but whose paths stat answers.
        "filesystem_view": "jail" if info.get("filesystem_view") == "jail" else "host",
        # No capability in a call (checked by the probe), and whether the zygote had any to drop.
        "capabilities": "none" if info.get("verified_no_capabilities") else "not verified",
        "privileged_start": bool(info.get("privileged_start")),
        "user_namespace": bool(info.get("user_namespace")),
        "pid_namespace": bool(info.get("pid_namespace")),
        "memory_cap": (info.get("memory_cap") or {}).get("mechanism", "rlimit"),
        # Optional layers this machine did not give, with why (README: what each one costs).
        "absent_layers": dict(sorted((info.get("absent_layers") or {}).items())),
    }


def merge_isolation_states(states: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """One state for a run whose tools ran in several pools (xdist workers): isolation held
    only if it held in every pool; a layer missing anywhere is reported missing."""
    if not states:
        return None
    notes: dict[str, str] = {}
    for st in states:
        notes.update(st.get("missing_notes", {}))
    missing = sorted({layer for st in states for layer in st["missing_layers"]})
    return {
        "kernel_isolation": all(st["kernel_isolation"] for st in states),
        "insecure": any(st["insecure"] for st in states),
        "missing_layers": missing,
        "missing_notes": dict(sorted(notes.items())),
        "landlock_abi": min(st["landlock_abi"] for st in states),
        "landlock": all(st.get("landlock", st["landlock_abi"] > 0) for st in states)
        and "landlock" not in missing,
        "seccomp": all(st["seccomp"] for st in states) and "seccomp" not in missing,
        "bubblewrap": all(st["bubblewrap"] for st in states),
        "network_namespace": all(st["network_namespace"] for st in states),
        "filesystem_view": "jail" if all(st.get("filesystem_view") == "jail" for st in states) else "host",
        "capabilities": "none" if all(st.get("capabilities") == "none" for st in states) else "not verified",
        "privileged_start": all(st.get("privileged_start", False) for st in states),
        "user_namespace": all(st.get("user_namespace", False) for st in states),
        "pid_namespace": all(st.get("pid_namespace", False) for st in states),
        "memory_cap": "cgroup" if all(st.get("memory_cap") == "cgroup" for st in states) else "rlimit",
        "absent_layers": dict(sorted({k: v for st in states for k, v in (st.get("absent_layers") or {}).items()}.items())),
        "pools": len(states),
    }
