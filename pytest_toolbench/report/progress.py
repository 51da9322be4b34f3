"""A live progress line for long runs, redrawn in place on the terminal.

What it shows (one line, at most four redraws a second)::

    toolbench 12/40 cases | 1 error | toolhop/direct accuracy 58.3% | 3 in flight | 4.1k tokens | 0:42 | ~1:30 left

- cases done / selected (pytest items that carry a toolbench case), and infrastructure errors;
- the running headline metric: the lead metric (results/headline.py's ``lead_metric``, as the
  end screen leads with) of the first scenario (in the benchmark's order) of the first benchmark
  (in registry order) that has results, over its scored cases so far;
- model requests in flight and tokens (prompt + completion as the endpoint reported them) of the
  requests this run sent (models/meter.py; replies from the response cache cost none);
- elapsed time and an estimate of the time left (elapsed / done x remaining).

Staying out of pytest's way: the line is drawn only on a terminal, at normal verbosity (not with
``-q``/``-qq``, where quiet is asked for, nor ``-v``, which already prints a line per case), not
with ``-s`` (a test's prints would tear it), not with ``--no-progress``. While it is shown, it
*replaces* pytest's progress dots and the file name before them (the summary still counts every
outcome), so pytest writes nothing on its line. Every write of pytest's terminal reporter goes
through :class:`_ClearingFile`, which erases the line first; a background thread redraws it once
pytest's output is back at the start of a line. It writes to a duplicate of the terminal's file
descriptor, taken before the tests run, so pytest's output capturing never swallows it. At the end
of the test loop the line is drawn a last time (final counts), then erased, before pytest's summary.

Under pytest-xdist the controller draws it: cases, errors and the metric come from the results the
workers report (session/transport.py), so they are exact; requests in flight and tokens are each worker's
meter as of its latest report (every test report carries it, see :class:`WorkerMeter`), summed
over the workers: in flight lags by at most one test per worker, tokens are exact at the end.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest

from pytest_toolbench.benchmarks import registry
from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.counting import counted
from pytest_toolbench.models.meter import REQUEST_METER, MeterReading
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.headline import headline_of, lead_metric
from pytest_toolbench.results.metrics import MetricSpec
from pytest_toolbench.runtime.upcoming import case_of

#: A worker's meter reading, attached to every test report it sends (JSON list, MeterReading order).
METER_PROPERTY = "toolbench.meter"
PLUGIN_NAME = "toolbench-progress"
REFRESH_S = 0.25
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


# --------------------------------------------------------------------------- the numbers
@dataclass
class _Accumulator:
    spec: MetricSpec
    numerator: float = 0.0
    denominator: float = 0.0
    n: int = 0

    def add(self, values: dict[str, float]) -> None:
        if self.spec.value not in values:
            return
        if self.spec.kind == "ratio":
            if self.spec.denominator is None or self.spec.denominator not in values:
                return
            self.denominator += values[self.spec.denominator]
        else:
            self.denominator += 1
        self.numerator += values[self.spec.value]
        self.n += 1

    @property
    def value(self) -> float | None:
        return self.numerator / self.denominator if self.denominator else None


@dataclass
class ProgressCounts:
    """What the line shows, fed by the controller as results arrive (thread-safe)."""

    total: int | None = None
    done: int = 0
    errors: int = 0
    started: float = field(default_factory=time.monotonic)
    _seen: set[str] = field(default_factory=set)
    _metrics: dict[tuple[str, str], _Accumulator] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, result: CaseResult) -> None:
        with self._lock:
            if result.case_id in self._seen:
                return
            self._seen.add(result.case_id)
            self.done += 1
            if result.outcome is Outcome.ERROR:
                self.errors += 1
                return
            key = (result.benchmark, result.scenario)
            if key not in self._metrics:
                benchmark = registry().get(result.benchmark)
                specs = {m.name: m for m in (benchmark.metrics if benchmark else ())
                         if m.applies_to(result.scenario)}
                lead = lead_metric(headline_of(benchmark), result.scenario, specs)
                if lead is None:
                    return
                self._metrics[key] = _Accumulator(specs[lead])
            self._metrics[key].add(result.values)

    def headline(self) -> tuple[str, float, int] | None:
        """(label, value, n) of the first benchmark's first scenario's lead metric."""
        with self._lock:
            keys = list(self._metrics)
            benchmarks = list(registry())
            order = {name: i for i, name in enumerate(benchmarks)}

            def rank(key: tuple[str, str]) -> tuple[int, int]:
                bench = registry().get(key[0])
                scenarios = list(bench.scenarios) if bench else []
                return (order.get(key[0], len(order)),
                        scenarios.index(key[1]) if key[1] in scenarios else len(scenarios))

            for key in sorted(keys, key=rank):
                acc = self._metrics[key]
                if acc.value is not None:
                    return f"{key[0]}/{key[1]} {acc.spec.name}", acc.value, acc.n
            return None


def short_count(n: int) -> str:
    """``950``, ``12.3k``, ``1.23M``: a token count in a few characters (the progress line, the
    leaderboard)."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.2f}M"


def _clock(seconds: float) -> str:
    s = int(max(0, seconds))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def _metric(value: float) -> str:
    return f"{100 * value:.1f}%" if 0.0 <= value <= 1.0 else f"{value:.3g}"


def render_line(counts: ProgressCounts, meter: MeterReading, now: float) -> str:
    """The progress line's text (ASCII only: it is erased by column count)."""
    elapsed = now - counts.started
    done_total = f"{counts.done}/{counts.total}" if counts.total else f"{counts.done}"
    parts = [f"toolbench {done_total} cases",
             counted(counts.errors, "error")]
    headline = counts.headline()
    if headline is not None:
        label, value, n = headline
        parts.append(f"{label} {_metric(value)} (n={n})")
    parts.append(f"{meter.in_flight} in flight")
    parts.append(f"{short_count(meter.prompt_tokens + meter.completion_tokens)} tokens")
    parts.append(_clock(elapsed))
    if counts.total and counts.done:
        left = elapsed / counts.done * max(0, counts.total - counts.done)
        parts.append(f"~{_clock(left)} left")
    else:
        parts.append("~?:?? left")
    return " | ".join(parts)


# --------------------------------------------------------------------------- the terminal
class LiveLine:
    """One line at the bottom of the terminal output, erased whenever pytest writes."""

    def __init__(self, tw: Any):
        self._tw = tw
        self._file = tw._file
        self._fd = os.dup(self._file.fileno())
        self._lock = threading.RLock()
        self._shown = 0
        self._at_line_start = tw.width_of_current_line == 0
        tw._file = _ClearingFile(self._file, self)

    def _erase(self) -> None:
        if self._shown:
            os.write(self._fd, ("\r" + " " * self._shown + "\r").encode())
            self._shown = 0

    def pytest_wrote(self, text: str) -> None:
        """Pass pytest's text on; erase the line first if the text is visible."""
        with self._lock:
            visible = _ESCAPES.sub("", text)
            if visible:
                self._erase()
            self._file.write(text)
            self._file.flush()
            if visible:
                self._at_line_start = visible.endswith("\n")

    def draw(self, text: str) -> bool:
        with self._lock:
            if not self._at_line_start:
                return False
            try:
                # 0: a terminal whose size was never set (as pytest's own writer reads it)
                width = os.get_terminal_size(self._fd).columns or 80
            except OSError:
                width = 80
            text = text[: max(10, width - 1)]
            os.write(self._fd, ("\r" + text.ljust(self._shown)).encode())
            self._shown = max(self._shown, len(text))
            return True

    def close(self) -> None:
        with self._lock:
            self._erase()
            if isinstance(self._tw._file, _ClearingFile):
                self._tw._file = self._file
            os.close(self._fd)


class _ClearingFile:
    """Stands in for the terminal reporter's file: every write erases the live line first."""

    def __init__(self, real: Any, line: LiveLine):
        self._real = real
        self._line = line

    def write(self, text: str) -> int:
        self._line.pytest_wrote(text)
        return len(text)

    def flush(self) -> None:
        self._real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


# --------------------------------------------------------------------------- pytest hooks
def progress_unwanted(config: pytest.Config) -> str | None:
    """Why the line must not be drawn in this session (None: it may)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if config.getoption("--no-progress", False):
        return "--no-progress"
    if config.get_verbosity() != 0:
        return "verbosity"
    if config.getoption("capture", None) == "no":
        return "-s"
    if reporter is None or not hasattr(getattr(reporter, "_tw", None), "_file"):
        return "no terminal reporter"
    if not reporter.isatty() or os.environ.get("TERM") == "dumb":
        return "not a terminal"
    return None


class RunSelection(Protocol):
    """What the controller knows of the run's selection (session/state.py's run state): read
    when the workers have collected, so it is filled in by then."""

    cases: dict[str, list[Case]]
    targeted: list[str]


class ProgressHooks:
    """Controller side (or the only process, without xdist)."""

    def __init__(self, config: pytest.Config, selection: RunSelection | None = None):
        self.config = config
        self.selection = selection
        self.counts = ProgressCounts()
        self.xdist = bool(getattr(config.option, "numprocesses", None))
        self.start_reading = REQUEST_METER.reading()
        self.worker_readings: dict[str, MeterReading] = {}
        self.line: LiveLine | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._saved: dict[str, Any] = {}

    # -- inputs
    def add_result(self, result: CaseResult) -> None:
        self.counts.add(result)

    def meter(self) -> MeterReading:
        if not self.xdist:
            return REQUEST_METER.reading().since(self.start_reading)
        readings = list(self.worker_readings.values())
        return MeterReading(*(sum(r[i] for r in readings) for i in range(4)))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self.xdist:
            self.counts.total = sum(
                isinstance(case_of(i), Case)
                for i in session.items
            )

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.counts.total is not None or self.selection is None:
            return
        suffixes = {f"[{c.id}]" for cases in self.selection.cases.values() for c in cases}
        total = sum(
            any(nodeid[i:] in suffixes for i, ch in enumerate(nodeid) if ch == "[") for nodeid in ids
        )
        self.counts.total = total or None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        kept = []
        for name, value in report.user_properties:
            if name == METER_PROPERTY:
                node = getattr(getattr(report, "node", None), "gateway", None)
                self.worker_readings[getattr(node, "id", "local")] = MeterReading(*json.loads(str(value)))
            else:
                kept.append((name, value))
        report.user_properties = kept

    # -- the line
    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config):
        result = yield
        if self.line is not None and result and len(result) == 3 and result[1]:
            category, _letter, word = result
            return category, "", word  # the line replaces the dots
        return result

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session):
        if self._toolbench_run() and progress_unwanted(self.config) is None:
            self._start()
        try:
            return (yield)
        finally:
            self._finish()

    def _toolbench_run(self) -> bool:
        if self.xdist:
            return self.selection is not None and bool(self.selection.targeted)
        return bool(self.counts.total)

    def _start(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        self.counts.started = time.monotonic()
        try:
            self.line = LiveLine(reporter._tw)
        except (OSError, AttributeError, ValueError):  # no real file descriptor: no line
            return
        self._saved = {"showfspath": getattr(reporter, "_showfspath", None),
                       "_show_progress_info": getattr(reporter, "_show_progress_info", None)}
        reporter.showfspath = False
        if hasattr(reporter, "_show_progress_info"):
            reporter._show_progress_info = False
        self._thread = threading.Thread(target=self._tick, name="toolbench-progress", daemon=True)
        self._thread.start()

    def _tick(self) -> None:
        last = ""
        while not self._stop.wait(REFRESH_S):
            text = render_line(self.counts, self.meter(), time.monotonic())
            if text != last and self.line is not None and self.line.draw(text):
                last = text

    def _finish(self) -> None:
        if self.line is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        line, self.line = self.line, None
        line.draw(render_line(self.counts, self.meter(), time.monotonic()))  # the final counts
        line.close()
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        reporter.showfspath = self._saved["showfspath"]
        if self._saved["_show_progress_info"] is not None:
            reporter._show_progress_info = self._saved["_show_progress_info"]


class WorkerMeter:
    """xdist worker side: a test report carries this worker's meter to the controller when it
    moved since the last one sent (the controller keeps each worker's last reading, so a repeat
    told it nothing; most tests' setup, call and teardown reports share one reading)."""

    def __init__(self) -> None:
        self.start_reading = REQUEST_METER.reading()
        self.sent: MeterReading | None = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any):
        report = yield
        reading = REQUEST_METER.reading().since(self.start_reading)
        if reading != self.sent:
            self.sent = reading
            report.user_properties.append((METER_PROPERTY, json.dumps(list(reading))))
        return report


def install(config: pytest.Config, worker: bool, selection: RunSelection | None = None) -> None:
    """Register the progress hooks of this process (at configure); ``selection``: the run's
    selection as the controller loads it (the line's total under xdist)."""
    if worker:
        config.pluginmanager.register(WorkerMeter(), PLUGIN_NAME)
    else:
        config.pluginmanager.register(ProgressHooks(config, selection), PLUGIN_NAME)


def add_result(config: pytest.Config, result: CaseResult) -> None:
    """Count one case result that reached the controller."""
    hooks = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if isinstance(hooks, ProgressHooks):
        hooks.add_result(result)
