"""Invocation errors (ToolHop paper, Table 4) hand-computed against real ToolHop tool schemas, both modes."""

from __future__ import annotations

import json


from pytest_toolbench.benchmarks.toolhop.invocation_errors import (
    ToolCallRecord,
    classify_feedback,
    classify_schema,
    summarize,
)


def err(name: str, detail: str) -> str:
    return f"an error occured when call {name}: {detail}"


def call(i: int, name: str, args, feedback: str, raised: bool = False) -> ToolCallRecord:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return ToolCallRecord(turn=i, index=0, name=name, arguments=arguments, feedback=feedback, raised=raised)


# Record 515: historical_association_finder (required figure_name, event_name),
# biographical_data_retriever (required name, data_sources), digit_product_calculator (required year).
CALLS_515 = [
    call(0, "historical_association_finder",
         {"figure_name": "Wernher von Braun", "event_name": "Operation light house"},
         '"Walter Dornberger"'),
    call(1, "biographical_data_retriever", {"name": "Walter Dornberger"},
         err("biographical_data_retriever",
             "biographical_data_retriever() missing 1 required positional argument: 'data_sources'"),
         raised=True),
    call(2, "digit_product_calculator", {"year": 1895, "precision": 2},
         err("digit_product_calculator",
             "digit_product_calculator() got an unexpected keyword argument 'precision'"),
         raised=True),
    call(3, "product_of_digits", {"n": 1895},
         err("product_of_digits", "name 'product_of_digits' is not defined"), raised=True),
    call(4, "digit_product_calculator", "{year: 1895",
         err("digit_product_calculator",
             "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
         raised=True),
    call(5, "biographical_data_retriever", {"full_name": "Walter Dornberger", "data_sources": []},
         err("biographical_data_retriever",
             "biographical_data_retriever() got an unexpected keyword argument 'full_name'"),
         raised=True),
]


def test_schema_mode_hand_computed(real):
    record = real[515]
    flags = [classify_schema(record, c) for c in CALLS_515]
    as_sets = [{k for k, v in f.items() if v} for f in flags]
    assert as_sets == [
        set(),
        {"parameter_missing"},
        {"parameter_hallucination"},
        {"tool_hallucination"},
        {"unparseable_arguments"},
        {"parameter_hallucination", "parameter_missing"},  # 'full_name' extra AND 'name' missing
    ]
    summary = summarize(record, CALLS_515, "schema")
    assert summary["calls"] == 6
    assert summary["error_calls"] == 4  # call 5 counts once; unparseable is not an error type
    assert summary["query_error"] is True
    assert summary["counts"] == {
        "tool_hallucination": 1,
        "parameter_hallucination": 2,
        "parameter_missing": 2,
        "unparseable_arguments": 1,
    }
    assert [c["error"] for c in summary["per_call"]] == [False, True, True, True, False, True]


def test_feedback_mode_hand_computed(real):
    summary = summarize(real[515], CALLS_515, "feedback")
    as_sets = [{k for k in ("tool_hallucination", "parameter_hallucination", "parameter_missing",
                            "unparseable_arguments") if c[k]} for c in summary["per_call"]]
    assert as_sets == [
        set(),
        {"parameter_missing"},
        {"parameter_hallucination"},
        {"tool_hallucination"},
        {"unparseable_arguments"},
        {"parameter_hallucination"},  # Python reports only the first problem
    ]
    assert summary["error_calls"] == 4 and summary["calls"] == 6 and summary["mode"] == "feedback"


def test_modes_differ_when_schema_required_differs_from_signature(real):
    # Record 19: the schema requires only product_name; the Python signature has no default for
    # query_type and output_format either, so upstream raises although the call is schema-valid.
    record = real[19]
    doc = next(d for d in record.tool_docs if d["name"] == "health_practitioner_identifier")
    assert doc["parameters"]["required"] == ["product_name"]
    c = call(0, "health_practitioner_identifier", {"product_name": "Rejuvelac"},
             err("health_practitioner_identifier", "health_practitioner_identifier() missing 2 "
                 "required positional arguments: 'query_type' and 'output_format'"), raised=True)
    assert not any(classify_schema(record, c).values())
    assert classify_feedback(c)["parameter_missing"] is True
    # Record 31: the schema requires attribute/order/state; the signature only state, so the
    # call runs fine upstream (no feedback error) but is a schema "parameter missing".
    record31 = real[31]
    c31 = call(0, "convention_center_query", {"state": "Texas"}, '{"error": "no data"}')
    assert classify_schema(record31, c31)["parameter_missing"] is True
    assert not any(v for k, v in classify_feedback(c31).items())


def test_feedback_mode_ignores_name_errors_inside_tool_bodies():
    c = call(0, "digit_product_calculator", {"year": 1895},
             err("digit_product_calculator", "name 're' is not defined"), raised=True)
    assert classify_feedback(c)["tool_hallucination"] is False
    # a tool that *returns* text resembling an error is not the executor's error path
    c2 = call(0, "x", {}, json.dumps("x() got an unexpected keyword argument 'y'"))
    assert classify_feedback(c2)["parameter_hallucination"] is False


def test_no_calls_means_no_query_error(real):
    summary = summarize(real[515], [], "schema")
    assert (summary["calls"], summary["error_calls"], summary["query_error"]) == (0, 0, False)
