"""Tool input schemas, generated from the REST request models.

Each tool's schema is the JSON Schema of the very msgspec model the REST
route decodes its body (or query) with, plus the path parameters and the
optional idempotency key, so limits, enums and required fields cannot drift
from what the service enforces. References are inlined: several MCP clients
do not follow `$ref`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from waypost.ids import END, ID_CHARS, SLUG_CHARS
from waypost.resolvers.core.receipts import KEY_MAX
from waypost.rest.openapi import (
    DATE_TIMES,
    INT64_MAX,
    ITEM_MODELS,
    SEARCH_NOTE,
    SEARCH_TEXT,
    UNIQUE_ARRAYS,
    state_text_bounds,
)

# ids.END, not `$`: jsonschema matches with Python's re.search, whose `$`
# also matches before a final newline ("demo\n" passed as a slug and reached
# Waypost as another project); the lookahead means the same in ECMA-262,
# which clients validate with
ID_PATTERN = f"^{ID_CHARS}{END}"
SLUG_PATTERN = f"^{SLUG_CHARS}{END}"
IDEMPOTENCY_KEY: dict[str, Any] = {
    "type": "string",
    "pattern": f"^[!-~]{{1,{KEY_MAX}}}" + END,
    "description": (
        "Optional. The same key with the same arguments replays the first result instead of"
        " writing twice. Without one, the server derives a key from the MCP session and the"
        " request id, so a transport retry of the same request replays."
    ),
}


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = dict(defs[ref.removeprefix("#/$defs/")])
            target.pop("title", None)
            return _inline(target, defs)
        return {k: _inline(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _unique_arrays(node: Any) -> None:
    """`uniqueItems` where the REST document states it (rest/openapi.py: the
    resolvers refuse duplicate options, tags, scope values, ...), at any depth."""
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            if name in UNIQUE_ARRAYS and isinstance(prop, dict) and prop.get("type") == "array":
                prop["uniqueItems"] = True
        for value in node.values():
            _unique_arrays(value)
    elif isinstance(node, list):
        for value in node:
            _unique_arrays(value)


def _rest_bounds(node: Any) -> None:
    """What the REST document states beyond msgspec's schema (rest/openapi.py),
    at any depth: integers within 64 bits, expiries as `date-time`, a search
    `q` of 1-1,024 characters. Without them a tool's schema let through an
    argument of 2**63 that the service then refused."""
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            if not isinstance(prop, dict):
                continue
            for branch in prop.get("anyOf", [prop]):
                if not isinstance(branch, dict):
                    continue
                if branch.get("type") == "integer":
                    branch.setdefault("maximum", INT64_MAX)
                    branch.setdefault("minimum", -INT64_MAX - 1)
                elif branch.get("type") == "string" and name in DATE_TIMES:
                    branch["format"] = "date-time"
                elif branch.get("type") == "string" and name == "q":
                    branch.update(SEARCH_TEXT)
                    prop.setdefault("description", SEARCH_NOTE)
        for value in node.values():
            _rest_bounds(value)
    elif isinstance(node, list):
        for value in node:
            _rest_bounds(value)


def model_schema(model: type) -> dict[str, Any]:
    """The model's JSON Schema with every `$ref` resolved in place."""
    raw = msgspec.json.schema(model)
    defs: dict[str, Any] = raw.get("$defs", {})
    schema: dict[str, Any] = _inline(raw, defs)
    schema.pop("$defs", None)
    schema.pop("title", None)
    for (owner, field), item_model in ITEM_MODELS.items():
        if model.__name__ == owner:
            schema["properties"][field]["items"] = model_schema(item_model)
    _unique_arrays(schema)
    _rest_bounds(schema)
    state_text_bounds(model.__name__, schema.get("properties", {}))
    return schema


def tool_schema(
    *,
    path_args: dict[str, dict[str, Any]],
    model: type | None,
    mutating: bool,
) -> dict[str, Any]:
    """An object schema: path arguments first, then the model's fields."""
    properties: dict[str, Any] = dict(path_args)
    required: list[str] = list(path_args)
    if model is not None:
        inner = model_schema(model)
        for name, prop in inner.get("properties", {}).items():
            if name in properties:
                raise ValueError(f"{model.__name__}.{name} clashes with a path argument")
            properties[name] = prop
        required += inner.get("required", [])
    if mutating:
        properties["idempotency_key"] = IDEMPOTENCY_KEY
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def project_arg() -> dict[str, Any]:
    return {"type": "string", "pattern": SLUG_PATTERN, "description": "The project id (a slug)."}


def id_arg(what: str) -> dict[str, Any]:
    return {"type": "string", "pattern": ID_PATTERN, "description": f"The {what} id."}
