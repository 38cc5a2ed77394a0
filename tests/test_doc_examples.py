"""Every GraphQL document and every request body the docs show is one the
service takes: the GraphQL ones validated against the served schema, the
REST bodies (README's curl calls) decoded by their route's request model,
the MCP tools' argument examples checked against the tool's input schema and
decoded by its route's model. No server: the schema and the route table are
the ones the service runs (test_serve.py runs README's calls as printed).

A GraphQL document is a fenced ```graphql block, the `query` of a curl
`-d` body, a `gql(\"\"\"...\"\"\")` in a Python example, or a code span that
is a selection (`{ me { name } }`). A ```graphql block may also be a list of
field definitions (`name(arg: T): T`, compared with the schema's) or a
selection of some type's fields (`tasks(first: 2) { ... }`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from graphql import (
    DocumentNode,
    FragmentDefinitionNode,
    GraphQLError,
    GraphQLSyntaxError,
    NoUnusedFragmentsRule,
    OperationDefinitionNode,
    get_named_type,
    is_object_type,
    parse,
    specified_rules,
    validate,
)
from graphql.execution.values import get_variable_values

from waypost.errors import InvalidRequest
from waypost.mcp_server import schemas as mcp_schemas
from waypost.mcp_server.backend import ROUTES
from waypost.mcp_server.tools import ROUTE_TOOLS, decision_wait_schema, tool_names
from waypost.rest.routing import decode_body
from waypost.schema import schema

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCHEMA = schema._schema


@dataclass(frozen=True)
class Block:
    where: str  # file:line of the block's first line
    lang: str
    text: str


def fenced(page: Path) -> list[Block]:
    """The page's fenced code blocks (indented ones in lists too)."""
    lines = page.read_text(encoding="utf-8").split("\n")
    blocks, i = [], 0
    while i < len(lines):
        opening = re.match(r"^(\s*)(`{3,}|~{3,})\s*(\S*)", lines[i])
        i += 1
        if not opening:
            continue
        indent, fence, lang = opening.groups()
        start, body = i, []
        while i < len(lines) and not re.match(rf"^\s*{re.escape(fence)}\s*$", lines[i]):
            body.append(lines[i].removeprefix(indent))
            i += 1
        i += 1
        blocks.append(Block(f"{page.relative_to(ROOT)}:{start + 1}", lang, "\n".join(body)))
    return blocks


def spans(page: Path) -> list[tuple[str, str]]:
    """(file:line, text) of every code span outside fenced blocks."""
    text = page.read_text(encoding="utf-8")
    outside = re.sub(
        r"(?ms)^\s*(`{3,}|~{3,}).*?^\s*\1\s*$", lambda m: "\n" * m[0].count("\n"), text
    )
    found = []
    for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", outside):
        found.append((f"{page.relative_to(ROOT)}:{outside.count(chr(10), 0, m.start()) + 1}", m[1]))
    return found


BLOCKS = [b for page in DOCS for b in fenced(page)]
CURL_BODY = re.compile(r"-d '(.*?)'\s*$", re.S | re.M)


# -- GraphQL -----------------------------------------------------------------


def graphql_documents() -> list[tuple[str, str, dict[str, Any] | None]]:
    """(where, text, variables or None) of every GraphQL text the docs show."""
    found: list[tuple[str, str, dict[str, Any] | None]] = []
    for b in BLOCKS:
        if b.lang == "graphql":
            found.append((b.where, b.text, None))
        for m in re.finditer(r"\bcurl\b.*?/graphql\".*?-d '(.*?)'", b.text, re.S):
            body = json.loads(m[1])
            found.append((f"{b.where} (curl)", body["query"], body.get("variables") or {}))
        for m in re.finditer(r'gql\(\s*"""(.*?)"""\s*\)', b.text, re.S):
            found.append((f"{b.where} (gql)", m[1], None))
    for page in DOCS:
        for where, span in spans(page):
            # `{ me { name } }`, spaced inside its braces; `{id, name}` is a shape
            if re.match(r"^(\{ [_A-Za-z].* \}|(query|mutation|subscription)\b[^`]*\{.*\})$", span):
                found.append((f"{where} (span)", span, None))
    return found


def _errors_of_operations(doc: DocumentNode, variables: dict[str, Any] | None) -> list[str]:
    """Each operation validated on its own (a block may list several
    anonymous ones), with the document's fragments; and the shown variables
    coerced by the operation's definitions."""
    fragments = [d for d in doc.definitions if isinstance(d, FragmentDefinitionNode)]
    operations = [d for d in doc.definitions if isinstance(d, OperationDefinitionNode)]
    errors: list[str] = []
    for op in operations:
        one = DocumentNode(definitions=(op, *fragments))
        errors += [e.message for e in validate(SCHEMA, one)]
        if variables is not None and not errors:
            coerced = get_variable_values(SCHEMA, op.variable_definitions or (), variables)
            if isinstance(coerced, list):
                errors += [e.message for e in coerced]
    return errors


def _errors_of_field_list(text: str) -> list[str] | None:
    """A list of field definitions (`name(arg: T): T  # ...`): the schema has
    a type with every one of them, each with that signature. None when the
    text is no such list."""
    try:
        doc = parse(f"type ShownFields {{\n{text}\n}}")
    except GraphQLSyntaxError:
        return None
    [shown] = doc.definitions
    wanted = {}
    for f in shown.fields:  # type: ignore[attr-defined]
        args = ", ".join(f"{a.name.value}: {_type_text(a.type)}" for a in f.arguments or ())
        wanted[f.name.value] = (
            f"({args}): {_type_text(f.type)}" if args else f": {_type_text(f.type)}"
        )
    for t in SCHEMA.type_map.values():
        fields = getattr(t, "fields", None)
        if not is_object_type(t) or not fields or not set(wanted) <= set(fields):
            continue
        actual = {}
        for name in wanted:
            field = fields[name]
            args = ", ".join(f"{a}: {arg.type}" for a, arg in field.args.items())
            actual[name] = f"({args}): {field.type}" if args else f": {field.type}"
        if actual == wanted:
            return []
        return [
            f"{t.name}.{n}{wanted[n]} is {t.name}.{n}{actual[n]}"
            for n in wanted
            if actual[n] != wanted[n]
        ]
    return [f"no type has the fields {sorted(wanted)}"]


def _type_text(node: Any) -> str:
    kind = node.kind
    if kind == "non_null_type":
        return f"{_type_text(node.type)}!"
    if kind == "list_type":
        return f"[{_type_text(node.type)}]"
    return str(node.name.value)


def _errors_of_selection(text: str) -> list[str]:
    """A selection shown without its parent (`tasks(first: 2) { ... }`):
    valid as a fragment on some type of the schema."""
    rules = [r for r in specified_rules if r is not NoUnusedFragmentsRule]
    best: list[str] | None = None
    for t in SCHEMA.type_map.values():
        if t.name.startswith("__") or not hasattr(get_named_type(t), "fields"):
            continue
        try:
            doc = parse(f"fragment Shown on {t.name} {{\n{text}\n}}")
        except GraphQLSyntaxError as e:
            return [e.message]
        errors = [e.message for e in validate(SCHEMA, doc, rules)]
        if not errors:
            return []
        if best is None or len(errors) < len(best):
            best = errors
    return best or ["no type takes this selection"]


def graphql_errors(text: str, variables: dict[str, Any] | None) -> list[str]:
    try:
        doc = parse(text)
    except GraphQLSyntaxError:
        listed = _errors_of_field_list(text)
        return listed if listed is not None else _errors_of_selection(text)
    except GraphQLError as e:
        return [e.message]
    return _errors_of_operations(doc, variables)


DOCUMENTS = graphql_documents()


def test_the_graphql_documents_are_found() -> None:
    """README's two curl calls and graphql.md's blocks at least: an
    extraction that finds nothing passes every check below."""
    places = {where.split(":")[0] for where, _, _ in DOCUMENTS}
    assert {"README.md", "docs/graphql.md"} <= places
    assert sum(1 for w, _, _ in DOCUMENTS if "(curl)" in w) >= 2
    assert sum(1 for w, _, _ in DOCUMENTS if w.startswith("docs/graphql.md")) >= 6


@pytest.mark.parametrize(
    ("text", "variables"),
    [pytest.param(t, v, id=w) for w, t, v in DOCUMENTS],
)
def test_every_graphql_example_is_valid_against_the_schema(
    text: str, variables: dict[str, Any] | None
) -> None:
    assert graphql_errors(text, variables) == []


# -- REST bodies of README's curl calls --------------------------------------


def rest_calls() -> list[tuple[str, str, str, Any]]:
    """(where, method, path, body) of every curl call with a body sent to
    the public /api/v1 routes."""
    calls = []
    for b in BLOCKS:
        if b.lang not in ("sh", "bash", "shell") or "curl" not in b.text:
            continue
        for m in re.finditer(r"\bcurl\b(.*?)(?=^\s*(?:#|curl\b)|\Z)", b.text, re.S | re.M):
            call = m[1]
            url = re.search(r'"\$WAYPOST_URL(/api/v1/[^"?]*)', call)
            body = CURL_BODY.search(call)
            if not url or not body:
                continue
            method = re.search(r"-X\s+([A-Z]+)", call)
            calls.append((b.where, method[1] if method else "POST", url[1], json.loads(body[1])))
    return calls


def route_for(method: str, path: str) -> Any:
    for (m, template), route in ROUTES.items():
        pattern = "^" + re.sub(r"\\{[^}/]*\\}", "[^/]+", re.escape(template)) + "$"
        if m == method and re.match(pattern, path):
            return route
    raise AssertionError(f"no route {method} {path}")


REST_CALLS = rest_calls()


def test_the_readme_curl_bodies_are_found() -> None:
    assert [(m, p) for w, m, p, _ in REST_CALLS if w.startswith("README.md")] == [
        ("POST", "/api/v1/projects"),
        ("PATCH", "/api/v1/projects/demo/policy"),
    ]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [pytest.param(m, p, b, id=f"{w} {m} {p}") for w, m, p, b in REST_CALLS],
)
def test_every_curl_body_decodes_with_its_route_model(method: str, path: str, body: Any) -> None:
    decode_body(route_for(method, path), body)


# -- MCP tool arguments ------------------------------------------------------


def _placeholders_filled(value: Any) -> Any:
    """`task_...` as a reader fills it: an id of that kind (the docs' `...`
    in an id never matches the id pattern)."""
    if isinstance(value, str):
        return re.sub(r"^([a-z]+)_\.\.\.$", r"\1_x", value)
    if isinstance(value, list):
        return [_placeholders_filled(v) for v in value]
    if isinstance(value, dict):
        return {k: _placeholders_filled(v) for k, v in value.items()}
    return value


def mcp_examples() -> list[tuple[str, str, Any]]:
    """(where, tool, arguments): each bullet of docs/mcp.md that begins with
    tool names, and the JSON objects in its code spans (one tool: all of
    them; one object: each tool's; as many as tools: one each, in order).
    A span with `|` or `{...}` is the shape of an answer, not arguments."""
    page = ROOT / "docs" / "mcp.md"
    lines = page.read_text(encoding="utf-8").split("\n")
    names = tool_names()
    found: list[tuple[str, str, Any]] = []
    i = 0
    while i < len(lines):
        head = re.match(r"^- ((?:`\w+`(?:, )?)+):", lines[i])
        if not head or not (tools := [t for t in re.findall(r"`(\w+)`", head[1]) if t in names]):
            i += 1
            continue
        start, text = i + 1, lines[i]
        i += 1
        while i < len(lines) and lines[i].startswith("  "):
            text += "\n" + lines[i]
            i += 1
        objects = []
        for span in re.findall(r"(?<!`)`(\{[^`]*\})`", text):
            if "|" in span or "{...}" in span:
                continue
            try:
                objects.append(json.loads(span))
            except json.JSONDecodeError as e:
                raise AssertionError(f"docs/mcp.md:{start}: not JSON: {span} ({e})") from e
        if len(tools) == 1 or len(objects) == 1:  # all for one, or one for all
            pairs = [(t, o) for t in tools for o in objects]
        elif len(objects) == len(tools):  # one each, in order
            pairs = list(zip(tools, objects, strict=True))
        else:
            raise AssertionError(
                f"docs/mcp.md:{start}: {len(tools)} tools, {len(objects)} examples"
            )
        for tool, args in pairs:
            found.append((f"docs/mcp.md:{start} {tool}", tool, _placeholders_filled(args)))
    return found


MCP_EXAMPLES = mcp_examples()
TOOLS = {t.name: t for t in ROUTE_TOOLS}


def test_the_mcp_examples_are_found() -> None:
    """Most tools have an example; the extraction must not lose them."""
    assert len({tool for _, tool, _ in MCP_EXAMPLES}) >= 25


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [pytest.param(t, a, id=w) for w, t, a in MCP_EXAMPLES],
)
def test_every_mcp_example_is_arguments_the_tool_takes(tool: str, arguments: Any) -> None:
    if tool == "decision_wait":
        jsonschema.validate(arguments, decision_wait_schema())
        return
    route_tool = TOOLS[tool]
    jsonschema.validate(arguments, route_tool.input_schema())
    if route_tool.mutating:
        path_args = {*route_tool.path_args, "project", mcp_schemas.IDEMPOTENCY_KEY_ARGUMENT}
        body = {k: v for k, v in arguments.items() if k not in path_args}
        try:
            decode_body(ROUTES[(route_tool.method, route_tool.path)], body)
        except InvalidRequest as e:
            raise AssertionError(f"{tool}: {e}") from e
