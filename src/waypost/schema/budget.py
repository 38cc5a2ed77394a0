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
counts one, and the operation stops at the first object past the limit.
Its answer is then one error and no data: a partial result would look like
a complete one with holes.
"""

from __future__ import annotations

from graphql import GraphQLError

# The node limit's figure: a query within it that selects one object per
# node stays within this too. Measured at 49,603 objects (1.2 MB): the fast
# path answers in about 0.45 s on a reader thread, graphql-core's path in
# about 1.8 s on the event loop (docs/graphql.md, "Limits").
MAX_OBJECTS = 50_000
# Characters of text (strings) in one result. Objects alone do not bound a
# result's size: 20 tasks of 64 KiB descriptions reached through `dependsOn`
# under `tasks(last: 100)`, aliased four times, made 2,103 objects and 1.96
# GB of JSON (40 s on the loop, 3.8 GB of memory). 32 Mi characters hold 500
# full pages of 64 KiB knowledge bodies.
MAX_TEXT = 32 * 1024 * 1024


class ObjectsExceeded(Exception):
    """The operation's result passed MAX_OBJECTS objects or MAX_TEXT characters."""


def text_of(value: object) -> int:
    """What a completed leaf adds to the text count."""
    return len(value) if type(value) is str else 0


def exceeded_error() -> GraphQLError:
    return GraphQLError(
        f"The result exceeds the execution limits of {MAX_OBJECTS:,} objects and"
        f" {MAX_TEXT:,} characters of text: select fewer nested lists, references and"
        " long text fields, or page through them in several requests.",
        extensions={"code": "invalid_request"},  # as the other limits (limits.py)
    )
