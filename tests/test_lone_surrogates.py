"""A lone surrogate from the model or a tool is replaced, never a hang or an INTERNALERROR.

A model's reply with a JSON ``\\ud800`` escape and no low surrogate after it decodes to a string
UTF-8 cannot carry; so does the same escape inside a tool call's ``arguments``, and a tool may
return one. Before ``pytest_toolbench/utf8_safe.py``, such a reply hung the run (the shared SDK
process could not frame it for the pytest process, and the case waited for ever), failed the
case as an ``internal_error`` (the response cache could not write it) or ended the run with an
INTERNALERROR (the journal could not write the result).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, completion, tool_call
from pytest_toolbench.models.base import ChatRequest, ChatResponse, ParseFailure
from pytest_toolbench.models.sdk_process.protocol import frame
from pytest_toolbench.utf8_safe import has_lone_surrogate, make_model_utf8_safe, utf8_safe
from shared_data import BUNDLED_TOOLHOP as BUNDLED

REPO = Path(__file__).resolve().parents[1]
LONE = "\ud800"
FFFD = "\ufffd"


# --------------------------------------------------------------------------- the replacement
def test_lone_surrogates_are_replaced_and_pairs_and_clean_values_kept():
    assert utf8_safe("a" + LONE + "b\udc00") == "a" + FFFD + "b" + FFFD
    value = {"k" + LONE: ["x", ("y" + LONE, 1)], "n": None}
    assert utf8_safe(value) == {"k" + FFFD: ["x", ("y" + FFFD, 1)], "n": None}
    assert has_lone_surrogate(value) and not has_lone_surrogate(utf8_safe(value))
    clean = {"q": ["导演 🎬", "café", 3]}
    assert utf8_safe(clean) is clean  # nothing copied when nothing changes
    pair = json.loads('"\\ud83c\\udfac"')  # a pair decodes to one character, kept
    assert utf8_safe(pair) == "🎬"


def test_requests_replies_and_results_are_made_encodable():
    request = ChatRequest(messages=[{"role": "tool", "content": "out" + LONE}],
                          tools=[{"name": "t" + LONE}])
    assert request.messages[0]["content"] == "out" + FFFD and request.tools == [{"name": "t" + FFFD}]
    request.fingerprint()  # hashed as UTF-8: it raised before
    response = ChatResponse(message={"role": "assistant", "content": "x" + LONE},
                            parse_failure=ParseFailure(reason="invalid_arguments_json",
                                                       raw_text="{" + LONE))
    assert response.content == "x" + FFFD and response.parse_failure.raw_text == "{" + FFFD
    response.model_dump_json()

    from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome

    result = CaseResult(case_id="c", benchmark="b", scenario="s", outcome=Outcome.ERROR,
                        transcript=[{"role": "tool", "content": LONE}], details={"a": [LONE]},
                        error=InfraError(kind="k", message="m" + LONE))
    make_model_utf8_safe(result)
    assert json.loads(result.model_dump_json())["error"]["message"] == "m" + FFFD
    assert result.transcript[0]["content"] == FFFD and result.details == {"a": [FFFD]}
    # a value the encoder cannot write beside one: the fast whole-model check fails for another
    # reason, and the field-by-field walk still finds and replaces it
    odd = CaseResult(case_id="c", benchmark="b", scenario="s", outcome=Outcome.PASSED,
                     details={"obj": object(), "text": "t" + LONE})
    make_model_utf8_safe(odd)
    assert odd.details["text"] == "t" + FFFD
    clean = CaseResult(case_id="c", benchmark="b", scenario="s", outcome=Outcome.PASSED,
                       details={"text": "café 🎬"})
    before = dict(vars(clean))
    make_model_utf8_safe(clean)
    assert all(vars(clean)[k] is v for k, v in before.items())  # nothing rebuilt


def test_a_frame_carries_a_lone_surrogate_across():
    data = frame({"error": {"message": "quoted " + LONE}})
    assert json.loads(data[4:]) == {"error": {"message": "quoted " + LONE}}


# --------------------------------------------------------------------------- end to end
def surrogate_data(folder: Path) -> tuple[Path, str]:
    """The first bundled record, its first tool returning what it got with a lone surrogate
    added; returns (the --data-dir, the tool's name)."""
    record = json.loads(BUNDLED.read_text(encoding="utf-8"))[0]
    name = record["tools"][next(iter(record["tools"]))]["name"]
    record["functions"][0] = (f"def {name}(film_title, release_year=None, "
                              f"include_co_directors=False):\n"
                              f"    return film_title + chr(0xd800)\n")
    data_dir = folder / "data"
    (data_dir / "toolhop").mkdir(parents=True)
    (data_dir / "toolhop" / "ToolHop.json").write_text(json.dumps([record]), encoding="utf-8")
    return data_dir, name


def surrogate_agent(tool: str):
    """Calls the tool with a lone surrogate escaped in its arguments, then answers with what the
    tool gave back and one more; without tools it answers with one. The fake server writes
    JSON with ``ensure_ascii``, so each goes out as a ``\\ud800`` escape."""

    def handler(body: dict, index: int):
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if body.get("tools") and not results:
            return 200, {}, completion(None, [tool_call(tool, {"film_title": "Jaws" + LONE})])
        text = results[-1] if results else "A"
        return 200, {}, completion(f"<answer>{text}{LONE}</answer>")

    return handler


@pytest.mark.parametrize("workers, sdk_process", [("0", "shared"), ("0", "inline"), ("2", "shared")])
def test_a_reply_and_a_tool_output_with_lone_surrogates_are_scored(tmp_path, workers, sdk_process):
    data_dir, tool = surrogate_data(tmp_path)
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}

    def run(server: FakeOpenAIServer, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:cacheprovider",
             "-p", "no:randomly", "-n", workers, "--sdk-process", sdk_process,
             "--data-dir", str(data_dir), "--base-url", server.base_url, "--api-key", "t",
             "--model", "m", "--max-retries", "0", "--cache-dir", str(out / "cache"),
             "--runs-dir", str(out / "runs"), "--toolbench-json", str(out / "report.json"),
             "--junitxml", str(out / "junit.xml"), *extra],
            cwd=REPO, capture_output=True, text=True, env=env, timeout=240)

    with FakeOpenAIServer(surrogate_agent(tool)) as server:
        proc = run(server)
        calls = len(server.requests)
        shown = proc.stdout + proc.stderr
        assert proc.returncode == 1, shown[-3000:]  # three wrong answers, no error
        assert "INTERNALERROR" not in shown and "infrastructure errors: none" in proc.stdout
        report = json.loads((out / "report.json").read_text(encoding="utf-8"))
        assert {c["outcome"] for c in report["cases"]} == {"failed"}
        mandatory = next(c for c in report["cases"] if c["scenario"] == "mandatory")
        # the tool got the argument and its output (json.dumps-ed, as upstream) went back to
        # the model, each lone surrogate replaced
        tool_turns = [m["content"] for m in mandatory["transcript"] if m.get("role") == "tool"]
        assert tool_turns == [f'"Jaws{FFFD}{FFFD}"'], mandatory["transcript"]
        assert f'model: <answer>"Jaws{FFFD}{FFFD}"{FFFD}</answer>' in proc.stdout, proc.stdout[-4000:]
        # the response cache kept every reply: the same run again sends nothing
        again = run(server, "--cache-only")
        assert again.returncode == 1, (again.stdout + again.stderr)[-3000:]
        assert len(server.requests) == calls
