"""Run-level Allure files, so the benchmark (not a pass-rate donut) is on the report's first screen.

Written once by the controller into ``--alluredir`` at session end:

* ``toolbench-perf.json``: every metric (value, CI bounds, subgroups) as Allure 3 *metrics*
  (the ``*-perf.json`` format), which Allure 3 shows in the overview's metrics widget and which
  its quality-gate rules ``metricMin``/``metricMax`` read;
* one ``*-check.json`` per gate verdict: Allure 3 *checks*, listed with their status on the
  report's summary;
* ``environment.properties``: model, backend, data sources, headline metrics and gate verdicts;
* ``executor.json`` (run id, tool name) and ``categories.json`` (wrong answers, tool-call parse
  failures and infrastructure errors, for Allure 2 / the classic plugin);
* ``allurerc.mjs``: the Allure 3 config for this folder (report name, the same categories matched
  on our ``toolbench_outcome`` label, and quality-gate rules mirroring our plain absolute
  ``>=``/``<=`` gates; baseline and paired-comparison gates are only in our checks),
  used by ``--allure-html`` and by ``npx allure generate|quality-gate DIR -c DIR/allurerc.mjs``;
* a run-level HTML attachment with the metric tables and gate verdicts (``allure.global_attach``).
"""

from __future__ import annotations

import html
import json
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pytest_toolbench.report.allure_report import INFRA, OUTCOME_LABEL, PARSE, WRONG
from pytest_toolbench.results.aggregate import MetricValue, RunMetrics, ScenarioMetrics
from pytest_toolbench.results.gates import Gate, GateVerdict, parse_gate

PERF_FILE = "toolbench-perf.json"
CONFIG_FILE = "allurerc.mjs"

#: (category name, outcome label value, Allure statuses, message regex for Allure 2)
CATEGORIES: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("Infrastructure errors", INFRA, ("failed", "broken"), r"(?s).*infrastructure error.*"),
    ("Tool-call parse failures", PARSE, ("failed",), r"(?s)tool-call parse failure.*"),
    ("Wrong answers", WRONG, ("failed",), r"(?s)(?!tool-call parse failure)(?!infrastructure error).*"),
)


def fmt_value(mv: MetricValue, value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:.1f}%" if mv.is_rate else f"{value:.4g}"


def fmt_metric(mv: MetricValue) -> str:
    """``81.2% [95% CI 70.1%, 90.0%] n=40`` (the CI part only when it is defined)."""
    out = fmt_value(mv, mv.value)
    if mv.ci_low is not None and mv.ci_high is not None:
        out += f" [95% CI {fmt_value(mv, mv.ci_low)}, {fmt_value(mv, mv.ci_high)}]"
    return f"{out} n={mv.n}"


# --------------------------------------------------------------------------- metrics (perf)
def perf_records(metrics: RunMetrics, *, now_ms: int | None = None) -> list[dict[str, Any]]:
    """Every metric, CI bound and subgroup value as Allure 3 metric samples (key = metric path)."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    out: list[dict[str, Any]] = []

    def add(s: ScenarioMetrics, path: str, title: str, mv: MetricValue) -> None:
        for field in ("value", "ci_low", "ci_high"):
            v = getattr(mv, field)
            if v is None:
                continue
            key = path if field == "value" else f"{path}.{field}"
            rate = mv.is_rate
            out.append({
                "id": key, "key": key, "value": 100 * v if rate else v, "start": now, "stop": now,
                "title": title if field == "value" else f"{title} ({field})",
                **({"unit": "%"} if rate else {}),
                "group": f"{s.benchmark}.{s.scenario}",
                "better": "higher" if mv.higher_is_better else "lower",
            })

    for s in metrics.scenarios:
        base = f"{s.benchmark}.{s.scenario}"
        for name, mv in s.metrics.items():
            add(s, f"{base}.{name}", f"{base} {name}", mv)
        for label, groups in s.breakdown.items():
            for g in groups:
                for name, mv in g.metrics.items():
                    add(s, f"{base}[{label}={g.group}].{name}",
                        f"{base} {name} ({label}={g.group})", mv)
    return out


# --------------------------------------------------------------------------- gates (checks)
def check_records(verdicts: Iterable[GateVerdict]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"toolbench-gate-{i}",
            "name": f"gate {v.gate}",
            "status": "passed" if v.passed else "failed",
            "tags": ["toolbench", v.kind],
            "details": {
                "command": f"--gate {v.gate}" if v.kind == "metric" else "--max-error-rate",
                "message": f"{'PASSED' if v.passed else 'FAILED'}: {v.reason}",
            },
        }
        for i, v in enumerate(verdicts, start=1)
    ]


def quality_gate_rules(gates: Sequence[str], metrics: RunMetrics) -> list[dict[str, Any]]:
    """Our plain absolute ``>=``/``<=`` gates as Allure 3 ``metricMin``/``metricMax`` rules on the
    same metric key (the ``*-perf.json`` samples). Every other gate stays with our own verdict
    (the checks): see :func:`allure_expressible`."""
    rules: list[dict[str, Any]] = []
    samples = {r["key"]: r for r in perf_records(metrics, now_ms=0)}
    for text in gates:
        try:
            gate = parse_gate(text)
        except ValueError:
            continue
        if not allure_expressible(gate, samples.keys()):
            continue
        # Rates are stored in percent in the perf samples (see perf_records).
        rule = "metricMin" if gate.op == ">=" else "metricMax"
        value = 100 * gate.threshold if samples[gate.path].get("unit") == "%" else gate.threshold
        rules.append({"id": str(gate), rule: {"key": gate.path, "value": value}})
    return rules


def allure_expressible(gate: Gate, sample_keys: Iterable[str]) -> bool:
    """A rule ``metricMin|metricMax(key, value)`` means "this run's sample >= / <= a constant".
    That is a gate only when it is absolute (a baseline gate's threshold is an offset from the
    baseline's value, and ``.diff``/``.diff_lower``/``.diff_upper``/``.mcnemar_p`` read the paired
    comparison, not this run's metric), its operator is ``>=``/``<=``, and its path is a sample
    this run wrote (a value or CI bound; not ``.n`` or the error-rate limit)."""
    if gate.needs_baseline or gate.op not in (">=", "<="):
        return False
    if gate.path.endswith(".n") or ".error_rate" in gate.path:
        return False
    return gate.path in set(sample_keys)


# --------------------------------------------------------------------------- HTML table
def render_metrics_html(metrics: RunMetrics, verdicts: Sequence[GateVerdict] = (),
                        header: dict[str, str] | None = None) -> str:
    """A self-contained HTML page: run header, gate verdicts, then per benchmark/scenario the
    metric table (value, 95% CI, n) and one table per breakdown label."""
    e = html.escape
    css = ("body{font-family:sans-serif;font-size:14px}table{border-collapse:collapse;margin:6px 0 14px}"
           "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}"
           "td:first-child,th:first-child{text-align:left}.pass{color:#167a2b;font-weight:bold}"
           ".fail{color:#b3261e;font-weight:bold}")
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><style>{css}</style></head>"
             "<body><h2>pytest-toolbench metrics</h2>"]
    if header:
        parts.append("<p>" + " &middot; ".join(f"<b>{e(k)}</b>: {e(v)}" for k, v in header.items())
                     + "</p>")
    if verdicts:
        parts.append("<h3 id='toolbench-gates'>Gate verdicts</h3><table class='toolbench-gates'>"
                     "<tr><th>gate</th><th>verdict</th><th>actual</th><th>reason</th></tr>")
        for v in verdicts:
            cls, word = ("pass", "PASSED") if v.passed else ("fail", "FAILED")
            actual = "n/a" if v.actual is None else f"{v.actual:.4g}"
            parts.append(f"<tr><td>{e(v.gate)}</td><td class='{cls}'>{word}</td>"
                         f"<td>{actual}</td><td>{e(v.reason)}</td></tr>")
        parts.append("</table>")
    for s in metrics.scenarios:
        parts.append(f"<h3>{e(s.benchmark)} / {e(s.scenario)}</h3><p>{s.n_cases} cases, "
                     f"{s.n_errors} infrastructure errors, {s.n_parse_failures} tool-call parse "
                     "failures</p><table class='toolbench-metrics'><tr><th>metric</th><th>value</th>"
                     "<th>95% CI</th><th>n</th><th></th></tr>")
        for name, mv in s.metrics.items():
            ci = ("n/a" if mv.ci_low is None or mv.ci_high is None
                  else f"[{fmt_value(mv, mv.ci_low)}, {fmt_value(mv, mv.ci_high)}]")
            better = "higher is better" if mv.higher_is_better else "lower is better"
            parts.append(f"<tr><td>{e(name)}</td><td>{fmt_value(mv, mv.value)}</td><td>{ci}</td>"
                         f"<td>{mv.n}</td><td>{better}</td></tr>")
        parts.append("</table>")
        for label, groups in s.breakdown.items():
            if not groups:
                continue
            names = list(groups[0].metrics)
            parts.append(f"<h4>by {e(label)}</h4><table class='toolbench-breakdown'><tr>"
                         f"<th>{e(label)}</th><th>cases</th>"
                         + "".join(f"<th>{e(n)} [95% CI] n</th>" for n in names) + "</tr>")
            for g in groups:
                cells = "".join(f"<td>{e(fmt_metric(g.metrics[n]))}</td>" if n in g.metrics
                                else "<td>n/a</td>" for n in names)
                parts.append(f"<tr><td>{e(g.group)}</td><td>{g.n_cases}</td>{cells}</tr>")
            parts.append("</table>")
    for t in metrics.tables:
        parts.append(f"<h3>{e(t.benchmark)}: {e(t.title)}</h3><table><tr>"
                     + "".join(f"<th>{e(str(c))}</th>" for c in t.columns) + "</tr>")
        for row in t.rows:
            parts.append("<tr>" + "".join(f"<td>{e('n/a' if c is None else str(c))}</td>"
                                          for c in row) + "</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)


# --------------------------------------------------------------------------- environment etc.
def _prop(text: str) -> str:
    """Escape for a Java .properties value (one line)."""
    return text.replace("\\", "\\\\").replace("\n", " ").replace("\r", " ")


def environment_properties(metrics: RunMetrics, verdicts: Sequence[GateVerdict],
                           info: dict[str, str]) -> str:
    """Gate verdict first, then each scenario's headline metric, then model/backend/data: Allure
    shows the first entries of the environment on the overview without "show more"."""
    lines: list[str] = []
    if verdicts:
        failed = [v.gate for v in verdicts if not v.passed]
        word = "PASSED" if not failed else "FAILED"
        lines.append(f"gates={word} ({len(verdicts) - len(failed)}/{len(verdicts)} passed)"
                     + (f"; failed: {_prop(', '.join(failed))}" if failed else ""))
    for s in metrics.scenarios:
        for name, mv in list(s.metrics.items())[:1]:  # the headline (first declared) metric
            lines.append(f"{s.benchmark}.{s.scenario}={_prop(f'{name} {fmt_metric(mv)}')}")
    lines += [f"{k}={_prop(v)}" for k, v in info.items()]
    return "\n".join(lines) + "\n"


def categories_json() -> list[dict[str, Any]]:
    return [{"name": name, "matchedStatuses": list(statuses), "messageRegex": regex}
            for name, _, statuses, regex in CATEGORIES]


def allurerc(report_name: str, gates: Sequence[str], metrics: RunMetrics,
             output: str = "allure-report") -> str:
    config = {
        "name": report_name,
        "output": output,
        "plugins": {"awesome": {"options": {"reportName": report_name, "singleFile": False,
                                            "groupBy": ["epic", "feature", "story"]}}},
        "categories": [
            {"name": name, "matchers": {"labels": {OUTCOME_LABEL: value}}}
            for name, value, _, _ in CATEGORIES
        ],
    }
    rules = quality_gate_rules(gates, metrics)
    if rules:
        config["qualityGate"] = {"rules": rules}
    return ("// Written by pytest-toolbench for this results folder (Allure 3 config).\n"
            f"export default {json.dumps(config, indent=2)};\n")


def write_run_files(
    alluredir: str | Path,
    metrics: RunMetrics,
    verdicts: Sequence[GateVerdict],
    *,
    info: dict[str, str],
    gates: Sequence[str] = (),
    run_id: str = "",
    report_name: str = "pytest-toolbench",
) -> list[Path]:
    """Write the run-level files listed in the module docstring; return their paths."""
    d = Path(alluredir)
    d.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def put(name: str, text: str) -> None:
        p = d / name
        p.write_text(text, encoding="utf-8")
        written.append(p)

    put(PERF_FILE, json.dumps(perf_records(metrics), indent=2))
    for rec in check_records(verdicts):
        put(f"{uuid.uuid4()}-check.json", json.dumps(rec, indent=2))
    put("environment.properties", environment_properties(metrics, verdicts, info))
    put("executor.json", json.dumps({"name": "pytest-toolbench", "type": "pytest",
                                     "buildName": run_id or "run", "reportName": report_name},
                                    indent=2))
    put("categories.json", json.dumps(categories_json(), indent=2))
    put(CONFIG_FILE, allurerc(report_name, gates, metrics))
    return written
