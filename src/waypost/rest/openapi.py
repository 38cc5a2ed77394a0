"""The OpenAPI 3.1 document, generated from the route table and its models."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from waypost import __version__
from waypost.ids import END, ID_CHARS
from waypost.resolvers.core.text import ONE_LINE_PATTERN
from waypost.resolvers.knowledge.models import BODY_MAX_BYTES, SubmissionLessonInput
from waypost.resolvers.projects.models import PolicyPatch
from waypost.resolvers.projects.policy import PROVENANCE_MAX_BYTES, RULES_MAX_BYTES
from waypost.resolvers.tasks.models import TEXT_MAX_BYTES, TaskPatch
from waypost.rest import response_schemas
from waypost.rest.routing import RestRoute, RouteTable

_PARAM = re.compile(r"{(\w+)}")
ERROR_CODES = {
    "400": "invalid_request",
    "401": "unauthenticated",
    "403": "forbidden",
    "404": "not_found",
    "409": "revision_conflict, generation_conflict, idempotency_in_flight, decision_required,"
    " publication_in_progress, lease_conflict or state_conflict",
    "413": "payload_too_large",
    "415": "unsupported_media_type",
    "422": "idempotency_key_reused",
    "503": "unavailable (with Retry-After)",
}

ERROR_SCHEMA = "ErrorEnvelope"
ERROR_ENVELOPE: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                # a string, not an enum: a code added later must not break a
                # client's parse of the whole answer (each status says its codes)
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object"},
            },
        }
    },
}

SESSION_HEADER: dict[str, Any] = {
    "name": "Waypost-Session",
    "in": "header",
    "required": False,
    "description": "The caller's live agent session this request acts in.",
    "schema": {"type": "string", "pattern": f"^{ID_CHARS}$"},
}
INT64_MAX = 2**63 - 1
REPLAYED_HEADER: dict[str, Any] = {
    "description": "`true` when the response is the stored receipt of an earlier request.",
    "schema": {"type": "string", "enum": ["true"]},
}
NOW_HEADER: dict[str, Any] = {
    "description": "The service's clock as it answered (it may be simulated): judge an"
    " `expires_at` or a lease by it, not by the client's clock.",
    "schema": {"type": "string", "format": "date-time"},
}
EMPTY_BODY: dict[str, Any] = {"type": "object", "additionalProperties": False, "maxProperties": 0}


def _query_parameters(model: type, schemas: dict[str, Any]) -> list[dict[str, Any]]:
    ref = schemas.get(model.__name__, {})
    required = set(ref.get("required", []))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": _one_value(prop)}
        for name, prop in ref.get("properties", {}).items()
    ]


def _one_value(prop: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema without the model's `null`: a query string
    cannot carry one (`?limit=null` and `?limit=` are refused), so the
    document's `null` branch and `"default": null` promised what the server
    refuses. Left out, the parameter is absent."""
    schema = {k: v for k, v in prop.items() if not (k == "default" and v is None)}
    branches = [b for b in schema.pop("anyOf", []) if b != {"type": "null"}]
    if len(branches) == 1:
        return {**branches[0], **schema}
    if branches:
        schema["anyOf"] = branches
    return schema


def _success_body(route: RestRoute) -> dict[str, Any]:
    """The success body's schema (rest/response_schemas.py), by operationId."""
    name = response_schemas.RESPONSES.get(route.handler.__name__)
    return {} if name is None else {"schema": {"$ref": f"#/components/schemas/{name}"}}


def _operation(route: RestRoute, schemas: dict[str, Any]) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _PARAM.findall(route.path)
    ]
    if route.query is not None:
        params += _query_parameters(route.query, schemas)
    if route.is_mutation:
        params.append(
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": True,
                "schema": {"type": "string", "pattern": "^[!-~]{1,256}$"},
            }
        )
    params.append(SESSION_HEADER)
    success: dict[str, Any] = {
        "description": "success",
        "content": {"application/json": _success_body(route)},
    }
    success["headers"] = {"Waypost-Now": NOW_HEADER}
    if route.is_mutation:
        success["headers"]["Idempotent-Replayed"] = REPLAYED_HEADER
    responses: dict[str, Any] = {str(route.status): success}
    for status, codes in ERROR_CODES.items():
        responses[status] = {"$ref": "#/components/responses/Error", "description": codes}
    op: dict[str, Any] = {
        "operationId": route.handler.__name__,
        "summary": route.summary.splitlines()[0] if route.summary else route.handler.__name__,
        "tags": [route.tag],
        "parameters": params,
        "responses": responses,
    }
    if route.body is not None:
        # a body whose every field is optional may be left out (`{}` is read)
        body_schema = schemas[route.body.__name__]
        op["requestBody"] = {
            "required": bool(body_schema.get("required") or body_schema.get("anyOf")),
            "content": {
                "application/json": {
                    "schema": {"$ref": f"#/components/schemas/{route.body.__name__}"}
                }
            },
        }
    elif route.is_mutation:
        # action POSTs take `{}` or no body at all
        op["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": EMPTY_BODY}},
        }
    return op


# What the server enforces beyond the models' types, stated where JSON Schema
# can say it, so a client generated from the document does not send what
# the server refuses. Arrays under these names hold distinct values (the
# resolvers refuse duplicates: options, dependencies, tags, scope values).
UNIQUE_ARRAYS = ("options", "depends_on", "tags", "task_ids", "components", "environments",
                 "versions")  # fmt: skip
# A PATCH must name at least one field to change (besides expected_revision).
PATCH_MODELS = frozenset({PolicyPatch.__name__, TaskPatch.__name__})
# Fields whose REST model accepts a loose type and checks it later (inside
# the write): the schema says what is really accepted (the MCP tools too).
ITEM_MODELS: dict[tuple[str, str], type] = {("SubmitBody", "lessons"): SubmissionLessonInput}
# Body integers are written as such (`2`, never `2.0`, which JSON Schema's
# integer admits): the strict decoder refuses a fraction or exponent, and
# anything past 64 bits.
INTEGER_NOTE = "An integer written without a fraction or exponent."
# Times the server parses as RFC 3339 with an offset.
DATE_TIMES = ("expires_at",)
# Full-text `q` parameters: 1,024 bytes at most, so 1-1,024 characters. (That
# it holds a term is not said as a pattern: the server splits terms as Python
# does, whose whitespace is not ECMA-262's, so `\S` would refuse `\ufeff`,
# which the server takes.)
SEARCH_TEXT: dict[str, Any] = {"minLength": 1, "maxLength": 1024}
# JSON Schema counts characters; the server counts bytes, which the
# description says (a client that checks only maxLength sends 513 `é`).
SEARCH_NOTE = (
    "Full-text terms: at most 1,024 bytes of UTF-8 (maxLength is the character"
    " bound this implies) and 32 terms, at least one of them not blank. Every"
    " term must match, as a whole word (no stemming)."
)


# Text an operation measures in UTF-8 bytes once the decoder has passed it:
# maxLength states the character bound those bytes imply, the description
# the bytes (as for `q`). Names are one line (resolvers/core/text.py).
BYTE_BOUNDS: dict[tuple[str, str], int] = {
    ("PolicyPatch", "rules"): RULES_MAX_BYTES,
    ("PolicyPatch", "provenance"): PROVENANCE_MAX_BYTES,
    ("KnowledgeCreate", "body"): BODY_MAX_BYTES,
    ("KnowledgeCorrect", "body"): BODY_MAX_BYTES,
    ("SubmissionLessonInput", "body"): BODY_MAX_BYTES,
    ("TaskCreate", "description"): TEXT_MAX_BYTES,
    ("TaskPatch", "description"): TEXT_MAX_BYTES,
    ("CheckpointBody", "note"): TEXT_MAX_BYTES,
    ("SubmitBody", "summary"): TEXT_MAX_BYTES,
}
ONE_LINE_FIELDS = (("ProjectCreate", "name"),)
# Values of an enum a check refuses after decoding, with a message saying
# what to do instead: a record is never created `superseded`
# (resolvers/knowledge/models.py `check_new`). Listed, a client validating
# against the document sent a body the server then refused.
REFUSED_VALUES: dict[tuple[str, str], tuple[str, str]] = {
    (model, "status"): ("superseded", "Not `superseded`: a record becomes superseded by a"
                                      " correction naming superseded_by_id.")
    for model in ("KnowledgeCreate", "SubmissionLessonInput")
}  # fmt: skip


def state_text_bounds(owner: str, properties: dict[str, Any]) -> None:
    """The byte bounds, one-line names and refused enum values of `owner`'s
    properties, in place (the REST document's component, an MCP tool's
    inlined schema)."""
    for (model, field), most in BYTE_BOUNDS.items():
        if model == owner and field in properties:
            for branch in _alternatives(properties[field]):
                if branch.get("type") == "string":
                    branch["maxLength"] = most
            properties[field].setdefault(
                "description",
                f"At most {most // 1024} KiB of UTF-8 (maxLength is the character"
                " bound this implies).",
            )
    for model, field in ONE_LINE_FIELDS:
        if model == owner and field in properties:
            properties[field]["pattern"] = ONE_LINE_PATTERN
    for (model, field), (refused, why) in REFUSED_VALUES.items():
        if model == owner and field in properties:
            prop = properties[field]
            prop["enum"] = [value for value in prop["enum"] if value != refused]
            prop.setdefault("description", why)


def _alternatives(prop: dict[str, Any]) -> list[dict[str, Any]]:
    """The property's schema, or each branch of its `anyOf` (`T | None`)."""
    return [b for b in prop.get("anyOf", [prop]) if isinstance(b, dict)]


# No NUL (U+0000) in any string of a body, nor in a search `q` (decoding.py
# `refuse_nul`, docs/api.md); the document let such a body through, which the
# server then refused. ids.END, not `$` (Python's matches before a final
# line break).
NUL_FREE_PATTERN = r"^[^\x00]*" + END
# the query parameters the server refuses NUL in: a search's `q` and the
# context packet's scope filters (resolvers/context/params.py)
NUL_REFUSED_PARAMETERS = frozenset({"q", "task_id", "component", "environment", "version"})


def _nul_free(node: dict[str, Any]) -> None:
    """NUL_FREE_PATTERN on each free-text string of one property's schema
    (its `anyOf` branches and array items too); a string with a pattern, an
    enum or a format of its own already refuses NUL."""
    for branch in _alternatives(node):
        if branch.get("type") == "string" and not {"pattern", "enum", "format"} & set(branch):
            branch["pattern"] = NUL_FREE_PATTERN
        items = branch.get("items")
        if isinstance(items, dict) and "$ref" not in items:
            _nul_free(items)


def property_bounds(prop_name: str, prop: dict[str, Any], *, in_query: bool) -> None:
    """What the service enforces on one property beyond msgspec's schema:
    unique arrays, integers within 64 bits, expiries as `date-time`, a
    query's search `q`, no NUL in a body's text. The OpenAPI document and the
    MCP tool schemas both state it through this one function, so that
    neither says less."""
    if prop_name in UNIQUE_ARRAYS and prop.get("type") == "array":
        prop["uniqueItems"] = True
    for branch in _alternatives(prop):
        if branch.get("type") == "integer":
            branch.setdefault("maximum", INT64_MAX)
            branch.setdefault("minimum", -INT64_MAX - 1)
        if branch.get("type") == "string" and prop_name in DATE_TIMES:
            branch["format"] = "date-time"
        if branch.get("type") == "string" and prop_name == "q" and in_query:
            branch.update(SEARCH_TEXT)
            prop.setdefault("description", SEARCH_NOTE)
    if not in_query or prop_name in NUL_REFUSED_PARAMETERS:
        _nul_free(prop)


def _state_constraints(schemas: dict[str, Any], queries: set[str]) -> None:
    for name, schema in schemas.items():
        properties = schema.get("properties", {})
        for prop_name, prop in properties.items():
            property_bounds(prop_name, prop, in_query=name in queries)
            if name not in queries and "integer" in {b.get("type") for b in _alternatives(prop)}:
                # a REST body is decoded strictly: 2.0 is no integer there
                # (the MCP tools take it, so their schemas do not say this)
                prop.setdefault("description", INTEGER_NOTE)
        state_text_bounds(name, properties)
        if name in PATCH_MODELS:
            _names_a_field(schema)
    for (owner, field), item_model in ITEM_MODELS.items():
        if owner in schemas:
            ref = f"#/components/schemas/{item_model.__name__}"
            schemas[owner]["properties"][field]["items"] = {"$ref": ref}


def _names_a_field(schema: dict[str, Any]) -> None:
    """A PATCH names a field besides `expected_revision` (required) and
    `provenance` (optional), its other properties being all fields and no
    other key allowed: so it holds two properties, three with `provenance`.
    Said as counts, not as `anyOf` one `required` per field, which client
    generators read as a union of types: the two PATCH bodies came out as
    `Any` (openapi-python-client) or as a class per field."""
    if schema.get("additionalProperties") is not False:  # the count would not hold
        raise RuntimeError("a PATCH model must forbid unknown fields")
    schema["minProperties"] = 2
    if "provenance" in schema["properties"]:
        schema["if"] = {"required": ["provenance"]}
        schema["then"] = {"minProperties": 3}


# The one route outside the route tables: a stream, not a JSON answer
# (live/sse.py; docs/api.md, "Live updates").
STREAM_PATH = "/api/v1/projects/{project}/events/stream"
STREAM_OPERATION: dict[str, Any] = {
    "operationId": "event_stream",
    "summary": "The project's events as Server-Sent Events, oldest first, then live.",
    "tags": ["events"],
    "parameters": [
        {"name": "project", "in": "path", "required": True, "schema": {"type": "string"}},
        {"name": "after", "in": "query", "required": False,
         "schema": {"type": "integer", "minimum": 0, "maximum": INT64_MAX}},
        {"name": "Last-Event-ID", "in": "header", "required": False,
         "description": "Resume after this event sequence (wins over `after`), at most"
                        f" {INT64_MAX} (64 bits); empty is no header.",
         "schema": {"type": "string", "pattern": "^([0-9]{1,19})?$"}},
        SESSION_HEADER,
    ],
    "responses": {
        "200": {"description": "an event stream", "content": {"text/event-stream": {}}},
        **{
            status: {"$ref": "#/components/responses/Error", "description": codes}
            for status, codes in {"400": "invalid_request", "401": "unauthenticated",
                                  "403": "forbidden", "404": "not_found",
                                  "429": "too_many_streams",
                                  "503": "unavailable"}.items()
        },
    },
}  # fmt: skip


def build(tables: list[RouteTable]) -> dict[str, Any]:
    routes = [r for t in tables for r in t.routes]
    models = {m for r in routes for m in (r.body, r.query) if m is not None}
    models |= set(ITEM_MODELS.values())
    _, schemas = msgspec.json.schema_components(
        sorted(models, key=lambda m: m.__name__), ref_template="#/components/schemas/{name}"
    )
    _state_constraints(schemas, {r.query.__name__ for r in routes if r.query is not None})
    answers = response_schemas.components()
    clash = set(schemas) & set(answers)
    if clash:  # a request model named like a response shape would replace it
        raise RuntimeError(f"request and response schemas share names: {sorted(clash)}")
    schemas.update(answers)
    # one named schema, not inline under the response: generators made a copy
    # of the envelope per operation and status (1,125 of 1,262 models)
    schemas[ERROR_SCHEMA] = ERROR_ENVELOPE
    paths: dict[str, Any] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, schemas)
    paths[STREAM_PATH] = {"get": STREAM_OPERATION}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Waypost REST API", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": {
                "Error": {
                    "description": "the error envelope",
                    "content": {
                        "application/json": {
                            "schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}
                        }
                    },
                }
            },
        },
        "security": [{"bearer": []}],
    }
