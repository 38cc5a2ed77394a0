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

from waypost import ids
from waypost.ids import END, SLUG_CHARS
from waypost.resolvers.core.receipts import KEY_MAX
from waypost.rest.openapi import ITEM_MODELS, property_bounds, state_text_bounds

# ids.END, not `$`: jsonschema matches with Python's re.search, whose `$`
# also matches before a final newline ("demo\n" passed as a slug and reached
# Waypost as another project); the lookahead means the same in ECMA-262,
# which clients validate with
ID_PATTERN = ids.ID_PATTERN.pattern  # the one the service checks ids with
SLUG_PATTERN = f"^{SLUG_CHARS}{END}"
IDEMPOTENCY_KEY_ARGUMENT = "idempotency_key"
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
            # a model's docstring: its first paragraph is for the caller, the
            # rest is the code's (knowledge_correct's scope told an agent
            # about "a 400"; mcpjourney)
            if isinstance(target.get("description"), str):
                target["description"] = target["description"].split("\n\n")[0]
            return _inline(target, defs)
        return {k: _inline(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _rest_bounds(node: Any, *, in_query: bool) -> None:
    """What the REST document states beyond msgspec's schema, at any depth
    (nested models are inlined here): rest/openapi.py's property_bounds.
    Without it a tool's schema let through an argument of 2**63 that the
    service then refused."""
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            if isinstance(prop, dict):
                property_bounds(name, prop, in_query=in_query)
        for value in node.values():
            _rest_bounds(value, in_query=in_query)
    elif isinstance(node, list):
        for value in node:
            _rest_bounds(value, in_query=in_query)


def model_schema(model: type, *, in_query: bool) -> dict[str, Any]:
    """The model's JSON Schema with every `$ref` resolved in place; a route's
    query model (`in_query`) is bounded as REST bounds query parameters."""
    raw = msgspec.json.schema(model)
    defs: dict[str, Any] = raw.get("$defs", {})
    schema: dict[str, Any] = _inline(raw, defs)
    schema.pop("$defs", None)
    schema.pop("title", None)
    for (owner, field), item_model in ITEM_MODELS.items():
        if model.__name__ == owner:
            schema["properties"][field]["items"] = model_schema(item_model, in_query=in_query)
    _rest_bounds(schema, in_query=in_query)
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
        inner = model_schema(model, in_query=not mutating)
        for name, prop in inner.get("properties", {}).items():
            if name in properties:
                raise ValueError(f"{model.__name__}.{name} clashes with a path argument")
            properties[name] = prop
        required += inner.get("required", [])
    if mutating:
        properties[IDEMPOTENCY_KEY_ARGUMENT] = IDEMPOTENCY_KEY
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
