"""Full-text search: escaping, the time limit and the scope filters.

User text never reaches FTS5's query syntax: every whitespace-separated term
becomes one FTS5 string (Datasette's `escape_fts` does the same), with its
double quotes doubled, so operators (`AND`, `NEAR`, `*`, `^`, column filters,
parentheses) are searched as words, never obeyed. The terms are ANDed: more
terms narrow the search, which is what the packet's advice ("use more
specific terms") relies on. A term made only of punctuation holds no token;
FTS5 then drops it from the AND (alone, it matches nothing).

Ranking (BM25, with the item id then its type as the tie-break) is in
`ranking_store.py`; the lists' `q` filter (`lists_store.list_match`) does not
rank.
"""

from __future__ import annotations

import sqlite3
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from waypost.errors import InvalidRequest
from waypost.resolvers.context.params import search_terms
from waypost.resolvers.context.words_store import Words, words_of
from waypost.storage.db import SearchAbandoned, search_left

if TYPE_CHECKING:
    from waypost.runtime import Runtime

T = TypeVar("T")

# How many SQLite virtual-machine steps run between two looks at the clock.
# Datasette uses the same figure: often enough to stop within a millisecond or
# so, rare enough to cost nothing measurable.
PROGRESS_STEPS = 1000


class SearchTimedOut(Exception):
    """The search ran past its time limit and SQLite interrupted it."""


def fts_query(q: str) -> str:
    """The FTS5 query of a request's `q` (the packet's, or a list's filter):
    its terms checked (a 400 naming `q`), each escaped, each once."""
    return escape_fts(search_terms(q))


def text_only(match: str) -> str:
    """`match` (an escaped query) asked of the text columns alone: the search
    indexes also hold each row's owner words (migration 0039), which no
    user's terms may find."""
    return f"- owner : ({match})"


def owner_word(project_id: str) -> str:
    """The word of a project's rows in the indexes' `owner` column: `x` and
    the hex of the id's UTF-8 bytes (migration 0039 writes the same in SQL)."""
    return "x" + project_id.encode().hex()


def owned(match: str, project_id: str, include_shared: bool) -> str:
    """`match` (an escaped query) asked of the text columns of a project's
    own rows, and of the rows shared across projects when `include_shared`."""
    owners = f'owner : "{owner_word(project_id)}"'
    if include_shared:
        owners = f'({owners} OR owner : "shared")'
    return f"{owners} AND {text_only(match)}"


def distinct_terms(terms: list[str]) -> tuple[list[str], frozenset[Words]]:
    """`terms` less each whose words (the index's tokenizer's: words_store.py) an
    earlier term already asks for, and the words asked for. A term's phrase
    is its words in order, so two terms of the same words are one phrase,
    and matching all of them is matching each once."""
    seen: set[Words] = set()
    kept = []
    for term, words in zip(terms, words_of(terms), strict=True):
        if words not in seen:
            seen.add(words)
            kept.append(term)
    return kept, frozenset(seen)


def escape_fts(terms: list[str]) -> str:
    """An FTS5 query that matches rows holding every term, whatever the terms hold.

    A query written differently in Unicode's composed (NFC) and decomposed
    (NFD) forms matches text in either: the index holds text as it was sent,
    and the tokenizer folds the marks of Latin letters only, so `ёлка`,
    `σχέδιο`, `한국어` or `データ` typed in one form miss a record written in
    the other (a macOS client may write NFD; `Việt` did too before migration
    0037). The terms as sent, all composed and all decomposed are then ORed,
    each as before; so the tokenizer itself still drops a term with no word
    in it (judging words by Python's Unicode tables instead dropped a newer
    emoji that SQLite's take for a word).

    Each term is asked once (`distinct_terms`), and a form whose words are
    those of a form before it is left out (a Latin letter with its marks is
    the same word composed or decomposed): each costs passes over the index,
    which spellings of one word repeated 32 times ran to 12 s.
    """
    if all(term.isascii() for term in terms):
        return " ".join(map(_phrase, distinct_terms(terms)[0]))  # one form: most queries
    forms = [terms, *([unicodedata.normalize(f, t) for t in terms] for f in ("NFC", "NFD"))]
    groups: dict[frozenset[Words], str] = {}
    for form in forms:
        kept, words = distinct_terms(form)
        groups.setdefault(words, " ".join(map(_phrase, kept)))
    distinct = list(groups.values())
    if len(distinct) == 1:
        return distinct[0]
    # FTS5 takes no implicit AND after a parenthesis, but ORs whole groups
    return " OR ".join(f"({query})" for query in distinct)


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


@contextmanager
def time_limit(conn: sqlite3.Connection, limit_ms: int) -> Iterator[None]:
    """Interrupt the statements run inside after `limit_ms` milliseconds, or
    once the search's caller has gone (`SearchAbandoned`: a cancelled MCP
    call's search held a reader up to the limit for no one).

    A progress handler (Datasette's way of bounding a query) on this
    connection only; it runs on the connection's own thread, so it sees the
    statement while it ranks, and SQLite answers "interrupted" when it asks
    to stop. The handler is removed again however the block ends.
    """
    deadline = time.monotonic() + limit_ms / 1000
    left = search_left()  # read once: the handler runs some 60 times a search

    def past_deadline() -> int:
        return 1 if time.monotonic() > deadline or (left is not None and left.is_set()) else 0

    conn.set_progress_handler(past_deadline, PROGRESS_STEPS)
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            if left is not None and left.is_set():
                raise SearchAbandoned from exc
            raise SearchTimedOut from exc
        raise
    finally:
        conn.set_progress_handler(None, PROGRESS_STEPS)


@dataclass(frozen=True)
class Scope:
    """The request's knowledge-scope filters; None means the filter was not sent."""

    task_id: str | None = None
    component: str | None = None
    environment: str | None = None
    version: str | None = None


# An empty dimension applies generally; a populated one matches only a request
# that sends that filter with a value it lists (service contract section 13).
_DIMENSIONS = (
    ("scope_task_ids", "task_id"),
    ("scope_components", "component"),
    ("scope_environments", "environment"),
    ("scope_versions", "version"),
)
# As CASE, not `= '[]' OR (:p IS NOT NULL AND EXISTS ...)`: SQLite 3.40 paid
# for the EXISTS's json_each on each scoped row even when the filter was not
# sent (the content-row read of 63 ranked rows, 400 us against 215 us at 10k
# records; ctxprofile). Same value for every row: the columns are NOT NULL.
SCOPE_SQL = " AND ".join(
    f"(CASE WHEN k.{column} = '[]' THEN 1 WHEN :{param} IS NULL THEN 0"
    f" ELSE EXISTS (SELECT 1 FROM json_each(k.{column}) WHERE value = :{param}) END)"
    for column, param in _DIMENSIONS
)


def time_limit_ms(rt: Runtime) -> int:
    """`serve --search-time-limit-ms` (1,000 ms by default)."""
    return rt.settings.search_time_limit_ms if rt.settings else 1000


async def filtered_read(rt: Runtime, read: Callable[[sqlite3.Connection], T]) -> T:
    """A list read with a `q` filter: on a search reader, under the search
    time limit. Past it the list is refused (a page cut short would look
    complete): `400 invalid_request` naming `q`. Without the limit one filter
    of many common words read every match of every project for seconds,
    holding a search reader that context packets wait for."""
    limit_ms = time_limit_ms(rt)

    def bounded(conn: sqlite3.Connection) -> T:
        try:
            with time_limit(conn, limit_ms):
                return read(conn)
        except SearchTimedOut:
            raise InvalidRequest.field(
                "q", f"the q filter ran past the search time limit ({limit_ms} ms):"
                " use fewer or more specific terms",
            ) from None  # fmt: skip

    return await rt.db.search(bounded)
