"""The execution limit: how many objects one operation's result may hold.

The node limit (`limits.py`) bounds connections before anything runs, from
their `first`/`last`. Plain lists have no `first`: a digest's lists (up to
200 decisions each), a decision's affected tasks, a task's activities. They
nest through references (`digest { pendingDecisions { current { affected {
task { project { digest ...`), so a short query could ask for millions of
objects, and completing them held the event loop for seconds (150 pending
decisions: 90,000 objects, 4 MB, 4.7 s). Counting those lists at their
worst case before execution would refuse the console's own inbox query, so
the limit is counted as the result is built instead: every object completed
(by graphql-core, `execution.py`, or by the fast path, `fastpath/run.py`)
counts one, and so does every field of an object type, once per parent,
when it starts. The fields count at their start because graphql-core starts
the fields of a whole level before their values complete: counting only
completed objects, 28 aliased `digest` fields under 10,000 projects had
started 280,000 resolvers (10.8 s) before the count reached the limit. Past
the limit no field starts, and the answer is one error and no data: a
partial result would look like a complete one with holes. A list of task ids
(`execution._ID_LISTS`) counts its items as it starts too, for the same
reason, and its items are not counted again as they complete.
"""

from __future__ import annotations

from graphql import (
    GraphQLError,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLUnionType,
)

# The node limit's figure. At the limit (a 647 KB result) the fast path
# answered in 0.33 s on a reader thread, graphql-core's path in 2.03 s on the
# event loop (docs/graphql.md, "Limits").
MAX_OBJECTS = 50_000
# Characters of text (strings) in one result. Objects alone do not bound a
# result's size: 20 tasks of 64 KiB descriptions reached through `dependsOn`
# under `tasks(last: 100)`, aliased four times, made 2,103 objects and 1.96
# GB of JSON (40 s on the loop, 3.8 GB of memory). 32 Mi characters hold 500
# full pages of 64 KiB knowledge bodies.
MAX_TEXT = 32 * 1024 * 1024


class ObjectsExceeded(Exception):
    """The operation's result passed MAX_OBJECTS objects or MAX_TEXT characters."""


def holds_objects(t: GraphQLOutputType) -> bool:
    """Whether a field of this type counts when it starts (see the module)."""
    while isinstance(t, GraphQLNonNull | GraphQLList):
        t = t.of_type
    return isinstance(t, GraphQLObjectType | GraphQLInterfaceType | GraphQLUnionType)


def text_of(value: object) -> int:
    """What a completed leaf adds to the text count."""
    return len(value) if type(value) is str else 0


def max_objects(rt: object) -> int:
    """The object limit `serve` was started with, else MAX_OBJECTS."""
    settings = getattr(rt, "settings", None)
    configured = getattr(settings, "graphql_max_objects", None)
    return MAX_OBJECTS if configured is None else int(configured)


def exceeded_error(limit: int, mutation: bool = False) -> GraphQLError:
    if mutation:
        # its root fields all ran (execution.py): what they wrote is read by
        # replaying their keys, never by writing again under new ones (and
        # within the 200 characters a message keeps, decoding.py)
        message = (
            f"The result exceeds the execution limits ({limit:,} objects, {MAX_TEXT:,}"
            " characters of text). Every mutation ran: replay the same idempotency keys"
            " with a smaller selection to read what each did."
        )
    else:
        message = (
            f"The result exceeds the execution limits of {limit:,} objects and"
            f" {MAX_TEXT:,} characters of text: select fewer nested lists, references and"
            " long text fields, or page through them in several requests."
        )
    # the code of the other limits (limits.py)
    return GraphQLError(message, extensions={"code": "invalid_request"})
