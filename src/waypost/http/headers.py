"""Reading a request's headers straight from its ASGI scope (the gate and the
REST shim run before, or without, a Starlette `Request`)."""

from __future__ import annotations

from starlette.types import Scope


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of header `name` (lower-case bytes, as ASGI gives them)."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None
