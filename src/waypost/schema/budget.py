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


class ObjectsExceeded(Exception):
    """The operation's result passed MAX_OBJECTS objects."""


def exceeded_error() -> GraphQLError:
    return GraphQLError(
        f"The result exceeds the execution limit of {MAX_OBJECTS:,} objects: select fewer"
        " nested lists and references, or page through them in several requests.",
        extensions={"code": "invalid_request"},  # as the other limits (limits.py)
    )
