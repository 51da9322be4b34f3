"""Several runs in one Allure results folder: each keeps its own summary, none overwrites another.

Allure reads one ``environment`` file, one ``executor.json`` and one config per folder, so a
second run used to replace the first run's metrics, model and gates on the report's first screen.
Each run now saves a small entry (model, run id, headline metrics, gate verdicts) under
``toolbench-runs/`` (a subfolder: Allure reads only the folder's top-level files), and the
folder-wide files are rebuilt from *all* records after every run:

* ``environment.xml``: the report's "Metadata" block, one entry per run with its gate verdict and
  one per scenario with its headline metric, the model as the entry's name. Allure 3 keeps
  repeated names from the XML form (the ``.properties`` form cannot repeat a key, and splits keys
  at spaces and colons);
* one entry per run with its data (real or sample, revision, fingerprint);
* the report name (in allurerc.mjs): every model in the folder.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.fileio import atomic_write_text
from pytest_toolbench.report.allure_report import display_model
from pytest_toolbench.results.aggregate import MetricValue, RunMetrics
from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.results.safe_text import safe_data, safe_text

RUNS_DIR = "toolbench-runs"
#: An older version's single-run files (see write_folder_files).
OLD_ENVIRONMENT, OLD_EXECUTOR = "environment.properties", "executor.json"


class Headline(DeferredModel):
    scenario: str  # "toolhop.mandatory"
    metric: str
    text: str  # "100.0% n=2"


class AllureRunEntry(DeferredModel):
    """One run's entry in the folder's ``toolbench-runs/``: what the report's first screen shows
    of it, taken from its record (results/run_record.py) when the run ends."""

    run_id: str
    model: str
    written_ms: int
    verdicts: list[GateVerdict] = []
    headlines: list[Headline] = []
    info: dict[str, str] = {}

    @property
    def shown_model(self) -> str:
        return display_model(self.model)


def headline_text(mv: MetricValue) -> str:
    """Short enough for a Metadata chip (Allure cuts one at ~37 characters): value, its 95% CI
    in whole percent, n (``83.3% CI 50-100 n=6``)."""
    if mv.value is None:
        return f"n/a n={mv.n}"
    if mv.is_rate:
        value = f"{100 * mv.value:.1f}%"
        ci = ("" if mv.ci_low is None or mv.ci_high is None
              else f" CI {100 * mv.ci_low:.0f}-{100 * mv.ci_high:.0f}")
    else:
        value = f"{mv.value:.4g}"
        ci = ("" if mv.ci_low is None or mv.ci_high is None
              else f" CI {mv.ci_low:.3g}-{mv.ci_high:.3g}")
    return f"{value}{ci} n={mv.n}"


def headlines(metrics: RunMetrics) -> list[Headline]:
    """Each scenario's headline (first declared) metric."""
    out = []
    for s in metrics.scenarios:
        for name, mv in list(s.metrics.items())[:1]:
            out.append(Headline(scenario=f"{s.benchmark}.{s.scenario}", metric=name,
                                text=headline_text(mv)))
    return out


def make_entry(metrics: RunMetrics, verdicts: Sequence[GateVerdict], *, run_id: str, model: str,
                info: dict[str, str] | None = None, now_ms: int | None = None) -> AllureRunEntry:
    # what the first screen shows, escaped once here: a verdict's reason or a data note quotes
    # data, and every folder-wide file is rebuilt from these records
    shown = [v.model_copy(update={"gate": safe_text(v.gate), "reason": safe_text(v.reason)})
             for v in verdicts]
    return AllureRunEntry(run_id=run_id or "run", model=safe_text(model), verdicts=shown,
                     headlines=headlines(metrics), info=safe_data(dict(info or {})),
                     written_ms=now_ms if now_ms is not None else int(time.time() * 1000))


def save_entry(alluredir: Path, record: AllureRunEntry) -> Path:
    d = Path(alluredir) / RUNS_DIR
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{record.run_id}.json"
    # atomic: another run sharing the folder may be reading every entry right now
    atomic_write_text(path, record.model_dump_json(indent=2))
    return path


def load_entries(alluredir: Path) -> list[AllureRunEntry]:
    """Every run saved in the folder, oldest first; unreadable records are skipped."""
    records = []
    for path in sorted((Path(alluredir) / RUNS_DIR).glob("*.json")):
        try:
            records.append(AllureRunEntry.model_validate_json(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, ValidationError):
            continue
    return sorted(records, key=lambda r: (r.written_ms, r.run_id))


def run_labels(records: Sequence[AllureRunEntry]) -> list[str]:
    """The model as shown; a model with several runs in the folder also names the run."""
    shown = [r.shown_model for r in records]
    return [s if shown.count(s) == 1 else f"{s} · run {r.run_id}" for s, r in zip(shown, records)]


def gates_text(verdicts: Sequence[GateVerdict]) -> str:
    if not verdicts:
        return "no gates"
    failed = [v.gate for v in verdicts if not v.passed]
    passed = len(verdicts) - len(failed)
    if not failed:
        return f"gates PASSED {passed}/{len(verdicts)}"
    return f"gates FAILED {passed}/{len(verdicts)}"


def failed_gates(verdicts: Sequence[GateVerdict]) -> list[str]:
    """A chip per failed gate, each whole (one chip of them all was cut after ~37 characters)."""
    return [f"FAILED {v.gate}" for v in verdicts if not v.passed]


def _xml_text(text: str) -> str:
    """Allure 3's XML reader keeps entities undecoded, so ``&lt;`` would show as is: write the
    few characters XML forbids in text as look-alikes instead."""
    text = safe_text(text).replace("<=", "≤").replace(">=", "≥").replace("&", "+").replace("<", "‹")
    return " ".join(text.split())


def metadata_entries(records: Sequence[AllureRunEntry]) -> list[tuple[str, str]]:
    """(name, value) per Metadata chip, the model as name: first every run's gate count (so every
    verdict is on screen whatever the number of runs), its data and backend, then scenario by
    scenario each run's headline metric with its CI, so that with two runs each row of Allure's
    two-column block compares them; then each failed gate.
    The benchmark is left out of a scenario's name when all runs cover one benchmark."""
    labels = run_labels(records)
    entries = [(label, gates_text(r.verdicts)) for label, r in zip(labels, records)]
    # what each run's numbers were computed on (real or sample, revision, fingerprint), and how
    entries += [(label, f"data: {r.info['data']}") for label, r in zip(labels, records)
                if r.info.get("data")]
    entries += [(label, f"backend: {r.info['backend']}") for label, r in zip(labels, records)
                if r.info.get("backend")]
    scenarios = list(dict.fromkeys(h.scenario for r in records for h in r.headlines))
    one_benchmark = len({s.split(".", 1)[0] for s in scenarios}) == 1
    for scenario in scenarios:
        shown = scenario.split(".", 1)[1] if one_benchmark else scenario
        for label, r in zip(labels, records):
            for h in r.headlines:
                if h.scenario == scenario:
                    entries.append((label, f"{shown} {h.metric} {h.text}"))
    # last: a run's failed gates, whole, one chip each (an odd number would shift the pairs)
    return entries + [(label, chip) for label, r in zip(labels, records)
                      for chip in failed_gates(r.verdicts)]

def environment_xml(records: Sequence[AllureRunEntry]) -> str:
    params = "".join(f"  <parameter><key>{_xml_text(k)}</key><value>{_xml_text(v)}</value>"
                     "</parameter>\n" for k, v in metadata_entries(records))
    return f"<environment>\n{params}</environment>\n"


def report_name(records: Sequence[AllureRunEntry]) -> str:
    return "pytest-toolbench: " + (", ".join(dict.fromkeys(run_labels(records))) or "no runs")


def write_folder_files(alluredir: Path, records: Sequence[AllureRunEntry]) -> list[Path]:
    """environment.xml for every run in the folder; return its path. Our files from before runs
    were kept apart (a single run's environment.properties and executor.json) are removed: they
    would compete with it, and the executor's chip would push a run's entry off the first
    screen (Allure shows 8 Metadata chips before "Show more")."""
    d = Path(alluredir)
    for name, mark in ((OLD_ENVIRONMENT, "run_id="), (OLD_EXECUTOR, '"pytest-toolbench"')):
        old = d / name
        if old.is_file() and mark in old.read_text(encoding="utf-8", errors="replace"):
            old.unlink()
    env = d / "environment.xml"
    env.write_text(environment_xml(records), encoding="utf-8")
    return [env]
