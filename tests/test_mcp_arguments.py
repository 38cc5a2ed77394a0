"""Tool arguments are checked against the tool's input schema and refused as
`invalid_request` naming the argument, in the REST error format every tool
answers with (mcp_server/arguments.py), not the SDK's jsonschema text."""

from __future__ import annotations

from typing import Any

import pytest

from waypost.mcp_server.advice import explain
from waypost.mcp_server.arguments import ArgumentChecker
from waypost.mcp_server.server import tool_list

CHECKER = ArgumentChecker({t.name: t.inputSchema for t in tool_list()})


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "message"),
    [
        ("digest", {}, "project", "project is required"),
        ("digest", {"project": 5}, "project", "project must be of type string"),
        ("digest", {"project": "demo", "colour": "red"}, "colour", "unknown argument colour"),
        ("knowledge_search", {"project": "demo", "limit": 0}, "limit", "limit must be at least 1"),
        ("knowledge_search", {"project": "demo", "limit": True}, "limit",
         "limit must be of type integer or null"),
        ("knowledge_search", {"project": "demo", "limit": 500}, "limit",
         "limit must be at most 200"),
        ("knowledge_record", {"project": "demo", "kind": "rumour", "title": "t", "body": "b"},
         "kind", "kind must be one of checkpoint, fact, lesson, rejected_approach"),
        ("task_submit", {"project": "demo", "task_id": "t", "summary": "s", "lessons": [{}]},
         "lessons[0].kind", "lessons[0].kind is required"),
    ],
)  # fmt: skip
def test_a_refused_argument_is_named_in_the_rest_format(
    tool: str, arguments: dict[str, Any], field: str, message: str
) -> None:
    refused = CHECKER.refusal(tool, arguments)
    assert refused is not None
    assert (refused.code, refused.details["field"]) == ("invalid_request", field)
    assert refused.message.startswith(message), refused.message
    text = explain(refused, "demo")
    assert text.startswith(f"invalid_request: {message}")
    assert "'" not in refused.message  # no Python reprs


def test_valid_arguments_pass() -> None:
    assert CHECKER.refusal("digest", {"project": "demo"}) is None
    assert (
        CHECKER.refusal("knowledge_search", {"project": "demo", "q": "retry", "limit": 5}) is None
    )
    assert CHECKER.refusal("no_such_tool", {"x": 1}) is None  # the call answers "unknown tool"


def test_whole_floats_reach_the_route_as_integers() -> None:
    """JSON Schema's integer takes 2.0, which many clients send; the REST query
    string takes decimal digits only and the REST body strict integers."""
    from waypost.mcp_server.server import _query_text, _whole_numbers

    assert CHECKER.refusal("knowledge_search", {"project": "demo", "limit": 2.0}) is None
    args = {"expected_revision": 3.0, "lessons": [{"n": 1.0}], "ratio": 0.5, "flag": True}
    assert _whole_numbers(args) == {
        "expected_revision": 3,
        "lessons": [{"n": 1}],
        "ratio": 0.5,
        "flag": True,
    }
    assert type(_whole_numbers(args)["expected_revision"]) is int
    # past 64 bits a whole float stays a float, which REST refuses (1e300 became
    # a 301-digit integer and reached the route as a revision)
    assert type(_whole_numbers({"expected_revision": 1e300})["expected_revision"]) is float
    assert type(_whole_numbers({"n": float(2**62)})["n"]) is int
    assert [_query_text(v) for v in (2, True, "x")] == ["2", "true", "x"]
