"""The REST shim: strict decoding and envelopes over the resolvers."""

from __future__ import annotations

from waypost.rest import context, decisions, knowledge, principals, projects, reviews, tasks
from waypost.rest.routing import RouteTable

# Each domain module keeps its own table; add a domain by listing it here.
TABLES: list[RouteTable] = [
    principals.table,
    projects.table,
    knowledge.table,
    tasks.table,
    decisions.table,
    context.table,
    reviews.table,
]
