"""Requests the whole pipeline has answered by the fast path, to answer again
without it.

A dashboard sends the same query text with the same variables again and
again. Once Strawberry's pipeline has answered such a request by the fast
path (the text parsed, passed the token limit, validation and the query
limits, and the plan ran without an error), all of that is known to hold for
the next request with the same text, operation name and variables: each of
those steps depends on nothing else (schema/memo.py). The view then sends
such a request straight to the fast path's read unit (`view.WaypostGraphQL`),
doing what the pipeline does around it: the operation named on the
request's log line, the operations metric, the body `{"data": ...}`.

The key holds the request's own values, so two requests share an entry
exactly when the pipeline would run identically for both (variables must be
plain JSON: `memo.variables_key`). A request with anything else in its body
(`extensions`, a batch) never has a key.
"""

from __future__ import annotations

from typing import Any

from waypost.schema.limits import CACHED_QUERIES
from waypost.schema.memo import Memo, variables_key

# (query text, operation name, variables key)
Key = tuple[str, str | None, str]


class Known:
    """What the pipeline found for a key: the plan and the operation's name."""

    __slots__ = ("name", "plan")

    def __init__(self, plan: Any, name: str | None) -> None:
        self.plan = plan
        self.name = name


KNOWN: Memo[Known] = Memo(CACHED_QUERIES)


def request_key(body: object) -> Key | None:
    """The key of a parsed request body, None when it has none (see above)."""
    if type(body) is not dict or not body.keys() <= {"query", "variables", "operationName"}:
        return None
    query, name, variables = body.get("query"), body.get("operationName"), body.get("variables")
    if type(query) is not str or not (name is None or type(name) is str):
        return None
    if not (variables is None or type(variables) is dict):
        return None
    found = variables_key(variables)
    return None if found is None else (query, name, found)
