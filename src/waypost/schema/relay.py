"""Relay building blocks: the Node interface, global ids and connections."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import strawberry

from waypost.errors import InvalidRequest
from waypost.pagination import Page, check_limit

T = TypeVar("T")
NodeResolver = Callable[[Any, str], Awaitable[Any]]
# type name -> coroutine(info, rest id) returning the object or None; filled by
# each domain module of the schema.
NODE_RESOLVERS: dict[str, NodeResolver] = {}


def global_id(type_name: str, rest_id: str) -> strawberry.ID:
    return strawberry.ID(base64.urlsafe_b64encode(f"{type_name}:{rest_id}".encode()).decode())


def parse_global_id(value: str) -> tuple[str, str]:
    try:
        padded = value + "=" * (-len(value) % 4)
        type_name, _, rest_id = base64.urlsafe_b64decode(padded).decode().partition(":")
    except (ValueError, UnicodeError) as exc:
        raise InvalidRequest.field("id", "malformed global id") from exc
    if not type_name or not rest_id:
        raise InvalidRequest.field("id", "malformed global id")
    return type_name, rest_id


@strawberry.interface(description="A record with a global id, resolvable with `node(id)`.")
class Node:
    id: strawberry.ID


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None


@strawberry.type
class Edge(Generic[T]):
    cursor: str
    node: T


@strawberry.type
class Connection(Generic[T]):
    edges: list[Edge[T]]
    page_info: PageInfo

    @classmethod
    def of(cls, page: Page[Any], make: Callable[[Any], T]) -> Connection[T]:
        edges = [
            Edge(cursor=c, node=make(i)) for i, c in zip(page.items, page.cursors, strict=True)
        ]
        end = page.cursors[-1] if page.cursors else None
        return cls(edges=edges, page_info=PageInfo(has_next_page=page.has_next, end_cursor=end))


def first_to_limit(first: int | None) -> int:
    """Connections take `first` from 1 to 100 (default 50)."""
    return check_limit(first, maximum=100, field_name="first")
