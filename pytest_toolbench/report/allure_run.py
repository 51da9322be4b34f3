"""Run-level Allure files, so the benchmark (not a pass-rate donut) is on the report's first screen.

Written once by the controller into ``--alluredir`` at session end. Several runs (models) may
share one results folder: every file is either per run or rebuilt from all runs' records
(report/allure_folder.py), so no run hides another.

* ``toolbench-<run>-perf.json``: every metric (value, CI bounds, subgroups) as Allure 3 *metrics*
  (the ``*-perf.json`` format), keyed ``<model>/<metric path>``, shown in the metrics view;
* one ``*-check.json`` per gate verdict: Allure 3 *checks*, named with the model;
* ``toolbench-runs/<run>.json``: the run's record; from all records, ``environment.xml`` (the
  first screen's Metadata: each run's gates and headline metrics);
* ``categories.json`` (wrong answers, tool-call parse failures and infrastructure errors, for
  Allure 2 / the classic plugin);
* ``allurerc.mjs``: the Allure 3 config for this folder (report name, cases grouped by model /
  benchmark / scenario, the same categories matched on our ``toolbench_outcome`` label, and every
  run's gate verdicts as quality-gate rules, report/allure_gates.py), used by ``--allure-html``
  and by ``npx allure generate|quality-gate DIR -c DIR/allurerc.mjs``;
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

from pytest_toolbench.report import allure_folder
from pytest_toolbench.report.allure_gates import RULE_JS, check_records, gate_rules
from pytest_toolbench.report.allure_report import INFRA, OUTCOME_LABEL, PARSE, WRONG, display_model
from pytest_toolbench.results.aggregate import MetricValue, RunMetrics, ScenarioMetrics
from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.results.safe_text import safe_data, safe_json, safe_text

CONFIG_FILE = "allurerc.mjs"
#: The report's tree: model / benchmark / scenario (the suite path attach_case sets).
GROUP_BY = ["parentSuite", "suite", "subSuite"]

__all__ = ["CONFIG_FILE", "allurerc", "categories_json", "check_records", "perf_file",
           "perf_records", "render_metrics_html", "write_run_files"]


def perf_file(run_id: str) -> str:
    """One metrics file per run (``*-perf.json`` is what Allure 3 reads as metrics)."""
    return f"toolbench-{run_id or 'run'}-perf.json"

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
def perf_records(metrics: RunMetrics, *, now_ms: int | None = None,
                 model: str = "") -> list[dict[str, Any]]:
    """Every metric, CI bound and subgroup value as Allure 3 metric samples. The key is
    ``<model>/<metric path>`` (the bare path without a model): Allure averages samples that share
    a key, so two models' runs in one folder must not share one."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    out: list[dict[str, Any]] = []
    shown = display_model(model) if model else ""
    key_prefix, title_prefix = (f"{shown}/", f"{shown} · ") if shown else ("", "")

    def add(s: ScenarioMetrics, path: str, title: str, mv: MetricValue) -> None:
        for field in ("value", "ci_low", "ci_high"):
            v = getattr(mv, field)
            if v is None:
                continue
            key = key_prefix + (path if field == "value" else f"{path}.{field}")
            rate = mv.is_rate
            out.append({
                "id": key, "key": key, "value": 100 * v if rate else v, "start": now, "stop": now,
                "title": title_prefix + (title if field == "value" else f"{title} ({field})"),
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
    return safe_data(out)  # keys and titles hold a dataset's group names


# --------------------------------------------------------------------------- HTML table
def render_metrics_html(metrics: RunMetrics, verdicts: Sequence[GateVerdict] = (),
                        header: dict[str, str] | None = None) -> str:
    """A self-contained HTML page: run header, gate verdicts, then per benchmark/scenario the
    metric table (value, 95% CI, n) and one table per breakdown label."""
    def e(text: str) -> str:  # labels, groups and gate reasons are data: escaped, then HTML-safe
        return html.escape(safe_text(text))

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


# --------------------------------------------------------------------------- folder config
def categories_json() -> list[dict[str, Any]]:
    return [{"name": name, "matchedStatuses": list(statuses), "messageRegex": regex}
            for name, _, statuses, regex in CATEGORIES]


def allurerc(records: Sequence[allure_folder.AllureRunEntry], output: str = "allure-report") -> str:
    """The folder's Allure 3 config, for every run recorded in it."""
    name = allure_folder.report_name(records)
    config: dict[str, Any] = {
        "name": name,
        "output": output,
        "plugins": {"awesome": {"options": {"reportName": name, "singleFile": False,
                                            "groupBy": GROUP_BY}}},
        "categories": [
            {"name": cat, "matchers": {"labels": {OUTCOME_LABEL: value}}}
            for cat, value, _, _ in CATEGORIES
        ],
    }
    labels = allure_folder.run_labels(records)
    rules = gate_rules((label, r.verdicts) for label, r in zip(labels, records))
    body = json.dumps(config, indent=2, ensure_ascii=False)
    if rules:  # the rule type is code, so it goes in beside the JSON data
        body = (body[:-2] + ',\n  "qualityGate": {"use": [toolbenchVerdict], "rules": '
                + json.dumps(rules, indent=2, ensure_ascii=False) + "}\n}")
    return ("// Written by pytest-toolbench for this results folder (Allure 3 config).\n"
            + (RULE_JS if rules else "") + f"export default {safe_json(body)};\n")


def write_run_files(
    alluredir: str | Path,
    metrics: RunMetrics,
    verdicts: Sequence[GateVerdict],
    *,
    info: dict[str, str],
    run_id: str = "",
    model: str = "",
) -> list[Path]:
    """Write this run's files and rebuild the folder-wide ones from every run recorded in the
    folder (see the module docstring); return the paths written."""
    d = Path(alluredir)
    d.mkdir(parents=True, exist_ok=True)
    model = model or info.get("model", "")
    written: list[Path] = []

    def put(name: str, text: str) -> None:
        p = d / name
        p.write_text(text, encoding="utf-8")
        written.append(p)

    put(perf_file(run_id), json.dumps(perf_records(metrics, model=model), indent=2))
    record = allure_folder.make_entry(metrics, verdicts, run_id=run_id, model=model, info=info)
    written.append(allure_folder.save_entry(d, record))
    records = allure_folder.load_entries(d)
    label = allure_folder.run_labels(records)[[r.run_id for r in records].index(record.run_id)]
    for rec in check_records(verdicts, label=label, run_id=record.run_id):
        put(f"{uuid.uuid4()}-check.json", json.dumps(rec, indent=2))
    written += allure_folder.write_folder_files(d, records)
    put("categories.json", json.dumps(categories_json(), indent=2))
    put(CONFIG_FILE, allurerc(records))
    return written
