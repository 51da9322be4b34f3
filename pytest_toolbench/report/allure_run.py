"""Run-level Allure files, so the benchmark (not a pass-rate donut) is on the report's first screen.

Written once by the controller into ``--alluredir`` at session end. Several runs (models) may
share one results folder: every file is either per run or rebuilt from all runs' records
(report/allure_folder.py), so no run hides another.

* ``toolbench-<run>-perf.json``: every scenario metric as Allure 3 *metrics* (the ``*-perf.json``
  format), one row each (its CI and n in the title), keyed ``<model>/<metric path>``, shown in
  the metrics view;
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
import re
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_toolbench.report import allure_folder
from pytest_toolbench.report.allure_gates import RULE_JS, check_records, gate_rules
from pytest_toolbench.report.allure_report import INFRA, OUTCOME_LABEL, PARSE, WRONG, display_model
from pytest_toolbench.results.aggregate import MetricValue, RunMetrics
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
    """One Allure 3 metric sample per scenario metric: its value, with the 95% CI and n in the
    title (``toolhop.mandatory accuracy · 83.3% [95% CI 50.0%, 100.0%] n=6``). Allure's metrics
    view shows Count/Total/Avg/Min/Max per key, so each CI bound as a sample of its own was a
    row of its own (150 rows for one run); the subgroups are in the metric tables attached to
    the run and in its plots. The key is ``<model>/<metric path>`` (the bare path without a
    model): Allure averages samples that share a key, so two models' runs in one folder must
    not share one."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    out: list[dict[str, Any]] = []
    shown = display_model(model) if model else ""
    key_prefix, title_prefix = (f"{shown}/", f"{shown} · ") if shown else ("", "")
    for s in metrics.scenarios:
        base = f"{s.benchmark}.{s.scenario}"
        for name, mv in s.metrics.items():
            if mv.value is None:
                continue
            key = f"{key_prefix}{base}.{name}"
            out.append({
                "id": key, "key": key, "start": now, "stop": now,
                "value": 100 * mv.value if mv.is_rate else mv.value,
                "title": f"{title_prefix}{base} {name} · {fmt_metric(mv)}",
                **({"unit": "%"} if mv.is_rate else {}),
                "group": base,
                "better": "higher" if mv.higher_is_better else "lower",
            })
    return safe_data(out)  # keys and titles hold a dataset's names


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


#: Each model's environment matches its cases on the ``model`` label (allure_report.attach_case).
ENVIRONMENT_JS = """const toolbenchModel = (model) => ({ labels }) =>
  // pytest-toolbench: one Allure environment per model, so no pass rate mixes two models.
  labels.some((label) => label.name === "model" && label.value === model);
"""


def environments(records: Sequence[allure_folder.AllureRunEntry]) -> list[tuple[str, str, str]]:
    """(id, name, model) per model in the folder, in run order. Allure 3 draws its pass-rate
    donut and statistics per environment: with every model's cases in one, the donut showed the
    pass rate of two models' cases mixed (94.37%), which is no metric of either. Ids may hold
    only ``[A-Za-z0-9_-]`` and names no ``/`` (core-api utils/environment.js,
    ``validateEnvironmentId``/``validateEnvironmentName``), both at most 64 characters."""
    out: list[tuple[str, str, str]] = []
    for model in dict.fromkeys(r.model for r in records):
        name = display_model(model).replace("/", "\u2215").strip()[:64] or "model"
        base = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:56] or "model"
        ident, k = base, 2
        while ident in {e[0] for e in out} or ident == "default":
            ident, k = f"{base}-{k}", k + 1
        out.append((ident, name, model))
    return out


def environment_of(alluredir: str | Path, model: str) -> str | None:
    """The Allure environment id of ``model`` among the runs recorded in the folder."""
    return next((ident for ident, _, m in environments(allure_folder.load_entries(Path(alluredir)))
                 if m == model), None)


def allurerc(records: Sequence[allure_folder.AllureRunEntry], output: str = "allure-report") -> str:
    """The folder's Allure 3 config, for every run recorded in it: a single-file report (its
    data inside index.html, so it opens from disk: a downloaded CI artifact; the multi-file
    report fetch()es its data and spins forever under file://), one environment per model."""
    name = allure_folder.report_name(records)
    config: dict[str, Any] = {
        "name": name,
        "output": output,
        "plugins": {"awesome": {"options": {"reportName": name, "singleFile": True,
                                            "groupBy": GROUP_BY}}},
        "categories": [
            {"name": cat, "matchers": {"labels": {OUTCOME_LABEL: value}}}
            for cat, value, _, _ in CATEGORIES
        ],
    }
    labels = allure_folder.run_labels(records)
    envs = environments(records)
    env_of = {model: ident for ident, _, model in envs}
    rules = gate_rules(((label, r.verdicts) for label, r in zip(labels, records)),
                       [env_of.get(r.model) for r in records])
    body = json.dumps(config, indent=2, ensure_ascii=False)[:-2]
    code = ""
    if envs:  # matchers are code, so they go in beside the JSON data
        body += ',\n  "environments": {\n' + ",\n".join(
            f"    {json.dumps(i)}: {{ name: {json.dumps(n, ensure_ascii=False)}, "
            f"matcher: toolbenchModel({json.dumps(m, ensure_ascii=False)}) }}"
            for i, n, m in envs) + "\n  }"
        code += ENVIRONMENT_JS
    if rules:  # the rule type is code too
        body += (',\n  "qualityGate": {"use": [toolbenchVerdict], "rules": '
                 + json.dumps(rules, indent=2, ensure_ascii=False) + "}")
        code += RULE_JS
    body += "\n}"
    return ("// Written by pytest-toolbench for this results folder (Allure 3 config).\n"
            + code + f"export default {safe_json(body)};\n")


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
