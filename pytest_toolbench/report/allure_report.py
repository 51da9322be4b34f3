"""Allure results for a tool-use run: labels per case, transcripts and tool calls as attachments.

Mapping (allure-pytest's dynamic labels): epic = benchmark, feature = scenario, story = "hops=N" (or
the benchmark's first breakdown label: "subtask=...", an installed one's), tag = model, one
label per case label (hops, domain, ...); the suite path is model / benchmark / scenario and the
title starts with ``[model]``, so several runs in one results folder stay apart. The model is part of the test identity: a non-excluded
``model`` parameter (in ``historyId`` and Allure 3's retry key) and, through
:class:`ModelIdentity`, in ``testCaseId``; two models in one results folder are two results, not
retries of one. A label ``toolbench_outcome`` (wrong answer / parse failure / infrastructure
error) feeds the categories (report/allure_run.py). The case page shows the conversation as steps
(report/allure_steps.py), gold vs prediction and the per-metric values. Every call is a no-op
when allure-pytest is not active (no ``--alluredir``), so the plugin can call these
unconditionally.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from pathlib import Path
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import allure
import allure_commons
import allure_commons.model2
import attr
from allure_commons.types import AttachmentType

from allure_commons.utils import md5, represent

from pytest_toolbench.report.allure_steps import (
    PlannedStep,
    conversation_plan,
    emit_steps,
    readable,
    step_results,
)
from pytest_toolbench.results.aggregate import RunMetrics
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.infra_errors import not_scored_text
from pytest_toolbench.results.safe_text import safe_json, safe_text

if TYPE_CHECKING:
    from pytest_toolbench.benchmarks.base import Case

#: Keys looked up in CaseResult.details for the description, first hit wins. The benchmark
#: record's own "answer" is ToolHop's *gold*, so plain "answer" is deliberately not a prediction.
QUESTION_KEYS = ("question", "query")
GOLD_KEYS = ("gold", "gold_answer", "expected", "gold_calls", "golden_calls", "golden_links",
             "gold_tools")
PREDICTION_KEYS = ("prediction", "model_answer", "final_answer", "predicted", "predicted_calls")
#: Label that carries the case's outcome class for Allure categories.
OUTCOME_LABEL = "toolbench_outcome"
#: Label that names the run (its run folder's id) a result was written by: results of several
#: runs share a results folder, and ``toolbench finish --alluredir`` tells a killed run's own
#: results from another run's of the same case by it (:func:`history_ids_in`).
RUN_LABEL = "toolbench_run"
WRONG, PARSE, INFRA, PASSED = "wrong answer", "parse failure", "infrastructure error", "passed"


def outcome_class(result: CaseResult) -> str:
    """passed / wrong answer / parse failure (a wrong answer with a tool-call parse failure) /
    infrastructure error: the outcome and error kinds the plugin records, nothing re-judged."""
    if result.outcome is Outcome.ERROR:
        return INFRA
    if result.outcome is Outcome.PASSED:
        return PASSED
    return PARSE if result.parse_failures else WRONG


def _dumps(obj: Any) -> str:
    """A JSON attachment: non-ASCII text kept readable, control and bidi characters as ``\\u``
    escapes (the JSON still decodes to the same data)."""
    return safe_json(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def _text(text: str) -> str:
    """A text attachment (a tool's result, the model's answer): control and bidi characters
    escaped, newlines kept."""
    return safe_text(text, multiline=True)


def _first(details: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        if details.get(k) not in (None, ""):
            return details[k]
    return None


def _parse_args(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments  # keep the raw string: invalid (or absurdly nested) JSON is a finding
    return arguments


def tool_calls_from_transcript(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pair each OpenAI-format assistant tool call with the tool message answering it."""
    results: dict[str, Any] = {}
    for msg in transcript:
        if msg.get("role") == "tool" and msg.get("tool_call_id") is not None:
            results[str(msg["tool_call_id"])] = msg.get("content")
    calls: list[dict[str, Any]] = []
    turn = 0
    for msg in transcript:
        if msg.get("role") != "assistant":
            continue
        turn += 1
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") or {}
            call_id = call.get("id")
            calls.append(
                {
                    "turn": turn,
                    "id": call_id,
                    "name": fn.get("name"),
                    "arguments": _parse_args(fn.get("arguments")),
                    "result": results.get(str(call_id)) if call_id is not None else None,
                }
            )
    return calls


def _description(result: CaseResult) -> str:
    d = result.details
    lines = [f"**Case** `{result.case_id}` - outcome **{result.outcome.value}**", ""]
    for title, value in (
        ("Question", _first(d, QUESTION_KEYS)),
        ("Gold answer", _first(d, GOLD_KEYS)),
        ("Model answer", _first(d, PREDICTION_KEYS)),
    ):
        if value is not None:
            lines += [f"**{title}:** {value}", ""]
    if result.failure_message:
        lines += [f"**Failure:** {result.failure_message}", ""]
    if result.error is not None:
        lines += [f"**Infrastructure error** ({result.error.kind}): {result.error.message}", ""]
    if result.parse_failures:
        lines += [f"**Tool-call parse failures:** {len(result.parse_failures)}", ""]
    rows = metric_rows(result)
    if rows:
        lines += ["| metric | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]
    lines.append(
        f"model calls: {result.model_calls} ({result.cached_calls} cached), "
        f"tokens: {result.usage.prompt_tokens} prompt / {result.usage.completion_tokens} completion, "
        f"latency: {result.latency_s:.2f} s"
    )
    return "\n".join(lines)


def case_parameters(case_id: str, benchmark: str, scenario: str,
                    labels: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(name, value, excluded) of a case's readable parameters: the case id instead of the
    ``Case`` object's repr, plus its benchmark, scenario and labels (excluded: constant per case,
    so history is unaffected)."""
    return [("case", case_id, False), ("benchmark", benchmark, True), ("scenario", scenario, True),
            *((name, str(value), True) for name, value in sorted(labels.items()))]


def _parameters(result: CaseResult) -> None:
    for name, value, excluded in case_parameters(result.case_id, result.benchmark,
                                                 result.scenario, result.labels):
        allure.dynamic.parameter(name, value, excluded=excluded)


def metric_rows(result: CaseResult) -> list[tuple[str, str]]:
    return [(k, f"{v:g}") for k, v in sorted(result.values.items())]


def case_steps(result: CaseResult) -> list[PlannedStep]:
    """A case's steps: its conversation, one step per turn (report/allure_steps.py), then its
    scoring (gold, prediction, the metric values, the failure)."""
    d = result.details
    gold, prediction = _first(d, GOLD_KEYS), _first(d, PREDICTION_KEYS)
    scoring: list[tuple[str, str, Any]] = []
    if gold is not None:
        scoring.append((_text(readable(gold)), "gold", AttachmentType.TEXT))
    if prediction is not None:
        scoring.append((_text(readable(prediction)), "prediction", AttachmentType.TEXT))
    rows = metric_rows(result)
    if rows:
        scoring.append(("\n".join(f"{k}: {v}" for k, v in rows), "metric values", AttachmentType.TEXT))
    if result.failure_message:
        scoring.append((_text(result.failure_message), "failure", AttachmentType.TEXT))
    conversation = conversation_plan(result.transcript) if result.transcript else []
    return [*conversation, PlannedStep(f"score: {outcome_class(result)}", tuple(scoring))]


#: Fields of Allure's result models that hold a block of text (newlines kept when escaped).
_BLOCK_FIELDS = frozenset({"description", "descriptionHtml", "message", "trace"})


def escape_fields(item: Any) -> None:
    """Escape control and bidi characters, in place, in every text of an Allure result or
    container about to be written (its name, description, status message, parameters, labels
    and nested steps): the title quotes the question, steps quote tool calls and replies, and the
    status message the failure; the viewer would show them raw."""
    if not attr.has(type(item)):
        return
    for field in attr.fields(type(item)):
        value = getattr(item, field.name)
        if isinstance(value, str):
            setattr(item, field.name, safe_text(value, multiline=field.name in _BLOCK_FIELDS))
        elif isinstance(value, list):
            for i, child in enumerate(value):
                if isinstance(child, str):  # e.g. titlePath
                    value[i] = safe_text(child)
                else:
                    escape_fields(child)
        else:
            escape_fields(value)


#: Each reported case's own run in ms (start, stop), by its ``case`` parameter as Allure holds it,
#: until its result is written. allure-pytest times a test by its call alone, the assertion,
#: while the case ran ahead of it: every case read a millisecond or so (session/case_timing.py).
_CASE_SPANS: dict[str, tuple[int, int]] = {}


def _span_ms(result: CaseResult) -> tuple[int, int] | None:
    """The case's own run in ms (start, stop), as its Allure result is timed; None untimed."""
    if result.started_at is None or result.wall_s is None:
        return None
    start = round(result.started_at * 1000)
    return start, start + round(result.wall_s * 1000)


def _keep_case_span(result: CaseResult) -> None:
    span = _span_ms(result)
    if span is not None:
        _CASE_SPANS[represent(result.case_id)] = span


def _case_span(result: Any) -> tuple[int, int] | None:
    """The span :func:`_keep_case_span` kept for this Allure result's case, taken once."""
    case = next((p.value for p in getattr(result, "parameters", None) or [] if p.name == "case"),
                None)
    return None if case is None else _CASE_SPANS.pop(case, None)


class ModelIdentity:
    """allure-commons hook, just before a result is written: put the model into ``testCaseId``
    (allure-pytest derives it from the node id alone), time the test by its case's own run
    (start and stop), name parse failures in the status message, label the result with its run
    (:data:`RUN_LABEL`, where ``run_id`` is set: a process of a run that has a run folder) and
    escape every text (:func:`escape_fields`). Registered by :func:`register_allure_hooks` in
    every process that writes results."""

    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id

    @allure_commons.hookimpl(tryfirst=True)
    def report_result(self, result: Any) -> None:
        if _cut_short(result):
            return
        if self.run_id and isinstance(result, allure_commons.model2.TestResult) and not any(
                label.name == RUN_LABEL for label in result.labels):
            result.labels.append(allure_commons.model2.Label(name=RUN_LABEL, value=self.run_id))
        span = _case_span(result)
        if span is not None:
            result.start, result.stop = span
        labels = {lab.name: lab.value for lab in getattr(result, "labels", []) or []}
        model = labels.get("model")
        if model and result.testCaseId:
            result.testCaseId = md5(result.testCaseId, model)
        details = getattr(result, "statusDetails", None)
        if labels.get(OUTCOME_LABEL) == PARSE and details is not None and details.message:
            if not details.message.startswith("tool-call parse failure"):
                details.message = f"tool-call parse failure: {details.message}"
        escape_fields(result)

    @allure_commons.hookimpl(tryfirst=True)
    def report_container(self, container: Any) -> None:
        escape_fields(container)  # fixtures' set-up and tear-down: names, failure messages


#: The file name a cut-short result is written under (:func:`_cut_short`), then removed.
_CUT_SHORT = "{prefix}-toolbench-cut-short"


def _cut_short(result: Any) -> bool:
    """A test result allure-pytest closes for a test a signal stopped (this process's, or an
    xdist worker's) before :func:`attach_case` labelled it: its teardown never ran, so it has no
    history id and no label, a bare "skipped" named after the node. Kept, it was counted beside
    the "not run" result the run's end writes for that case (:func:`write_not_run`): the
    selection plus one. True (dropped: written under a name Allure does not read, allure-commons'
    file logger names a file by the item's ``file_pattern``, and removed just after by
    :class:`CutShortRemover`) unless the case's result is known here (:func:`note_case_result`):
    then it is completed from that result, as the run's end counts the case as run. A result a
    signal stopped inside allure-pytest's teardown, its history id set and its run labels half
    added, gets the rest (:func:`_finish_labelled`)."""
    if not isinstance(result, allure_commons.model2.TestResult):
        return False
    if result.historyId:
        # stopped inside allure-pytest's own teardown, after the history id and before the
        # run's labels it adds last ("package" the last): half of them missing
        if result.labels and not any(label.name == "package" for label in result.labels):
            _finish_labelled(result)
        return False
    if result.labels:  # labelled (attach_case), then stopped before its teardown
        _finish_labelled(result)
        return False
    known = _KNOWN_RESULTS.pop(_case_id_in(result.parameters), None)
    if known is None:
        result.file_pattern = _CUT_SHORT
        return True
    built = _case_result(*known)
    for field in ("name", "fullName", "titlePath", "testCaseId", "historyId", "status",
                  "statusDetails", "labels", "parameters"):
        setattr(result, field, getattr(built, field))
    return False


def _case_id_in(parameters: Sequence[Any] | None) -> str:
    """The case id of Allure parameters' ``case`` (those of a test result): ``Case(<id>)`` as a
    bare result of allure-pytest's has it, or the id quoted (``represent``) once labelled; ""
    if there is none."""
    value = next((str(p.value) for p in parameters or [] if p.name == "case"), "")
    if value.startswith("Case(") and value.endswith(")"):
        return value[len("Case("):-1]
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return ""


def _finish_labelled(result: Any) -> None:
    """What allure-pytest's teardown adds, for a test :func:`attach_case` labelled that a
    signal stopped before its teardown: the history id (:func:`history_id`), the benchmark's
    marker tag and the run's labels, as :func:`_built_result` gives them."""
    from allure_commons.model2 import Label
    from allure_commons.utils import host_tag, platform_label, thread_tag

    result.historyId = history_id(result.fullName, result.parameters or [])
    known = _LABELLED.pop(_case_id_in(result.parameters), None)
    if known is not None:  # its test's status as the case's result gives it, not "passed"
        built = _case_result(*known)
        result.status, result.statusDetails = built.status, built.statusDetails
    have = {(label.name, label.value) for label in result.labels}
    epic = next((label.value for label in result.labels if label.name == "epic"), None)
    package = str(result.fullName or "").split("#", 1)[0]
    for name, value in ([("tag", epic)] if epic else []) + [
            ("host", host_tag()), ("thread", thread_tag()), ("framework", "pytest"),
            ("language", platform_label()), ("package", package)]:
        if (name, value) not in have:
            result.labels.append(Label(name=name, value=value))


def history_id(full_name: str | None, parameters: Sequence[Any]) -> str:
    """A case's Allure ``historyId`` from its full name and its Allure parameters, as
    allure-pytest computes it (``get_history_id``: the full name and the values of the
    parameters not excluded, by name), for the results written here that allure-pytest did not
    close itself (:func:`_finish_labelled`, :func:`_built_result`). allure-pytest hashes a
    pytest parameter's original value, not its represented one: the ``case`` parameter's is the
    :class:`Case`, whose ``repr`` is ``Case(<id>)``, while its Allure value is the id quoted
    (``represent``); the dynamic ones (``model``) have no original value."""
    from allure_pytest.utils import get_history_id

    case_id = _case_id_in([p for p in parameters if not p.excluded])
    original = {"case": f"Case({case_id})"} if case_id else {}
    return get_history_id(full_name, parameters, original_values=original)


class CutShortRemover:
    """allure-commons hook, after the file logger: removes what :func:`_cut_short` diverted."""

    @allure_commons.hookimpl(trylast=True)
    def report_result(self, result: Any) -> None:
        if getattr(result, "file_pattern", None) != _CUT_SHORT:
            return
        for plugin in allure_commons.plugin_manager.get_plugins():
            folder = getattr(plugin, "_report_dir", None)  # allure-commons' AllureFileLogger
            if isinstance(folder, Path):
                for path in folder.glob(_CUT_SHORT.format(prefix="*")):
                    path.unlink(missing_ok=True)


_IDENTITY = ModelIdentity()
_REMOVER = CutShortRemover()


def register_allure_hooks() -> None:
    for plugin in (_IDENTITY, _REMOVER):
        if not allure_commons.plugin_manager.is_registered(plugin):
            allure_commons.plugin_manager.register(plugin)


def label_run_results(run_id: str) -> None:
    """Label each result this process writes from now on with ``run_id`` (:data:`RUN_LABEL`):
    the run's controller once it has its run folder, each xdist worker of such a run."""
    _IDENTITY.run_id = run_id


def unregister_allure_hooks() -> None:
    _IDENTITY.run_id = None  # a later session in this process (pytester's) is another run
    for plugin in (_IDENTITY, _REMOVER):
        if allure_commons.plugin_manager.is_registered(plugin):
            allure_commons.plugin_manager.unregister(plugin)


def display_model(model: str) -> str:
    """The model as titles and suite paths show it: a replay recording by its file name (its
    temporary folder says nothing), every other model by its full name."""
    if model.startswith("replay:"):
        return "replay:" + Path(model[len("replay:"):]).name
    return model


def case_title(case_id: str, model: str, question: Any = None) -> str:
    """``[model] case: question``: two models' runs in one results folder stay apart by title."""
    head = f"[{display_model(model)}] {case_id}" if model else case_id
    return head if question is None else f"{head}: {str(question)[:100]}"


@functools.cache
def _story_labels(benchmark: str) -> tuple[str, ...]:
    """The labels a case's Allure story may be: ``hops`` (ToolHop's and FamilyTool's stories
    since the first reports), then the benchmark's breakdown labels, so an installed benchmark
    gets one too (its first breakdown label the case has)."""
    from pytest_toolbench.benchmarks import registry

    found = registry().get(benchmark)
    return ("hops", *(getattr(found, "breakdown_labels", ()) or ()))


def _story(result: CaseResult | Case) -> str | None:
    """``name=value`` of the case's first story label (:func:`_story_labels`), or None."""
    for name in _story_labels(result.benchmark):
        if name in result.labels:
            return f"{name}={result.labels[name]}"
    return None


def case_labels(case: CaseResult | Case, model: str) -> list[tuple[str, str]]:
    """(name, value) of the labels that place a case in the report, whatever its outcome: the
    suite path (model / benchmark / scenario), epic, feature, story and one label per case
    label. The outcome's own labels (:data:`OUTCOME_LABEL`, ``error_kind``) and the model's
    (tag, label) are not among them."""
    labels: list[tuple[str, str]] = []
    if model:  # the suite path: model / benchmark / scenario (not allure-pytest's module path)
        labels += [("parentSuite", display_model(model)), ("suite", case.benchmark),
                   ("subSuite", case.scenario)]
    labels += [("epic", case.benchmark), ("feature", case.scenario)]
    story = _story(case)
    if story is not None:
        labels.append(("story", story))
    labels += [(name, str(value)) for name, value in sorted(case.labels.items())]
    return labels


def attach_case(result: CaseResult, model: str) -> None:
    """Label and annotate the *currently running* test with one case's result."""
    if not allure_active():  # without --alluredir every label and step would be built for nothing
        return
    # labelled from here on (see _cut_short), the result kept for the status of this test if a
    # signal stops it before its end (_finish_labelled)
    known = _KNOWN_RESULTS.pop(result.case_id, None)
    _LABELLED.clear()
    if known is not None:
        _LABELLED[result.case_id] = known
    for name, value in case_labels(result, model):
        allure.dynamic.label(name, value)
    allure.dynamic.label(OUTCOME_LABEL, outcome_class(result))
    if result.error is not None:
        allure.dynamic.label("error_kind", result.error.kind)
    if model:
        allure.dynamic.tag(model)
        allure.dynamic.label("model", model)
        allure.dynamic.parameter("model", model)  # not excluded: part of historyId
    _parameters(result)
    _keep_case_span(result)
    allure.dynamic.title(case_title(result.case_id, model, _first(result.details, QUESTION_KEYS)))
    allure.dynamic.description(_description(result))

    emit_steps(case_steps(result))
    for body, name, kind in case_attachments(result):
        allure.attach(body, name, kind)


def case_attachments(result: CaseResult) -> list[tuple[str, str, Any]]:
    """(body, name, AttachmentType) of the files a case's result attaches after its steps:
    the transcript and its tool calls, the details and the tool-call parse failures."""
    out: list[tuple[str, str, Any]] = []
    if result.transcript:
        out.append((_dumps(result.transcript), "transcript", AttachmentType.JSON))
        calls = tool_calls_from_transcript(result.transcript)
        if calls:
            out.append((_dumps(calls), "tool calls", AttachmentType.JSON))
    if result.details:
        out.append((_dumps(result.details), "details", AttachmentType.JSON))
    if result.parse_failures:
        out.append((_dumps(result.parse_failures), "tool-call parse failures", AttachmentType.JSON))
        for i, pf in enumerate(result.parse_failures, start=1):
            raw = pf.get("raw_text")
            if raw:
                out.append((_text(str(raw)), f"parse failure {i}: raw model text",
                            AttachmentType.TEXT))
    return out


#: The outcome label of a selected case that never ran (the run was interrupted, or stopped
#: early): the label, like the status, tells it from a case that ran and was skipped.
NOT_RUN = "not run"


def write_not_run(nodes: Sequence[tuple[str, Case | None]], model: str, message: str, *,
                  tags: dict[str, list[str]] | None = None,
                  alluredir: str | Path | None = None, run_id: str | None = None) -> int:
    """An Allure result for each selected node that never ran (an interrupted run's, or one
    stopped early), so that Allure counts every selected case, as JUnit does; the number written.

    Each is built as allure-pytest builds a case's result and as :func:`attach_case` labels it:
    the same ``name`` (the title), ``fullName``, ``titlePath``, ``historyId`` (the full name, the
    ``case`` parameter's original value, ``Case(<id>)``, and the model), ``testCaseId`` (the
    model is added by :class:`ModelIdentity`), parameters and labels, so its history lines up
    with the runs in which the case did run. ``tags``: the node's marker tags where its pytest
    item is known (allure-pytest's ``pytest_markers``), else the benchmark's marker alone (the
    only marker without arguments a case gets, session/selection.py ``case_marks``).

    Status ``skipped``: the case was neither passed nor failed, and no test or harness error
    broke it (``broken``); Allure shows skipped results apart, grey, counted in the total, and
    keeps them out of the failure categories, and ``unknown`` is what Allure shows for a result
    it could not read. The status message and the :data:`OUTCOME_LABEL` say it never ran.
    Written through allure-commons' ``report_result`` hook: allure-pytest's file logger, with
    :class:`ModelIdentity` and the escaping of every other result. A no-op without
    ``--alluredir``. The node the interruption came in had a bare result of allure-pytest's
    own, which :class:`ModelIdentity` kept out of the results (:func:`_cut_short`).

    ``alluredir``: written there instead, without pytest (``toolbench finish --alluredir``, for
    a run killed outright: session/finish_cli.py), through :class:`ModelIdentity` and an
    allure-commons file logger of that folder alone, as allure-pytest's would have written
    them, labelled with ``run_id`` (the killed run's); nothing is registered with
    allure-commons, so a pytest process that writes results of its own (its ``--alluredir``)
    gets none of these."""
    if not nodes or (alluredir is None and not allure_active()):
        return 0
    from allure_commons.utils import now

    if alluredir is None:
        report = allure_commons.plugin_manager.hook.report_result
    else:
        report = _folder_reporter(alluredir, run_id)[0]
    stamp = now()
    for nodeid, case in nodes:
        result = _built_result(nodeid, case, model, NOT_RUN, "skipped", message,
                               (tags or {}).get(nodeid))
        result.start = result.stop = stamp
        report(result=result)
    return len(nodes)


def _folder_reporter(alluredir: str | Path, run_id: str | None) -> tuple[Any, Any]:
    """(report(result=...), the file logger) writing results into ``alluredir`` alone, through
    a :class:`ModelIdentity` of ``run_id`` (the run they are results of), as allure-pytest's
    logger would have; nothing registered."""
    from allure_commons.logger import AllureFileLogger

    logger = AllureFileLogger(alluredir)
    identity = ModelIdentity(run_id)

    def report(result: Any) -> None:
        identity.report_result(result)
        logger.report_result(result)

    return report, logger


def _result_docs(alluredir: str | Path) -> Iterator[dict[str, Any]]:
    """Each test result in ``alluredir`` (its ``*-result.json``) as JSON; a file that cannot be
    read, or is no result, counts for nothing."""
    for path in Path(alluredir).glob("*-result.json"):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            yield doc


def _run_of(doc: dict[str, Any]) -> Any:
    """The run a result's JSON names (:data:`RUN_LABEL`), None if it names none."""
    labels = doc.get("labels")
    return next((label.get("value") for label in labels if isinstance(label, dict)
                 and label.get("name") == RUN_LABEL), None) if isinstance(labels, list) else None


def history_ids_in(alluredir: str | Path, run_id: str | None = None,
                   since_ms: int | None = None) -> set[str]:
    """The ``historyId`` of each test result in ``alluredir`` that is the run ``run_id``'s:
    labelled with it (:data:`RUN_LABEL`); a result with no run label (one an older version
    wrote) counts unless it started before ``since_ms`` (an earlier run's in a shared folder).
    The history id is the key: it is what Allure itself counts a case once by (results sharing
    it are retries of one), it names the case, its node and its model (two models' results in
    one folder are two), and every result of a case has it, allure-pytest's own, a completed
    cut-short one (:func:`_finish_labelled`) and those written here; the ``case`` parameter
    alone would match another model's result, and ``testCaseId`` leaves the parameters out."""
    found: set[str] = set()
    for doc in _result_docs(alluredir):
        if not doc.get("historyId"):
            continue
        run, start = _run_of(doc), doc.get("start")
        if run is not None:
            if run_id is not None and run != run_id:  # another run's result of the same case
                continue
        elif since_ms is not None and isinstance(start, (int, float)) and start < since_ms:
            continue
        found.add(str(doc["historyId"]))
    return found


def case_ids_in(alluredir: str | Path, run_id: str) -> set[str]:
    """The case id of each test result in ``alluredir`` that the run ``run_id`` wrote (labelled
    with it, :data:`RUN_LABEL`): which of a run's cases the folder holds a result of, read
    without building any case's result."""
    found: set[str] = set()
    for doc in _result_docs(alluredir):
        if _run_of(doc) != run_id:
            continue
        parameters = [allure_commons.model2.Parameter(name=p.get("name"), value=p.get("value"))
                      for p in doc.get("parameters") or [] if isinstance(p, dict)]
        case_id = _case_id_in(parameters)
        if case_id:
            found.add(case_id)
    return found


def write_finished(cases: Sequence[tuple[str, Case | None, CaseResult]], model: str, *,
                   alluredir: str | Path, run_id: str | None = None,
                   since_ms: int | None = None) -> int:
    """The full Allure result of each finished case (node id, its Case, its journalled result)
    that ``alluredir`` holds no result of the run ``run_id`` (:func:`history_ids_in`), for a
    run killed outright between a case's journal line and its result file (``toolbench finish
    --alluredir``, session/finish_cli.py): built as :func:`_cut_short` completes a result whose
    case is known (status, name, history id, test case id, parameters, labels), with the case's
    description, its conversation and scoring steps (:func:`case_steps`, spanning the case's
    run), its attachments after them (:func:`case_attachments`) and its timing: the page the
    live case would have shown. The number written."""
    from allure_commons.model2 import Attachment
    from allure_commons.utils import now

    have = history_ids_in(alluredir, run_id, since_ms)
    report, logger = _folder_reporter(alluredir, run_id)
    written = 0

    def attach(body: str, name: str, kind: Any) -> Any:
        source = f"{uuid.uuid4()}-attachment.{kind.extension}"
        logger.report_attached_data(body=body, file_name=source)
        return Attachment(name=name, source=source, type=kind.mime_type)

    for nodeid, case, case_result in cases:
        result = _case_result(nodeid, case, case_result, case_result.model or model)
        if result.historyId in have:
            continue
        result.description = _description(case_result)
        result.start, result.stop = _span_ms(case_result) or (now(), now())
        result.steps = step_results(case_steps(case_result), attach, result.start, result.stop)
        result.attachments += [attach(*a) for a in case_attachments(case_result)]
        report(result=result)
        have.add(result.historyId)
        written += 1
    return written


def _case_result(nodeid: str, case: Case | None, case_result: CaseResult, model: str) -> Any:
    """The Allure result of a case that ran, from its result (:func:`_built_result`): passed, or
    failed with its failure message (an infrastructure error's not-scored text), its outcome
    class and error kind labelled, as :func:`attach_case` and the test's failure give them."""
    message = case_result.failure_message or (
        not_scored_text(case_result.error.kind, case_result.error.message)
        if case_result.error is not None else None)
    passed = case_result.outcome is Outcome.PASSED
    built = _built_result(nodeid, case, model, outcome_class(case_result),
                          "passed" if passed else "failed", None if passed else message)
    if case_result.error is not None:
        built.labels.append(allure_commons.model2.Label(name="error_kind",
                                                        value=case_result.error.kind))
    return built


def _built_result(nodeid: str, case: Case | None, model: str, outcome: str, status: str,
                  message: str | None, tags: list[str] | None = None) -> Any:
    """A test result for ``nodeid`` as allure-pytest builds it and :func:`attach_case` labels
    it (:func:`write_not_run`), with ``outcome`` as its :data:`OUTCOME_LABEL`."""
    from allure_commons.model2 import Label, Parameter, StatusDetails, TestResult
    from allure_commons.utils import host_tag, platform_label, thread_tag
    from allure_pytest.utils import ParsedPytestNodeId

    parsed = ParsedPytestNodeId(nodeid)
    class_part = "".join("." + c for c in parsed.class_names)
    full_name = f"{parsed.package}{class_part}#{parsed.test_function}"
    labels: list[tuple[str, str]] = []
    parameters: list[Parameter] = []
    if case is not None:
        name = case_title(case.id, model, _first(_question(case), QUESTION_KEYS))
        labels += case_labels(case, model)
        labels.append((OUTCOME_LABEL, outcome))
        parameters += [Parameter(name=n, value=represent(v), excluded=excluded or None)
                       for n, v, excluded in case_parameters(case.id, case.benchmark,
                                                             case.scenario, case.labels)]
        if model:  # in the order attach_case gives them: case, model, the excluded ones
            labels += [("tag", model), ("model", model)]
            parameters.insert(1, Parameter(name="model", value=represent(model)))
    else:  # a node that is no benchmark case: as allure-pytest names it, its module's suite
        name = nodeid.rsplit("::", 1)[-1]
        labels += [("parentSuite", parsed.parent_package), ("suite", parsed.module)]
        if parsed.class_names:
            labels.append(("subSuite", " > ".join(parsed.class_names)))
        labels.append((OUTCOME_LABEL, outcome))
    if tags is None:
        tags = [case.benchmark] if case is not None else []
    labels += [("tag", t) for t in tags]
    labels += [("host", host_tag()), ("thread", thread_tag()), ("framework", "pytest"),
               ("language", platform_label()), ("package", parsed.package)]
    return TestResult(
        uuid=str(uuid.uuid4()), name=name, fullName=full_name,
        titlePath=[*filter(None, [*parsed.path_segments, *parsed.class_names])],
        testCaseId=md5(full_name),
        historyId=history_id(full_name, parameters),
        status=status, statusDetails=StatusDetails(message=message) if message else None,
        labels=[Label(name=n, value=v) for n, v in labels], parameters=parameters)


#: Each case whose result this process has, by its id, until :func:`attach_case` labels its
#: test: (node id, Case, result, model). A signal between the two leaves allure-pytest a bare
#: result for a case that did run (its result journalled): :func:`_cut_short` completes it
#: from this instead of dropping it.
_KNOWN_RESULTS: dict[str, tuple[str, Case, CaseResult, str]] = {}


#: The case :func:`attach_case` labelled last, by its id: (node id, Case, result, model), for
#: :func:`_finish_labelled` when a signal stops its test after the labels, before its end
#: (allure-pytest then closes it as passed, whatever the case's outcome). One at a time.
_LABELLED: dict[str, tuple[str, Case, CaseResult, str]] = {}


def note_case_result(nodeid: str, case: Case, result: CaseResult, model: str) -> None:
    """The case's result is known (session/fixtures.py), its test not yet labelled."""
    if allure_active():
        _KNOWN_RESULTS[case.id] = (nodeid, case, result, model)


def _question(case: Case) -> dict[str, Any]:
    """The case's question as the run's details would hold it (the record's own ``question``
    or ``query``), for the title; nothing when its record is not at hand."""
    try:
        sample = case.sample
    except Exception:  # noqa: BLE001 - a title without the question is still the case's
        return {}
    if isinstance(sample, dict):
        return sample
    return {k: getattr(sample, k) for k in QUESTION_KEYS if isinstance(getattr(sample, k, None), str)}


def allure_active() -> bool:
    """True when allure-pytest writes results (``--alluredir``) in this process."""
    return bool(allure_commons.plugin_manager.hook.global_attach_data.get_hookimpls())


def attach_run_metrics(
    metrics: RunMetrics,
    summary_text: str,
    *,
    alluredir: str | Path | None = None,
    metrics_html: str | None = None,
    images: Sequence[Path] = (),
    prefix: str = "",
    environment: str | None = None,
) -> bool:
    """Attach the run's metric table (text, HTML and JSON) and plots to the Allure run once;
    True if attached. ``prefix`` (model and run) starts every name, so the global attachments
    of several runs in one results folder stay apart. Given ``alluredir`` they are written as
    one globals file under the run's model ``environment`` (report/allure_globals.py).

    allure-python >= 2.16 has ``allure.global_attach`` (a run-level ``*-globals.json``, which
    Allure 3 shows on the report's overview). On older versions we fall back to writing the
    attachments plus a ``*-container.json`` whose set-up fixture holds them and whose children
    are every test already in ``alluredir``: Allure then shows the metrics under each test's
    set-up (it has no run-level slot before 2.16).
    """
    metrics_json = safe_json(metrics.model_dump_json(indent=2))  # group names are data
    summary_text = _text(summary_text)
    if alluredir is not None:  # one globals file for the run, under its model (allure_globals)
        from pytest_toolbench.report.allure_globals import GlobalItem, write_globals

        items = []
        if metrics_html is not None:
            items.append(GlobalItem(name=f"{prefix}toolbench metrics (html)",
                                    body=metrics_html.encode(), mime="text/html", ext="html"))
        items += [GlobalItem(name=f"{prefix}toolbench metrics", body=summary_text.encode(),
                             mime="text/plain", ext="txt"),
                  GlobalItem(name=f"{prefix}toolbench metrics (json)", body=metrics_json.encode(),
                             mime="application/json", ext="json")]
        items += [GlobalItem(name=f"{prefix}plot {Path(image).stem}", body=Path(image).read_bytes(),
                             mime="image/png", ext="png") for image in images]
        write_globals(alluredir, items, environment=environment)
        return True
    if hasattr(allure, "global_attach"):
        if not allure_active():
            return False
        if metrics_html is not None:
            allure.global_attach(metrics_html, f"{prefix}toolbench metrics (html)",
                                 AttachmentType.HTML)
        allure.global_attach(summary_text, f"{prefix}toolbench metrics", AttachmentType.TEXT)
        allure.global_attach(metrics_json, f"{prefix}toolbench metrics (json)",
                             AttachmentType.JSON)
        for image in images:
            allure.global_attach(Path(image).read_bytes(), f"{prefix}plot {Path(image).stem}",
                                 AttachmentType.PNG)
        return True
    if alluredir is None:
        return False
    return _write_container_fallback(Path(alluredir), summary_text, metrics_json)


def _write_container_fallback(alluredir: Path, summary_text: str, metrics_json: str) -> bool:
    alluredir.mkdir(parents=True, exist_ok=True)
    attachments = []
    for name, body, mime, ext in (
        ("toolbench metrics", summary_text, "text/plain", "txt"),
        ("toolbench metrics (json)", metrics_json, "application/json", "json"),
    ):
        source = f"{uuid.uuid4()}-attachment.{ext}"
        (alluredir / source).write_text(body, encoding="utf-8")
        attachments.append({"name": name, "source": source, "type": mime})
    children = []
    for f in sorted(alluredir.glob("*-result.json")):
        try:
            children.append(json.loads(f.read_text(encoding="utf-8"))["uuid"])
        except (ValueError, KeyError):
            continue
    now = int(time.time() * 1000)
    container = {
        "uuid": str(uuid.uuid4()),
        "name": "pytest-toolbench run metrics",
        "children": children,
        "befores": [
            {
                "name": "pytest-toolbench run metrics",
                "status": "passed",
                "attachments": attachments,
                "start": now,
                "stop": now,
            }
        ],
        "start": now,
        "stop": now,
    }
    (alluredir / f"{container['uuid']}-container.json").write_text(
        json.dumps(container, indent=2), encoding="utf-8"
    )
    return True
