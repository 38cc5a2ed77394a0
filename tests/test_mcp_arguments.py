"""Tool arguments are checked against the tool's input schema and refused as
`invalid_request` naming the argument, in the REST error format every tool
answers with (mcp_server/arguments.py), not the SDK's jsonschema text."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from waypost.errors import InvalidRequest
from waypost.mcp_server.advice import explain
from waypost.mcp_server.backend import ROUTES
from waypost.mcp_server.calls import ApiError
from waypost.mcp_server.schemas import model_schema
from waypost.mcp_server.server import INSTRUCTIONS, argument_checker, tool_list
from waypost.mcp_server.tools import ROUTE_TOOLS
from waypost.rest.routing import decode_body

CHECKER = argument_checker()


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "message"),
    [
        ("digest", {}, "project", "project is required"),
        ("digest", {"project": 5}, "project", "project must be of type string"),
        # with the ones taken: a record sent back as read lost one member a call
        ("digest", {"project": "demo", "colour": "red"}, "colour",
         "unknown argument colour (this tool takes project)"),
        # a tool that takes no argument says so, not "takes " and nothing
        ("me", {"colour": "red"}, "colour", "unknown argument colour (this tool takes none)"),
        ("knowledge_correct", {"project": "demo", "knowledge_id": "k", "expected_revision": 1,
                               "provenance": {"summary": "s", "actor_id": "a"}},
         "provenance.actor_id", "unknown argument provenance.actor_id (provenance takes"
         " source_submission_id, source_task_id, source_uri, summary)"),
        # a key quoted back is cut to 40 characters, as REST cuts it
        ("digest", {"project": "demo", "zz" + "q" * 5000: 1}, "zz" + "q" * 38 + "...",
         "unknown argument zz" + "q" * 38 + "..."),
        ("knowledge_record", {"project": "demo", "kind": "fact", "title": "t", "body": "b",
                              "scope": {"yy" + "q" * 5000: []}},
         "scope.yy" + "q" * 38 + "...", "unknown argument scope.yy" + "q" * 38 + "..."),
        ("knowledge_search", {"project": "demo", "limit": 0}, "limit", "limit must be at least 1"),
        ("knowledge_search", {"project": "demo", "limit": True}, "limit",
         "limit must be of type integer or null"),
        ("knowledge_search", {"project": "demo", "limit": 500}, "limit",
         "limit must be at most 200"),
        ("knowledge_record", {"project": "demo", "kind": "rumour", "title": "t", "body": "b"},
         "kind", "kind must be one of checkpoint, fact, lesson, rejected_approach"),
        ("task_submit", {"project": "demo", "task_id": "t", "summary": "s", "lessons": [{}]},
         "lessons[0].kind", "lessons[0].kind is required"),
        # NUL in any text: refused in REST's own words (the schemas said nothing)
        ("task_create", {"project": "demo", "title": "a\x00b"}, "title",
         "title must not hold NUL (U+0000)"),
        ("decision_open", {"project": "demo", "question": "q", "options": ["a", "b\x00"],
                           "rationale": "r", "required_actor": "human", "task_ids": ["t"],
                           "environment": "prod"},
         "options[1]", "options[1] must not hold NUL (U+0000)"),
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
    assert len(text) < 1_000  # nothing the caller sent is echoed whole


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


@pytest.mark.parametrize("argument", ["project", "idempotency_key"])
def test_a_trailing_newline_is_no_part_of_an_id(argument: str) -> None:
    """jsonschema matches patterns with re.search, whose `$` also matches
    before a final newline: "demo\\n" passed and reached Waypost as another
    project (over stdio a key with a newline broke the HTTP request)."""
    arguments = {"project": "demo", "kind": "fact", "title": "t", "body": "b"}
    arguments[argument] = "demo\n"
    refused = CHECKER.refusal("knowledge_record", arguments)
    assert refused is not None and refused.details["field"] == argument


def test_a_refused_key_or_id_is_said_in_rests_words() -> None:
    """The refusal showed the schema's raw pattern, lookahead and all
    (`^[!-~]{1,256}(?![\\s\\S])`), where REST and GraphQL name the rule
    (idemxaudit)."""
    arguments = {"project": "demo", "kind": "fact", "title": "t", "body": "b"}
    for key in ("a b", "", "k" * 257, "é"):
        refused = CHECKER.refusal("knowledge_record", {**arguments, "idempotency_key": key})
        assert refused is not None
        assert refused.message == "idempotency_key must be 1-256 characters from ! to ~", key
    refused = CHECKER.refusal("task_get", {"project": "demo", "task_id": "bad id!"})
    assert refused is not None
    assert refused.message == "task_id must match the pattern ^[A-Za-z0-9_-]{1,64}$"


def test_a_huge_array_of_the_wrong_type_is_judged_by_its_first_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every error of every item was built before the best was chosen: 2 s
    on the event loop for 130,000 integers in a list of strings."""
    from waypost.mcp_server import arguments as module

    seen: list[int] = []
    real = module._earliest

    def counting(errors: Any, arguments: Any, order: Any) -> Any:
        seen.append(len(errors))
        return real(errors, arguments, order)

    monkeypatch.setattr(module, "_earliest", counting)
    refused = CHECKER.refusal("knowledge_record", {"project": "demo", "kind": "fact",
                              "title": "t", "body": "b", "tags": list(range(130_000))})  # fmt: skip
    assert refused is not None and refused.details["field"].startswith("tags")
    assert seen == [module.FIRST_ERRORS]


def _rest_names(tool: str, body: dict[str, Any]) -> str | None:
    """The field REST's decoding of `body` names (rest/routing.py), or None."""
    made = next(t for t in ROUTE_TOOLS if t.name == tool)
    try:
        decode_body(ROUTES[(made.method, made.path)], body)
    except InvalidRequest as refused:
        return str(refused.details["field"])
    return None


@pytest.mark.parametrize(
    ("tool", "body"),
    [
        ("decision_open", {"options": ["A"], "task_ids": []}),
        ("decision_open", {"task_ids": [], "options": ["A"]}),
        ("decision_open", {"question": "", "rationale": ""}),
        ("decision_open", {"options": ["A"], "required_actor": "bogus"}),
        ("decision_open", {"required_actor": "bogus", "options": ["A"]}),
        ("knowledge_record", {"kind": "nope", "title": ""}),
        ("knowledge_record", {"title": "", "kind": "nope"}),
        ("knowledge_record", {"title": "t", "colour": 1, "kind": "nope", "body": "b"}),
        ("knowledge_record", {"scope": {"components": [1], "task_ids": 2}, "kind": "nope"}),
        ("knowledge_record", {"scope": {"zq": 1, "mm": 2}, "kind": "fact"}),
        ("task_create", {"title": "", "priority": 2_000_000}),
        ("task_create", {"priority": 2_000_000, "title": ""}),
        ("task_create", {"priority": 2_000_000}),
        ("task_create", {"description": 5}),
        # NUL is REST's second step, after the model's (review64)
        ("knowledge_feedback", {"comment": "a\x00b", "useful": True}),
        ("decision_open", {"recommendation": "a\x00b", "task_ids": "x", "options": 5}),
        # two unknown keys: the first written (it was the first in sorted order)
        ("task_checkpoint", {"zz": 1, "aa": 2}),
        # more than FIRST_ERRORS errors in an argument written after the bad one
        ("task_create", {"zz": 1, "title": "t", "depends_on": [5] * 25}),
        ("task_create", {"priority": "x", "acceptance_criteria": [5] * 20}),
        ("task_submit", {"lessons": [{"title": True}], "summary": 5}),
        # inside a value of `T or null`, the same order (review65)
        ("decision_answer", {"relay": {"response": 5, "prompt": 6}}),
        ("decision_answer", {"relay": {"zz": 1, "prompt": ""}}),
        ("decision_answer", {"relay": {"prompt": "a\x00", "response": ""}}),
    ],
)  # fmt: skip
def test_several_bad_arguments_name_the_one_rest_names(tool: str, body: dict[str, Any]) -> None:
    """REST names the first bad value of the body as written (missing ones
    after), then NUL, then the path's ids and the key; the tool named the
    one jsonschema ranked best, another of the two (mcpparity, review64),
    so an agent mended one argument to meet a refusal of the other."""
    made = next(t for t in ROUTE_TOOLS if t.name == tool)
    path = {name: "T1" for name in made.path_args}
    rest = _rest_names(tool, body)
    assert rest is not None
    refused = CHECKER.refusal(tool, {"project": "demo", **path, **body})
    assert refused is not None and refused.details["field"] == rest, body
    # a bad project or key as well: REST reads them after the body
    late = {"project": "Bad Slug", **path, "idempotency_key": "has space", **body}
    refused = CHECKER.refusal(tool, late)
    assert refused is not None and refused.details["field"] == rest, body


@pytest.mark.parametrize("tool", ["knowledge_search", "task_list", "task_checkpoints"])
def test_a_reading_tool_names_a_bad_query_before_a_bad_project(tool: str) -> None:
    """REST decodes the query before it looks the project up (review65):
    `GET .../projects/Bad_Slug/knowledge?limit=0` names `limit`."""
    arguments = {"project": "Bad_Slug", "task_id": "bad id", "limit": 0}
    if tool != "task_checkpoints":
        del arguments["task_id"]
    refused = CHECKER.refusal(tool, arguments)
    assert refused is not None and refused.details["field"] == "limit"


def test_the_key_comes_before_a_lessons_fields_and_these_before_the_path() -> None:
    """REST reads the key before the write, the lessons in the write, the
    project and the task there after them (what it answered, review64)."""
    lesson = {"summary": "s", "lessons": [{"title": True}]}
    for arguments, field in [
        ({"project": "demo", "task_id": "T1", "idempotency_key": "has space", **lesson},
         "idempotency_key"),
        ({"project": "Bad Slug", "task_id": "bad id", **lesson}, "lessons[0].title"),
        ({"project": "Bad Slug", "task_id": "T1", "summary": "s"}, "project"),
    ]:  # fmt: skip
        refused = CHECKER.refusal("task_submit", arguments)
        assert refused is not None and refused.details["field"] == field, arguments


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_any_bad_body_is_named_as_rest_names_it(seed: int) -> None:
    """Random bodies of every writing tool, most with several bad values:
    wherever both refuse, the tool names the field REST names (review64's
    comparison, which found the cases above)."""
    rng = random.Random(seed)
    writing = [t for t in ROUTE_TOOLS if t.available and t.mutating]
    compared = 0
    for _ in range(300):
        made = rng.choice(writing)
        route = ROUTES[(made.method, made.path)]
        if route.body is None:
            continue
        body = _some_object(rng, model_schema(route.body, in_query=False), 0.5)
        rest = _rest_names(made.name, body)
        path = {name: "T1" for name in made.path_args}
        refused = CHECKER.refusal(made.name, {"project": "demo", **path, **body})
        if rest is not None and refused is not None:
            compared += 1
            assert refused.details["field"] == rest, (made.name, body)
    assert compared > 150


def _some_value(rng: random.Random, schema: dict[str, Any], bad: bool) -> Any:
    """A value `schema` takes (most of the time), or one it may well not."""
    if bad:
        wrong: list[Any] = [5, "x", True, [], {}, None, 2**40, "", "a\x00b", -5, "bogus"]
        if schema.get("type") == "array" and "items" in schema:
            items = schema["items"]
            wrong.append([_some_value(rng, items, False), _some_value(rng, items, True)])
        if schema.get("type") == "object":
            wrong.append(_some_object(rng, schema, 0.6))
        # an object of `T or null` with bad values inside (review65)
        objects = [b for b in schema.get("anyOf", []) if b.get("type") == "object"]
        wrong.extend(_some_object(rng, branch, 0.6) for branch in objects)
        return rng.choice(wrong)
    if "anyOf" in schema:
        return _some_value(rng, rng.choice(schema["anyOf"]), False)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "boolean":
        return rng.choice([True, False])
    if kind == "integer":
        return max(schema.get("minimum", 0), 1)
    if kind == "string":
        return "2030-01-01T00:00:00Z" if schema.get("format") == "date-time" else "abc"
    if kind == "array":
        count = max(schema.get("minItems", 0), rng.choice([0, 1, 2]))
        made = [_some_value(rng, schema["items"], False) for _ in range(count)]
        return [f"{v}{i}" if isinstance(v, str) else v for i, v in enumerate(made)]
    if kind == "object":
        return _some_object(rng, schema, 0.0)
    return None


def _some_object(rng: random.Random, schema: dict[str, Any], bad: float) -> dict[str, Any]:
    """Properties in a random order, some left out, a share `bad` of them
    bad, and sometimes unknown keys among them."""
    required = set(schema.get("required", []))
    names = list(schema.get("properties", {}))
    rng.shuffle(names)
    pairs: list[tuple[str, Any]] = []
    for name in names:
        if rng.random() < (bad * 0.3 if name in required else 0.4):
            continue
        value_bad = rng.random() < bad
        pairs.append((name, _some_value(rng, schema["properties"][name], value_bad)))
    for unknown in ("zz", "aa"):
        if rng.random() < bad * 0.3:
            pairs.insert(rng.randrange(len(pairs) + 1), (unknown, 1))
    return dict(pairs)


def test_request_ids_5_and_quoted_5_derive_two_keys() -> None:
    """JSON-RPC ids 5 and "5" are two requests; their derived idempotency
    keys were equal, so the second replayed the first."""
    from types import SimpleNamespace

    from waypost.mcp_server.server import derived_key

    state: Any = SimpleNamespace(id="s1")
    keys = {derived_key(state, rid) for rid in (5, "5", 5.5, "x" * 100)}
    assert len(keys) == 4
    assert derived_key(state, 5) == derived_key(state, 5)  # a resend still replays


def test_what_a_client_sent_wrong_is_a_short_warning() -> None:
    """The SDK logs a client's unusable message as an ERROR holding all of it."""
    import logging

    from waypost.mcp_server.http_endpoint import _ClientFaultsAsWarnings

    message = "Received exception from stream: " + "x" * 250_000
    record = logging.LogRecord(
        "mcp.server.lowlevel.server", logging.ERROR, __file__, 1, message, None, None
    )
    assert _ClientFaultsAsWarnings().filter(record)
    assert record.levelname == "WARNING" and len(record.getMessage()) < 300


def _array_properties(node: Any, found: list[tuple[str, dict[str, Any]]]) -> None:
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            if isinstance(prop, dict) and prop.get("type") == "array":
                found.append((name, prop))
        for value in node.values():
            _array_properties(value, found)
    elif isinstance(node, list):
        for value in node:
            _array_properties(value, found)


def test_tool_schemas_say_unique_where_the_rest_document_does() -> None:
    """The REST document marks tags, scope values, options and task ids as
    `uniqueItems`; the tools' schemas left it out, though both refuse repeats.
    The check of arguments leaves it to REST, which refuses a repeat after it
    looked the call's key up (a used key: its answer, or 422)."""
    from waypost import rest
    from waypost.rest import openapi

    rest_arrays: list[tuple[str, dict[str, Any]]] = []
    _array_properties(openapi.build(rest.TABLES)["components"], rest_arrays)
    unique = {name for name, prop in rest_arrays if prop.get("uniqueItems")}
    assert {"tags", "options", "task_ids", "components"} <= unique
    tool_arrays: list[tuple[str, dict[str, Any]]] = []
    for tool in tool_list():
        _array_properties(tool.inputSchema, tool_arrays)
    named = [(name, prop) for name, prop in tool_arrays if name in unique]
    assert {name for name, _ in named} >= {"tags", "options", "task_ids", "components"}
    assert all(prop.get("uniqueItems") is True for _, prop in named), named
    # listed, but left to REST, which looks the key up first (test_mcp.py)
    repeated = {"project": "demo", "kind": "fact", "title": "t", "body": "b", "tags": ["a", "a"]}
    assert CHECKER.refusal("knowledge_record", repeated) is None


def test_advice_names_only_tools_that_exist_and_the_step_that_works() -> None:
    """A refusal said "task_get shows `publication`" (no such tool), and a
    shared record's correction said "ask a human" where the same call in
    its source project is the way."""
    names = {t.name for t in tool_list()}
    held = ApiError("publication_in_progress", "publication authority is held", {}, 409)
    said = explain(held, "demo")
    assert "task_get" not in said and "publication" in said
    for word in ("context", "digest", "decision_get"):
        assert word not in said or word in names
    shared = ApiError(
        "forbidden",
        "a shared record is corrected through its source project",
        {"reason": "source_project_only", "project_id": "billing"},
        403,
    )
    said = explain(shared, "demo")
    assert "project='billing'" in said and "ask a human" not in said


def test_a_submit_behind_an_edit_says_to_read_the_task_and_keeps_the_lease() -> None:
    """The generic advice spoke of "your change" and knowledge_get."""
    moved = ApiError(
        "revision_conflict", "the task changed since revision 1",
        {"expected_revision": 1, "current_revision": 2}, 409,
    )  # fmt: skip
    said = explain(moved, "demo", tool="task_submit")
    assert "revision 2" in said and "task_get" in said and "knowledge_get" not in said
    assert "knowledge_get" in explain(moved, "demo", tool="knowledge_correct")


def test_nothing_ready_with_lapsed_leases_says_to_recover_them() -> None:
    """The advice said to call digest or decision_wait, which show neither."""
    names = {t.name for t in tool_list()}
    lapsed = ApiError(
        "not_found", "no task is ready to claim, but 1 task(s) hold a lease that expired",
        {"reason": "nothing_ready", "expired_leases": ["tsk_a"]}, 404,
    )  # fmt: skip
    said = explain(lapsed, "demo")
    assert "task_recover" in names and "task_recover with project='demo', task_id='tsk_a'" in said
    bare = ApiError("not_found", "no task is ready", {"reason": "nothing_ready"}, 404)
    assert "task_recover" not in explain(bare, "demo")
    # a task a decision holds is not the one to recover (collabjourney)
    some = {"reason": "nothing_ready", "expired_leases": ["tsk_a", "tsk_b"],
            "expired_leases_held": ["tsk_a"]}  # fmt: skip
    said = explain(ApiError("not_found", "no task is ready", some, 404), "demo")
    assert "task_id='tsk_b'" in said and "A decision holds tsk_a:" in said
    every = {**some, "expired_leases_held": ["tsk_a", "tsk_b"]}
    said = explain(ApiError("not_found", "no task is ready", every, 404), "demo")
    assert "task_recover" not in said and "digest" in said


@pytest.mark.parametrize(
    ("code", "details", "message", "says", "never", "tool"),
    [
        # following "ask a human or open a decision" added a blocker to the human's own work
        ("forbidden", {"reason": "review_mode", "review_mode": "human"}, "review mode human",
         "Leave it", "open a decision", "task_complete"),
        # decision_wait returns at once while it is stale: waiting on it was a tight loop
        ("forbidden", {"reason": "human_required_reversible"}, "refused",
         "do not wait on it in a loop", None, "decision_reopen"),
        # the same reason from decision_open: nothing exists to wait on or reopen
        # (the tool tells them apart, never the message's words)
        ("forbidden", {"reason": "human_required_reversible"}, "refused to reopen",
         "reversible false", "decision_wait", "decision_open"),
        ("forbidden", {"reason": "human_required"}, "a human answers", "reopened first",
         None, "decision_answer"),
        ("state_conflict", {"reason": "stale", "status": "stale"}, "stale",
         "only a human reopens it", "Read it again", "decision_answer"),
        ("state_conflict", {"reason": "not_claimed", "status": "cancelled"}, "not claimed",
         "task_get", "recovered", "task_submit"),
        ("state_conflict", {"reason": "not_claimed", "status": "open"}, "not claimed",
         "task_claim with its task_id", "Stop working", "task_submit"),
        # a task never claimed is refused so too: no "(it was released)" (docsexamples)
        ("state_conflict", {"reason": "not_claimed", "status": "open"}, "not claimed",
         "once it is ready", "released", "task_checkpoint"),
        ("lease_conflict", {"reason": "held_by_another", "owner_id": "prn_x",
                            "expires_at": "2026-12-01T11:15:00.000Z"}, "held",
         "until 2026-12-01T11:15:00.000Z", None, "task_claim"),
        # mcpteamflow: a retried finalize (its answer lost) was told to prepare
        # again, so the agent published twice
        ("state_conflict", {"reason": "not_prepared"}, "no publication authority",
         "do not publish again", None, "publication_finalize"),
        # the holder's own second prepare was told to wait for itself
        ("publication_in_progress", {"holder_id": "prn_me"}, "held",
         "go on with publication_result", None, "publication_prepare"),
        # an answered decision never changes a task's status or dependencies
        ("forbidden", {"reason": "humans_only", "field": "status"}, "only humans",
         "tell your user", "open a decision", "task_edit"),
        # "read it again" changed nothing: the agent looped
        ("state_conflict", {"reason": "dependencies_not_done", "dependencies": ["tsk_d"]},
         "some dependencies are not done", "(tsk_d)", "Read it again", "task_claim"),
        ("state_conflict", {"reason": "task_closed", "status": "done"}, "closed",
         "The task is done", "Read it again", "publication_prepare"),
        # a cancelled task is not final: a human reopens it (review32)
        ("state_conflict", {"reason": "task_closed", "status": "cancelled"}, "closed",
         "only a human can reopen it", "final", "task_edit"),
        # a retried result under a new request id: the same trap as a retried finalize
        ("state_conflict", {"reason": "result_recorded"}, "recorded",
         "never to repeat this one", "to publish once more", "publication_result"),
        # a judged edit held by a publication: no prepare of the caller "went through"
        ("publication_in_progress", {"task_id": "tsk_s", "holder_id": "prn_me"}, "held",
         "finish that publication first", "went through", "task_edit"),
        ("publication_in_progress", {"task_ids": ["tsk_s"]}, "held", "Wait until its holder",
         "holder_id", "decision_open"),
        # context and knowledge_search need a project that exists
        ("not_found", {"project_id": "demo"}, "no such project", "No such project", "context",
         "task_list"),
        ("not_found", {"task_id": "tsk_x"}, "no such task", "task_list", None, "task_get"),
        # mcpclockaudit: an agent unsure after a pause whether it still holds
        # its task was sent to "Read it again (... decision_get or digest)"
        ("state_conflict", {"reason": "already_claimed"}, "you already hold this task",
         "go on with it", "Read it again", "task_claim"),
        ("state_conflict", {"reason": "already_claimed"}, "you already hold this task",
         "task_renew extends", "Claim other work", "task_recover"),
        # docs/mcp.md: each reason that needs an operator (database_files_changed,
        # database_damaged, database_upgraded) says to tell the user, not to
        # retry (mcpdocaudit: only the other two were pinned, in test_storage_upgrades)
        ("unavailable", {"reason": "database_damaged"}, "the database is damaged",
         "tell your user", "retry in a few seconds", "task_submit"),
    ],
)  # fmt: skip
def test_advice_for_refusals_an_mcp_agent_met_names_a_step_that_works(
    code: str, details: dict[str, str], message: str, says: str, never: str | None, tool: str
) -> None:
    """An audit of an agent with only the MCP tools followed each advice."""
    said = explain(ApiError(code, message, details, 409), "demo", tool=tool)
    assert says in said, said
    assert never is None or never not in said, said
    # every tool the advice names exists (arguments such as task_id are no tools)
    named = set(re.findall(r"\b(?:task|decision|knowledge|publication|project)_[a-z]+\b", said))
    named -= {
        "task_id",
        "task_ids",
        "decision_id",
        "knowledge_id",
        "holder_id",
        "project_id",
        "task_closed",
    }  # the last a reason, in the envelope
    assert named <= {t.name for t in tool_list()}, named


def test_fit_judges_each_argument_by_its_own_schema() -> None:
    """What the retry path asks before it sends a refused call on: a path
    argument REST would read as another route (`.`) does not fit."""
    assert CHECKER.fit("knowledge_correct", {"project": "demo", "knowledge_id": "kn_1"})
    assert not CHECKER.fit("knowledge_correct", {"project": ".", "knowledge_id": "kn_1"})
    assert not CHECKER.fit("knowledge_correct", {"project": "demo", "knowledge_id": ".."})
    assert not CHECKER.fit("knowledge_correct", {"no_such_argument": "x"})
    assert not CHECKER.fit("no_such_tool", {"project": "demo"})


def test_the_instructions_name_only_tools_that_exist() -> None:
    """What a client shows the model first: a renamed tool left there sends
    every agent to a tool that is not listed."""
    named = set(re.findall(r"`([a-z_]+)`", INSTRUCTIONS)) - {"idempotency_key"}
    assert {"project_list", "context", "task_create", "task_claim"} <= named
    assert named <= {t.name for t in tool_list()}, named


@pytest.mark.parametrize(
    ("code", "details", "tool", "says"),
    [("revision_conflict", {"expected_revision": 9, "current_revision": 2}, "task_edit",
      "You sent a revision it never had. The current revision is 2."),
     ("revision_conflict", {"expected_revision": 1, "current_revision": 2}, "task_edit",
      "The record changed since you read it. The current revision is 2."),
     ("generation_conflict", {"expected_generation": 5, "current_generation": 1},
      "decision_reopen", "You sent a generation it never had. The current generation is 1."),
     ("forbidden", {"reason": "human_required"}, "decision_answer",
      "send your user's answer verbatim as relay"),
     ("forbidden", {"reason": "relay_disabled"}, "decision_answer",
      "This project's policy does not take relayed answers")],
)  # fmt: skip
def test_advice_fits_what_was_refused(
    code: str, details: dict[str, Any], tool: str, says: str
) -> None:
    """mcpdescaudit: a number ahead of the record was told the record had
    moved on; a human-required refusal never named relay where the policy
    takes it; a refused relay was told to open a decision."""
    text = explain(ApiError(code, "refused", details, 409), "demo", tool=tool)
    assert says in text, text


def test_decision_opens_description_states_the_limits_its_schema_holds() -> None:
    """decision_open's description names its optional arguments with their
    limits ("conditions (at most 50, ...)", "2-20 options"): an agent reads
    the description before the schema, and a limit that drifted from the
    schema's would be refused without the description saying why."""
    tool = next(t for t in ROUTE_TOOLS if t.name == "decision_open")
    properties = tool.input_schema()["properties"]

    def bound(node: dict[str, Any], key: str) -> int:
        found = node.get(key)
        if found is None:
            found = next(b[key] for b in node.get("anyOf", []) if key in b)
        return int(found)

    options, conditions = properties["options"], properties["conditions"]
    assert f"{bound(options, 'minItems')}-{bound(options, 'maxItems')} options" in tool.description
    assert f"conditions (at most {bound(conditions, 'maxItems')}," in tool.description
