"""``toolbench finish RUN``: write the report of a run killed before its end (session/killed_run.py).

Registered by the ``toolbench`` dispatcher (cli.py). Lives beside the session's end because it
scores with the same code (session/finish.py), which the ``runs`` commands below it may not use.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_toolbench.counting import counted
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.runs.store import RUNS_DIR_HELP, find_runs_dir

if TYPE_CHECKING:
    from pytest_toolbench.session.killed_run import FinishedRun

#: Exit status of a run that cannot be finished (the message says why), as other commands' 2.
REFUSED = 2
#: The run was finished (its folder has its report) but a report asked for beside it was not
#: written: the plugin's status for an output that could not be written.
OUTPUT_FAILED = int(ToolbenchExit.OUTPUT_ERROR)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    finish = subparsers.add_parser(
        "finish", help="write the report of a run killed before its end (SIGKILL, OOM, a lost "
                       "CI runner)",
        description="Score a run that was killed before its end from the results it journalled, "
                    "as its own end would have: merge the xdist workers' journals into the run's, "
                    "compute the metrics and write its report.json and run.json, marked partial "
                    "(interrupted: killed), so `toolbench compare`, `view` and --baseline read "
                    "it, naming the selected cases left without a result. Refused for a "
                    "run that has its report, one still running, and one started on another "
                    "host (--force).")
    finish.add_argument("run", metavar="RUN", help="the run id as `toolbench runs` prints it (or "
                                                   "a unique prefix of one), or its folder")
    finish.add_argument("--runs-dir", type=Path, default=None,
                        help=RUNS_DIR_HELP)
    finish.add_argument("--force", action="store_true",
                        help="finish a run started on another host (sharing this runs folder) "
                             "that is known to be gone")
    finish.add_argument("--toolbench-json", type=Path, default=None, metavar="PATH",
                        help="also write the JSON report there, cases inline, as the run's own "
                             "--toolbench-json would have been (a CI step's artifact)")
    finish.add_argument("--toolbench-md", type=Path, default=None, metavar="PATH",
                        help="also write the Markdown summary there (appended when PATH is "
                             "$GITHUB_STEP_SUMMARY), as the run's own --toolbench-md")
    finish.add_argument("--junitxml", type=Path, default=None, metavar="PATH",
                        help="also write a JUnit XML there, as the run's own --junitxml would "
                             "have been: a testcase per case that finished, one with an error "
                             "per selected case left without a result, one per gate")
    finish.add_argument("--alluredir", type=Path, default=None, metavar="DIR",
                        help="also write the run-level Allure files there, as the run's own end "
                             "would have (the metrics, each gate as a check, the environment), "
                             "and a \"not run\" result for each selected case left without a "
                             "result, as an interrupted run's end writes them, and the full "
                             "result, from its journalled one, of each finished case the kill "
                             "left without its own (matched by history id). Not "
                             "implied by the run's own --alluredir (a note names it)")
    finish.set_defaults(func=cmd_finish)


def cmd_finish(args: argparse.Namespace) -> int:
    from pytest_toolbench.compare.run_refs import resolve_run_dir
    from pytest_toolbench.output_paths import check_output_paths, problems_of
    from pytest_toolbench.runs.listing import render_runs
    from pytest_toolbench.results.safe_text import safe_text
    from pytest_toolbench.session.killed_run import finish_killed_run
    from pytest_toolbench.text_table import output_width

    try:
        # Paths the run's folder is not: checked before it is touched (its journals merged).
        check_output_paths([("--toolbench-json", args.toolbench_json),
                            ("--toolbench-md", args.toolbench_md), ("--junitxml", args.junitxml)],
                           [("--alluredir", args.alluredir)])
        # "." in the run's folder names it too: made absolute, so every line names the run
        folder = Path(os.path.abspath(args.run))
        if "/" not in args.run and not (folder / "run.json").is_file():  # a run id, not its folder
            folder = resolve_run_dir(args.run, find_runs_dir(args.runs_dir))
        _check_not_the_runs_own(folder, args)
        done = finish_killed_run(folder, force=args.force)
    except ValueError as exc:  # KilledRunError, RunLoadError, the output paths
        for problem in problems_of(exc):
            print(f"toolbench finish: {safe_text(problem)}", file=sys.stderr)
        return REFUSED
    for note in done.notes:
        print(f"note: {safe_text(note)}")
    print(f"run {done.index.run_id}: {len(done.record.cases)} results scored from its journal; "
          f"report written: {done.index.report}")
    failed = not write_outputs(done, args.toolbench_json, args.toolbench_md, args.junitxml,
                               args.alluredir)
    recorded = run_alluredir(done)
    if args.alluredir is None and recorded is not None and done.record.run.missing_cases:
        print(f"note: the run wrote Allure results to {safe_text(recorded)}: --alluredir "
              f"{safe_text(recorded)} adds a \"not run\" result there for each case it left")
    sys.stdout.write(render_runs([done.index], output_width()))
    return OUTPUT_FAILED if failed else 0


def run_alluredir(done: FinishedRun) -> str | None:
    """The Allure results folder the killed run wrote to, or None. Not written to unless asked:
    finish may run in another folder, or a CI step may have moved the results already. Recorded
    at its start, absolute; a run folder of an older version has only the command line's
    ``--alluredir`` (relative to the folder the run was started in, and not an ini file's)."""
    start = done.start
    if start is not None and start.alluredir is not None:
        return start.alluredir
    args = start.pytest_args if start is not None else []
    found = None
    for i, arg in enumerate(args):
        if arg == "--alluredir" and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith("--alluredir="):
            found = arg.split("=", 1)[1]
    return found


def _check_not_the_runs_own(folder: Path, args: argparse.Namespace) -> None:
    """ValueError when an output would overwrite a file the run's folder holds (its report,
    index or journal) or be the folder itself: finish writes them, and a report written over
    the journal would lose the run's results."""
    from pytest_toolbench.output_paths import OutputPathsError
    from pytest_toolbench.results.case_store import journal_path
    from pytest_toolbench.results.journal import packed_path
    from pytest_toolbench.runs.record import INDEX_NAME, REPORT_NAME

    journal = journal_path(folder)
    own = {p.resolve() for p in (folder / INDEX_NAME, folder / REPORT_NAME, journal,
                                 packed_path(journal))}
    problems = []
    for option, path in (("--toolbench-json", args.toolbench_json), ("--toolbench-md", args.toolbench_md),
                         ("--junitxml", args.junitxml), ("--alluredir", args.alluredir)):
        if path is None:
            continue
        resolved = Path(path).expanduser().resolve()
        if resolved == folder.resolve():
            problems.append(f"{option} {path}: the run's own folder; give a path outside it")
        elif resolved in own:
            problems.append(f"{option} {path}: a file of the run's folder, which finish writes "
                            "(or reads); give a path outside it")
    if problems:
        raise OutputPathsError(*problems)


def write_outputs(done: FinishedRun, json_path: Path | None, md_path: Path | None,
                  junit_path: Path | None, alluredir: Path | None) -> bool:
    """The reports the run's end would have written beside its folder's; each failure is one
    line on stderr (the run's folder has its report either way). Returns whether all were."""
    from pytest_toolbench.report.markdown_report import write_markdown_report
    from pytest_toolbench.results.safe_text import safe_text

    record = done.record
    written = True
    for what, path, write in (
            ("JSON report", json_path, lambda p: record.write(p)),
            ("Markdown summary", md_path, lambda p: write_markdown_report(p, record, notes=done.report_notes)),
            ("JUnit XML", junit_path, lambda p: _write_junit(p, done)),
            ("Allure files", alluredir, lambda p: _write_allure(p, done))):
        if path is None:
            continue
        try:
            write(path)
        except (OSError, _NoNodeIds) as exc:
            print(f"toolbench finish: {what} {path}: not written ({safe_text(str(exc))})",
                  file=sys.stderr)
            written = False
        else:
            print(f"{what} written: {path}")
    return written


class _NoNodeIds(Exception):
    """The run kept no node ids, so no testcase could be named as its own file would name it."""


def _write_junit(path: Path, done: FinishedRun) -> None:
    from pytest_toolbench.report.junit_finish import write_killed_run_junit
    from pytest_toolbench.results.partial_run import not_run_message
    from pytest_toolbench.session.killed_run import KILLED

    if done.nodes is None:
        raise _NoNodeIds("the run kept no pytest node ids (it was killed before it had collected, "
                         "or started by an older pytest-toolbench)")
    write_killed_run_junit(path, done.record, done.nodes, not_run_message=not_run_message(KILLED))


def _write_allure(alluredir: Path, done: FinishedRun) -> None:
    from pytest_toolbench.report.allure_and_plots import write_run_allure
    from pytest_toolbench.report.terminal import render_run
    from pytest_toolbench.session.end_summary import run_headlines

    record = done.record
    _, summary = render_run(record, notes=done.report_notes, data_sources=done.data_sources,
                            verbose=False, width=120, headlines=run_headlines(record))
    write_run_allure(alluredir, record, summary, data_sources=done.data_sources,
                     backend=str(record.run.settings.backend or ""))
    _write_allure_not_run(alluredir, done)


def _write_allure_not_run(alluredir: Path, done: FinishedRun) -> None:
    """A "not run" Allure result for each selected case the killed run never finished, as an
    interrupted run's own end writes them (session/controller.py ``_write_allure_not_run``, the
    same writer): the folder then counts the whole selection, as the JUnit XML does."""
    from pytest_toolbench.report.allure_report import write_not_run
    from pytest_toolbench.results.partial_run import not_run_message
    from pytest_toolbench.results.safe_text import safe_text
    from pytest_toolbench.session.killed_run import KILLED, never_finished

    nodes, notes = never_finished(done)
    for note in notes:
        print(f"note: {safe_text(note)}")
    write_not_run(nodes, str(done.record.run.settings.model or ""), not_run_message(KILLED),
                  alluredir=alluredir, run_id=done.record.run.run_id)
    _write_allure_finished(alluredir, done)


def _write_allure_finished(alluredir: Path, done: FinishedRun) -> None:
    """The full Allure result of each case the killed run finished (journalled) whose own
    result file the kill prevented: allure-pytest writes it at the test's end, after the case's
    journal line, and a SIGKILL in between left the case counted as run in the report but absent
    from Allure. Only the folder's results labelled with the run's id count as its own (another
    run's result of the same case in a shared folder does not hide the gap); a result with no
    run label, an older version's, counts if it started since the run's start. A case its data
    no longer holds is left out (a note says so): its node-named result could not be matched
    to one already there."""
    from pytest_toolbench.report.allure_report import write_finished
    from pytest_toolbench.results.safe_text import safe_text
    from pytest_toolbench.session.killed_run import cases_again

    results = {r.case_id: r for r in done.record.cases}
    nodes, notes = cases_again(done, set(results), "finished")
    for note in notes:
        print(f"note: {safe_text(note)}")
    started = done.record.run.started
    written = write_finished([(nodeid, case, results[case.id]) for nodeid, case in nodes
                              if case is not None],
                             str(done.record.run.settings.model or ""), alluredir=alluredir,
                             run_id=done.record.run.run_id,
                             since_ms=None if started is None else int(started * 1000))
    if written:
        print("Allure results written from the journal: "
              f"{counted(written, 'finished case')} the kill had left without one")
