"""The live progress line (report/progress.py): its fields on hand-built results, and real pytest
runs of the ToolHop suite under a pseudo-terminal (python's ``pty``), with and without xdist,
against a real local OpenAI-compatible HTTP server whose token counts are known."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, delayed, reply
from pytest_toolbench.models.meter import MeterReading, RequestMeter
from pytest_toolbench.report.progress import ProgressCounts, render_line
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"toolbench (\d+)/(\d+) cases \| [^\r\n]*")
SUITE = ["suites/toolhop", "-p", "no:randomly", "-p", "no:cacheprovider", "--limit", "3"]
pytest_plugins = ["pytester"]  # one test runs a session in this process


def result(case_id: str, scenario: str, outcome: Outcome, values: dict[str, float]) -> CaseResult:
    error = InfraError(kind="timeout", message="x") if outcome is Outcome.ERROR else None
    return CaseResult(case_id=case_id, benchmark="toolhop", scenario=scenario, outcome=outcome,
                      values=values, error=error)


def test_line_fields_on_known_results():
    counts = ProgressCounts(total=8, started=100.0)
    # "free" comes after "mandatory" in ToolHop's order: the headline stays on mandatory.
    counts.add(result("a-free", "free", Outcome.PASSED, {"answer_correct": 1.0}))
    counts.add(result("a-mand", "mandatory", Outcome.PASSED, {"answer_correct": 1.0}))
    counts.add(result("b-mand", "mandatory", Outcome.FAILED, {"answer_correct": 0.0}))
    counts.add(result("c-mand", "mandatory", Outcome.FAILED, {"answer_correct": 0.0}))
    counts.add(result("d-mand", "mandatory", Outcome.ERROR, {}))
    counts.add(result("d-mand", "mandatory", Outcome.ERROR, {}))  # a result arrives once
    meter = MeterReading(in_flight=3, requests=9, prompt_tokens=1200, completion_tokens=34)
    line = render_line(counts, meter, now=150.0)
    # 5 done in 50 s -> 10 s a case, 3 left -> 30 s.
    assert line == ("toolbench 5/8 cases | 1 error | toolhop/mandatory accuracy 33.3% (n=3) | "
                    "3 in flight | 1.2k tokens | 0:50 | ~0:30 left")
    empty = render_line(ProgressCounts(total=None, started=0.0), MeterReading(), now=3725.0)
    assert empty == "toolbench 0 cases | 0 errors | 0 in flight | 0 tokens | 1:02:05 | ~?:?? left"


def test_the_line_shows_the_metric_the_end_screen_leads_with():
    """An L3-only ToolBeHonest run has no ``l1_em`` (its first declared metric): the line shows
    the scenario's Overall, as the end screen and ``toolbench runs`` do, not nothing."""
    counts = ProgressCounts(total=4, started=100.0)
    for i, value in enumerate((0.5, 1.0)):
        counts.add(CaseResult(case_id=f"t-{i}-L3", benchmark="toolbehonest", scenario="MNT",
                              outcome=Outcome.PASSED, labels={"level": 3},
                              values={"l3_pr": value, "l3_ms": 0.0, "overall_sum": value,
                                      "overall_n": 2.0}))
    assert counts.headline() == ("toolbehonest/MNT overall", 0.375, 2)


def test_meter_counts_requests_in_flight_and_usage():
    meter = RequestMeter()
    start = meter.reading()
    with meter.request():
        assert meter.reading().in_flight == 1

        class Usage:
            prompt_tokens, completion_tokens = 10, 5

        meter.add_usage(Usage())
    meter.add_usage(None)  # a reply without usage adds nothing
    assert meter.reading().since(start) == MeterReading(0, 1, 10, 5)
    # Blocks nest and overlap (concurrent requests share the meter); one that raises still ends.
    with meter.request(), meter.request():
        assert meter.reading().in_flight == 2
    with pytest.raises(RuntimeError), meter.request():
        raise RuntimeError("request failed")
    assert meter.reading().since(start) == MeterReading(0, 4, 10, 5)


def test_work_waiting_for_the_first_request_starts_once_when_it_leaves():
    meter = RequestMeter()
    started: list[str] = []
    meter.when_waiting(lambda: started.append("a"))
    meter.when_waiting(lambda: started.append("b"))
    assert started == []  # no request yet: the process has not waited
    with meter.request():
        assert started == ["a", "b"]
    with meter.request():
        pass
    assert started == ["a", "b"]  # once, not per request
    meter.when_waiting(lambda: started.append("c"))  # registered after a request: at once
    assert started == ["a", "b", "c"]


def test_work_still_waiting_when_a_run_ends_is_forgotten():
    """A run that never sent a request (answered from the cache) leaves nothing for a later
    session in the same process to start; what already started, or another's, is kept."""
    meter = RequestMeter()
    started: list[str] = []

    def mine() -> None:
        started.append("mine")

    meter.when_waiting(mine)
    meter.when_waiting(lambda: started.append("other"))
    meter.forget(mine)
    with meter.request():
        pass
    assert started == ["other"]
    meter.forget(mine)  # after the first request: nothing left to drop, no error
    assert started == ["other"]


def test_an_ended_run_that_sent_no_request_leaves_no_start_behind(pytester: pytest.Pytester):
    """In one process: a session answered without a request (the oracle) ends with the meter's
    list of starts empty, so the next session's first request does not start its imports."""
    from pytest_toolbench.models.meter import REQUEST_METER

    pytester.makeini("[pytest]\n")
    result = pytester.inline_run(str(REPO / "suites" / "toolhop"), "--data", "sample", "--model",
                                 "oracle", "--limit", "1", "-p", "no:cacheprovider", "--runs-dir",
                                 str(pytester.path / "runs"), "--cache-dir", str(pytester.path / "cache"))
    assert result.ret == 0
    assert REQUEST_METER._on_first_request == []


THREAD_PROBE = """
import atexit, sys, threading
atexit.register(lambda: open({path!r} + ".modules", "w").write(" ".join(sys.modules)))
_start = threading.Thread.start
def start(self):
    with open({path!r}, "a") as f:
        f.write(self.name + "\\n")
    return _start(self)
threading.Thread.start = start
"""


@pytest.mark.parametrize(("model", "warmed"), [("oracle", False), ("m", True)])
def test_finish_imports_warm_only_once_the_run_waits_on_a_model(
        tmp_path: Path, model: str, warmed: bool):
    """-n 0: the thread importing what the end of the run needs starts with the first request
    (a run answered locally, as a fully cached re-run is, never waits: there it would only take
    the GIL from the cases)."""
    probe = tmp_path / "thread_probe.py"
    names = tmp_path / "threads.txt"
    probe.write_text(THREAD_PROBE.format(path=str(names)))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    with FakeOpenAIServer(reply(content="<answer>x</answer>")) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", *SUITE, "-n", "0", "-p", "thread_probe", "--no-cache",
             "--model", model, "--base-url", server.base_url, "--api-key", "t",
             "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs")],
            cwd=REPO, capture_output=True, text=True, timeout=300, env=env,
        )
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "9 " in proc.stdout.splitlines()[-1]  # nine cases ran
    started = names.read_text().split() if names.exists() else []
    assert ("toolbench-warm-imports" in started) is warmed, started
    # Nothing warmed that the run never uses: rich stayed on the list after the summary moved
    # to text_table.py, 50 ms of CPU beside the cases of every run.
    modules = set(Path(f"{names}.modules").read_text().split())
    assert "numpy" in modules and "rich" not in modules


def test_a_worker_sends_its_meter_only_when_it_moved():
    """The controller keeps each worker's last reading, so an unchanged one is not sent again
    (a JSON dump per report, three reports per test, for nothing)."""
    from types import SimpleNamespace

    from pytest_toolbench.models.meter import REQUEST_METER
    from pytest_toolbench.report.progress import METER_PROPERTY, WorkerMeter

    meter = WorkerMeter()

    def sent() -> list[str]:
        report = SimpleNamespace(user_properties=[])
        wrapper = meter.pytest_runtest_makereport(item=None, call=None)
        next(wrapper)
        with pytest.raises(StopIteration):
            wrapper.send(report)
        return [value for name, value in report.user_properties if name == METER_PROPERTY]

    assert sent() == ["[0, 0, 0, 0]"]  # the first report always carries one
    assert sent() == []
    with REQUEST_METER.request():
        assert sent() == ["[1, 1, 0, 0]"]
        assert sent() == []
    assert sent() == ["[0, 1, 0, 0]"]


def run_in_pty(args: list[str], *, cols: int = 220, timeout: float = 300) -> tuple[int, str]:
    """Run ``pytest ARGS`` with stdout and stderr on a pseudo-terminal; return (status, output)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["TERM"] = "xterm"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=REPO, stdin=slave,
                            stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return proc.wait(timeout=timeout), b"".join(chunks).decode("utf-8", "replace")


def drawn_lines(output: str) -> list[str]:
    return [m.group(0).rstrip() for m in LINE.finditer(output)]


@pytest.mark.parametrize("workers", ["0", "2"])
def test_line_on_a_terminal_with_counts_tokens_and_in_flight(tmp_path: Path, workers: str):
    # Every reply is a wrong answer without tool calls: one request of 10 + 5 tokens per case.
    with FakeOpenAIServer(delayed(0.5, reply(content="<answer>x</answer>"))) as server:
        status, out = run_in_pty([
            *SUITE, "-n", workers, "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"), "--no-cache",
            "--base-url", server.base_url, "--api-key", "t", "--model", "m", "--concurrency", "2",
        ])
        requests = len(server.requests)
    assert status == 1, out[-3000:]  # wrong answers fail their tests
    assert requests == 9
    lines = drawn_lines(out)
    assert lines, out[-3000:]
    final = lines[-1]
    assert final.startswith("toolbench 9/9 cases | 0 errors | toolhop/direct accuracy 0.0% (n=3) "
                            f"| 0 in flight | {15 * requests} tokens | "), final
    assert re.search(r"\| \d+:\d\d \| ~0:00 left$", final), final
    # Requests were seen in flight while cases ran, and counts only ever grew.
    assert any(re.search(r"\| [12] in flight \|", line) for line in lines), lines
    done = [int(LINE.match(line).group(1)) for line in lines]
    assert done == sorted(done)
    # The line is erased before pytest's summary, and replaced the dots (no "[100%]" fill).
    tail = out[out.rindex(final) + len(final):]
    assert re.match(r"\s*\r +\r", tail), repr(tail[:200])
    assert "[100%]" not in out
    assert "9 failed" in out.splitlines()[-1]


def test_a_terminal_that_reports_no_width_gets_the_whole_line(tmp_path: Path):
    # A pseudo-terminal whose size was never set reads 0 columns (a container started with -t
    # before its size is known, some CI runners): taken as a width, it cut the line to
    # "toolbench " (10 characters), drawn again and again.
    with FakeOpenAIServer(delayed(0.3, reply(content="<answer>x</answer>"))) as server:
        status, out = run_in_pty([
            *SUITE, "-n", "0", "--runs-dir", str(tmp_path / "runs"), "--no-cache",
            "--base-url", server.base_url, "--api-key", "t", "--model", "m", "--concurrency", "2",
        ], cols=0)
    assert status == 1, out[-3000:]
    lines = drawn_lines(out)
    assert lines and lines[-1].startswith("toolbench 9/9 cases | 0 errors | "), lines[-3:]


@pytest.mark.parametrize("flags", [["-q"], ["-qq"], ["--no-progress"], ["-v"]])
def test_no_line_when_quiet_verbose_or_switched_off(tmp_path: Path, flags: list[str]):
    status, out = run_in_pty([*SUITE, "-n", "0", "--model", "oracle",
                              "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"), *flags])
    assert status == 0, out[-3000:]
    assert drawn_lines(out) == []
    assert "| direct " in out  # the run happened (its row in the end-of-run overview)


def test_no_line_when_output_is_piped(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *SUITE, "-n", "0", "--model", "oracle",
         "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert drawn_lines(proc.stdout + proc.stderr) == []
    assert "9 passed" in proc.stdout and "[100%]" in proc.stdout  # pytest's own dots as usual
