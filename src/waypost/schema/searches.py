"""How many full-text searches one GraphQL operation may run.

Each search (a context packet, `tasks(q:)`, `knowledge(q:)`) is bounded by
the search time limit, but aliases multiply them: thirty aliased `context`
fields of common words cost one request 19 CPU-seconds and held the two
places of the search lane for 10 s, so another client's packet waited as
long. An operation may start MAX_SEARCHES; the next is refused by name, and
the others answer as usual.
"""

from __future__ import annotations

from waypost.errors import InvalidRequest
from waypost.schema.loaders import Loaders

MAX_SEARCHES = 5


def start_search(loaders: Loaders) -> None:
    """Count one search of this operation (its loaders are the operation's own)."""
    loaders.searches += 1
    if loaders.searches > MAX_SEARCHES:
        raise InvalidRequest.field(
            "q",
            f"one GraphQL operation runs at most {MAX_SEARCHES} full-text searches (context,"
            " tasks(q:), knowledge(q:)); ask for the others in another request",
        )
