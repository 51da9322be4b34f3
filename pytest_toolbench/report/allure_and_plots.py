"""End-of-session outputs beside the JSON report and in Allure: plots, run-level Allure files,
and the Allure 3 HTML build, written from the run's record by the controller's session end."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_toolbench.output_streams import writes_in_place

if TYPE_CHECKING:  # configure_allure runs in every pytest command and xdist worker: ~50 ms of
    # the record's models, which only the controller's session end needs
    from pytest_toolbench.results.run_record import RunRecord


def configure_allure(config: pytest.Config) -> None:
    """Per process (controller and workers): model into testCaseId; ``--allure-html`` checks."""
    alluredir = config.getoption("--alluredir", None)
    if alluredir:
        from pytest_toolbench.report.allure_report import (
            register_allure_hooks,
            unregister_allure_hooks,
        )

        from pytest_toolbench.report import allure_fixtures

        register_allure_hooks()
        config.add_cleanup(unregister_allure_hooks)
        allure_fixtures.register(config)  # no "unknown" tear-down steps (pytest >= 9.1)
    html = config.getoption("--allure-html", None)
    if html and not alluredir:
        raise pytest.UsageError("pytest-toolbench: --allure-html DIR needs --alluredir RESULTS "
                                "(the results Allure 3 builds the HTML from)")
    if html and not hasattr(config, "workerinput"):
        config.pluginmanager.register(AllureHtmlBuilder(config, Path(alluredir), Path(html)),
                                      "toolbench-allure-html")


def label_allure_results(config: pytest.Config, run_id: str) -> None:
    """With ``--alluredir``, every result this process writes from now on names the run
    (report/allure_report.py ``RUN_LABEL``): the controller once its run folder is made, each
    xdist worker of that run."""
    if config.getoption("--alluredir", None):
        from pytest_toolbench.report.allure_report import label_run_results

        label_run_results(run_id)


def plots_dir(config: pytest.Config, json_path: Path | None, run_dir: Path) -> Path | None:
    if config.getoption("--no-plots", False):
        return None
    if json_path is not None and not writes_in_place(json_path):
        from pytest_toolbench.report.plots import plots_dir_for

        return plots_dir_for(json_path)
    # a JSON report sent to a stream (/dev/stdout, /dev/null) has no folder to put them beside:
    # /dev/null.plots was made in /dev as root, and refused for any other user (exit 13)
    if json_path is not None or config.getoption("--alluredir", None):
        return run_dir / "plots"
    return None


def write_plots_and_allure(
    config: pytest.Config,
    record: RunRecord,
    summary: str,
    *,
    run_dir: Path,
    data_sources: list[Any],
    backend: str = "",
) -> list[Path]:
    """Write the run's plots and (with ``--alluredir``) its run-level Allure files; return the
    plots. With ``--baseline`` the model-comparison chart (this run vs the baseline, CI bars) is
    one of them, beside the JSON and attached to Allure like the others. ``backend``: the one
    the run resolved (the settings may say ``auto``)."""
    settings = record.run.settings
    metrics = record.metrics
    run_id = record.run.run_id or ""
    model = str(settings.model or "")
    json_path = settings.json_path
    images: list[Path] = []
    out = plots_dir(config, Path(json_path) if json_path else None, run_dir)
    if out is not None:
        from pytest_toolbench.benchmarks import registry
        from pytest_toolbench.report.plots import write_plots
        from pytest_toolbench.results.headline import headlines_of

        names = {s.benchmark for s in metrics.scenarios}
        headlines = headlines_of({n: b for n, b in registry().items() if n in names})
        images = write_plots(metrics, out, model=model, run_id=run_id, headlines=headlines)
        if record.baseline is not None:
            from pytest_toolbench.compare.plot import plot_comparison

            try:
                images.append(plot_comparison(record.baseline, out / "comparison-with-baseline.png"))
            except ValueError:  # no metric with a value in either run: nothing to draw
                pass
    alluredir = config.getoption("--alluredir", None)
    if alluredir:
        write_run_allure(alluredir, record, summary, images=images, data_sources=data_sources,
                         backend=backend)
    return images


def write_run_allure(alluredir: str | Path, record: RunRecord, summary: str, *,
                     images: Sequence[Path] = (), data_sources: Sequence[Any] = (),
                     backend: str = "") -> None:
    """The run's run-level Allure files in ``alluredir``: its entry among the folder's runs,
    the environment and categories rebuilt, each gate as a check, and the metrics (text, HTML,
    JSON) and ``images`` as the run's global attachments. Without pytest: ``toolbench finish
    --alluredir`` writes them for a run killed before its end (session/finish_cli.py)."""
    settings = record.run.settings
    metrics = record.metrics
    run_id = record.run.run_id or ""
    model = str(settings.model or "")
    from pytest_toolbench.report.allure_report import attach_run_metrics, display_model
    from pytest_toolbench.report.allure_run import (
        environment_of,
        render_metrics_html,
        write_run_files,
    )

    info = {
        "model": model,
        "backend": str(backend or settings.backend or ""),
        "decoding": str(settings.decoding or "preset default"),
        "run_id": run_id,
    }
    from pytest_toolbench.results.provenance import BenchmarkData, provenance_dict

    data = record.run.data or provenance_dict(data_sources)
    # a Metadata chip shows ~37 characters: the short form (toolhop sample fp e3928d49f26d);
    # the full description of each file follows as data.N
    info["data"] = ", ".join(BenchmarkData.model_validate(b).short()
                             for b in data.get("benchmarks", [])) or data.get("text", "")
    for i, d in enumerate(data_sources, start=1):
        info[f"data.{i}"] = d.describe()
    write_run_files(alluredir, metrics, record.gates, info=info, run_id=run_id, model=model)
    header = {"model": info["model"], "backend": info["backend"], "run": run_id}
    prefix = f"{display_model(model)} · run {run_id} · "  # runs share the folder
    attach_run_metrics(metrics, summary, alluredir=alluredir,
                       metrics_html=render_metrics_html(metrics, record.gates, header),
                       images=images, prefix=prefix,
                       environment=environment_of(alluredir, model))


class AllureHtmlBuilder:
    """Builds the HTML once every result file is written (terminal summary, after sessionfinish)."""

    def __init__(self, config: pytest.Config, results: Path, out: Path):
        base = Path(config.invocation_params.dir)
        self.config = config
        self.results = results if results.is_absolute() else base / results
        self.out = out if out.is_absolute() else base / out

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from pytest_toolbench.report.allure_html import build_html

        ok, message = build_html(self.results, self.out, roots=[self.config.rootpath])
        terminalreporter.write_line(message)
