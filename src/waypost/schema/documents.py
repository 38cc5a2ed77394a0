"""Parsing and validating GraphQL documents without stalling the event loop.

graphql-core parses about a microsecond per character and validates a
document of many fragment spreads in tens of milliseconds, all in Python,
holding the GIL. Done on the event loop, or on as many threads as requests
arrived, a few dozen such documents at once delayed every other request
(even `/healthz`) by seconds. So a document is parsed once per text (one
memo shared by the request rules and Strawberry's pipeline), a long one on a
worker thread, and that work and all validation run one at a time
(`off_loop`, its documents lane): the loop then competes for the GIL with
that thread (and the introspection lane's, when one runs), and a heavy
document queues behind other heavy documents instead of in front of
everything. Repeated texts skip all of it (the memos here and in
`limits.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from graphql import DocumentNode, GraphQLError, parse
from strawberry.extensions import SchemaExtension

from waypost.schema.limits import CACHED_QUERIES, MAX_TOKENS
from waypost.schema.memo import TOKENS_KEPT, Memo, tokens_kept
from waypost.schema.offload import off_loop

# Parsed on the loop up to this length: a few milliseconds at most, and no
# wait behind heavy documents for the short queries dashboards send.
INLINE_PARSE_CHARS = 2_000

# query text -> its document, or the syntax error the pipeline reports
_DOCUMENTS: Memo[DocumentNode | GraphQLError] = Memo(CACHED_QUERIES, tokens_kept, TOKENS_KEPT)


def _parse(query: str) -> DocumentNode | GraphQLError:
    try:
        return parse(query, max_tokens=MAX_TOKENS)
    except GraphQLError as error:
        # kept in the memo: without the parser's frames (and its tokens)
        return error.with_traceback(None)


async def parsed(query: str) -> DocumentNode | GraphQLError:
    """The document of `query`, or its syntax error (the token limit among them)."""
    found = _DOCUMENTS.get(query)
    if found is None:
        if len(query) <= INLINE_PARSE_CHARS:
            found = _parse(query)
        else:
            found = await off_loop(_parse, query)
        _DOCUMENTS.put(query, found)
    return found


class ParsedDocument(SchemaExtension):
    """Strawberry's parsing step, served from `parsed` (replaces ParserCache)."""

    async def on_parse(self) -> AsyncIterator[None]:
        ctx = self.execution_context
        if ctx.query is not None:
            found = await parsed(ctx.query)
            if isinstance(found, GraphQLError):
                # a copy: raising the memo's own error would chain every
                # request's frames onto its traceback, kept while it is cached
                raise GraphQLError(
                    found.message,
                    source=found.source,
                    positions=found.positions,
                    extensions=found.extensions,
                )
            ctx.graphql_document = found
        yield
