"""The harness's gate verdicts in Allure 3's own quality-gate view.

Allure 3 shows quality-gate results only when it validated its ``qualityGate`` rules itself
(``allure run``; our ``allure_build.mjs`` does the same after reading the results). Its built-in
rules recompute a verdict from Allure's data, which cannot express baseline, paired-comparison or
error-rate gates, and would average two runs' samples of one metric. So every verdict the harness
computed becomes one rule of a custom rule type, ``toolbench``, whose check simply returns that
verdict: the tab lists exactly the gates that decided the exit status, for every run in the
folder. The same verdicts are also written as Allure 3 *checks* (``*-check.json``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.results.safe_text import safe_data

RULE = "toolbench"

#: The rule type, in the allurerc.mjs Allure loads (``qualityGate.use``): its "check" is the
#: verdict the harness already computed, carried in the rule's expected value.
RULE_JS = f"""const toolbenchVerdict = {{
  // pytest-toolbench computed the verdict; Allure shows it (see report/allure_gates.py).
  rule: {json.dumps(RULE)},
  message: ({{ expected }}) => `${{expected.label}}: ${{expected.gate}} FAILED: ${{expected.reason}}`,
  successMessage: ({{ expected }}) => `${{expected.label}}: ${{expected.gate}} passed: ${{expected.reason}}`,
  validate: async ({{ expected }}) => ({{
    success: expected.passed === true,
    actual: expected.actual ?? "n/a",
    testResults: [],
  }}),
}};
"""


def verdict_payload(v: GateVerdict, label: str, environment: str | None = None) -> dict[str, Any]:
    payload = {"label": label, "gate": v.gate, "passed": v.passed, "actual": v.actual,
               "reason": v.reason, "kind": v.kind}
    if environment:  # allure_build.mjs files the rule's result under the run's model
        payload["environment"] = environment
    return payload


def gate_rules(runs: Iterable[tuple[str, Sequence[GateVerdict]]],
               environments: Sequence[str | None] = ()) -> list[dict[str, Any]]:
    """One ``toolbench`` rule per (run label, verdict), in run order; ids stay unique.
    ``environments``: per run, the Allure environment (its model's) its verdicts belong to."""
    rules: list[dict[str, Any]] = []
    seen: set[str] = set()
    envs = list(environments)
    for k, (label, verdicts) in enumerate(runs):
        environment = envs[k] if k < len(envs) else None
        for v in verdicts:
            rule_id = f"{label} · {v.gate}"
            n = 2
            while rule_id in seen:  # the same gate twice in one run (e.g. given twice)
                rule_id, n = f"{label} · {v.gate} ({n})", n + 1
            seen.add(rule_id)
            rules.append({"id": rule_id, RULE: verdict_payload(v, label, environment)})
    return safe_data(rules)  # a reason quotes errors and case ids: no bidi control in the JS


def check_records(verdicts: Iterable[GateVerdict], *, label: str = "",
                  run_id: str = "") -> list[dict[str, Any]]:
    """Allure 3 checks, one per verdict; ids and names carry the run so that several runs in
    one results folder do not overwrite each other's checks."""
    prefix = f"{label} · " if label else ""
    key = f"{run_id}-" if run_id else ""
    return safe_data([  # the Allure UI shows the reason decoded: escaped here
        {
            "id": f"toolbench-{key}gate-{i}",
            "name": f"{prefix}gate {v.gate}",
            "status": "passed" if v.passed else "failed",
            "tags": ["toolbench", v.kind],
            "details": {
                "command": {"metric": f"--gate {v.gate}", "error_rate": "--max-error-rate"}.get(
                    v.kind, "(the run's own check)"),
                "message": f"{'PASSED' if v.passed else 'FAILED'}: {v.reason}",
            },
        }
        for i, v in enumerate(verdicts, start=1)
    ])
