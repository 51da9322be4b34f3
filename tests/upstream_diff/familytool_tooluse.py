#!/usr/bin/env python3
"""FamilyTool's tool-use metrics against upstream's own, on generated golden and predicted calls.

    python tests/upstream_diff/familytool_tooluse.py UPSTREAM [--pairs 50000] [--seed 1]

``UPSTREAM`` is a clone of ``yxzwang/FamilyTool`` at ``c3c5fc7``: its
``resources/UnifiedToolHub/benchmark/metrics.py`` ``metrics_for_single_round_tool_call`` with
``is_strict=True`` (what FamilyTool's tool-use evaluation calls) against the harness's
:func:`tooluse_values`. Golden lists hold 1-3 calls, predictions 0-4 or a copy of the gold; names,
keys and string values carry stray spaces (strict mode strips names and top-level keys only),
values are of every JSON type (``1`` against ``1.0``, ``True`` against ``1``), several calls share
a name (paired after sorting), and some predictions lack ``name`` or ``parameters``. A pair on
which upstream's function raises is counted apart (the harness scores those without crashing:
its ledger says how). Exit status 1 on any difference.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from upstream_source import diff_arguments, upstream_functions  # noqa: E402

from pytest_toolbench.benchmarks.familytool.scoring import tooluse_values  # noqa: E402

NAMES = ["get_time", " get_time", "get_time ", "book", "call"]
KEYS = ["time", " time", "time ", "loc", "who"]
VALUES: list[Any] = ["10:00", " 10:00", "10:00 ", 1, 1.0, True, None, [1], {"a": 1}, "", "Alice"]
#: upstream's names -> the harness's
METRICS = {"ExactMatch-AllTools": "em", "ExactMatch-PerTool": "em_per_tool", "ToolAccuracy": "tool_acc",
           "ParameterAccuracy": "value_acc"}


def call(rng: random.Random, golden: bool) -> dict[str, Any]:
    made = {"name": rng.choice(NAMES),
            "parameters": {rng.choice(KEYS): rng.choice(VALUES) for _ in range(rng.randint(0, 3))}}
    if not golden and rng.random() < 0.1:
        del made[rng.choice(["name", "parameters"])]
    elif not golden and rng.random() < 0.03:  # upstream crashes once it pairs one (no .get)
        made["parameters"] = rng.choice([" 10:00", [1], 1])
    return made


def main() -> int:
    parser = diff_arguments(__doc__, ("upstream", "a clone of yxzwang/FamilyTool at c3c5fc7"), ("--pairs", 50000))
    args = parser.parse_args()
    ns = upstream_functions(args.upstream / "resources" / "UnifiedToolHub" / "benchmark" / "metrics.py",
                            {"strip_strings_in_dict", "convert_to_dict", "metrics_for_single_round_tool_call"},
                            {"json": json})
    rng = random.Random(args.seed)
    differ = raised = 0
    for _ in range(args.pairs):
        golden = [call(rng, True) for _ in range(rng.randint(1, 3))]
        predicted = [call(rng, False) for _ in range(rng.randint(0, 4))]
        if rng.random() < 0.3:
            predicted = json.loads(json.dumps(golden))
        try:  # copies: upstream's strict stripping builds new dicts, but never trust that
            theirs = ns["metrics_for_single_round_tool_call"](json.loads(json.dumps(golden)),
                                                             json.loads(json.dumps(predicted)), True)
        except Exception:  # noqa: BLE001
            raised += 1
            continue
        ours = tooluse_values(golden, predicted)
        if any(abs(theirs[name] - ours[key]) > 1e-12 for name, key in METRICS.items()):
            differ += 1
            if differ <= args.show:
                print(json.dumps({"golden": golden, "predicted": predicted, "upstream": theirs, "harness": ours}))
    print(f"{args.pairs} pairs (seed {args.seed}): {differ} differ from upstream; upstream raised on {raised}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
