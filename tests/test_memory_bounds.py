"""Memory that outlives a request, bounded by what it holds and not by a count
alone (cacheaudit). The answers subscriptions share were once kept by count
only (4,096 of any size, 100 MB on a real serve after their subscriber had
gone); the memos of query text were too (850 MB on a real serve), and a
WebSocket's context kept what each of its operations memoized."""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller, Service
from tests.decisions_support import new_task, open_decision
from waypost.resolvers.access import principals
from waypost.schema import documents, schema
from waypost.schema.context import Context
from waypost.schema.fastpath import plan
from waypost.schema.limits import MAX_TOKENS
from waypost.schema.memo import TOKENS_KEPT, Memo
from waypost.schema.relay import global_id

# a text of MAX_TOKENS tokens (a 10 KB text) parses to some 2.8 MB: every
# token stays linked from the document's locations
PADDED = 40  # texts of about MAX_TOKENS tokens each: twice what TOKENS_KEPT holds


def _kept_tokens(memo: Memo[Any], tokens_of: dict[str, int]) -> int:
    """The tokens of the texts whose parsed nodes a memo keeps (a document by
    its text, a plan by its operation's), counted from the texts sent."""
    texts = [value[0].loc.source.body if isinstance(value, tuple) else key
             for key, value in memo.items.items()]  # fmt: skip
    return sum(tokens_of[text] for text in texts)


async def test_the_parsed_documents_kept_hold_a_bounded_size() -> None:
    """docs/graphql.md: "the parsed document is kept, 256 texts". By count
    alone 256 distinct texts within the body and token limits (each refused
    by the field limit afterwards) kept some 730 MB of syntax tree; a real
    serve went from 85 MB to 850 MB (cacheaudit). The latest stay kept."""
    documents._DOCUMENTS.clear()
    tokens_of: dict[str, int] = {}
    try:
        for n in range(PADDED):
            text = f"{{ u{n} " + "a " * (MAX_TOKENS - 10) + "}"
            tokens_of[text] = MAX_TOKENS - 10 + 5  # SOF, {, u, the a's, }, EOF
            found = await documents.parsed(text)
            assert not isinstance(found, Exception), found
        assert _kept_tokens(documents._DOCUMENTS, tokens_of) <= TOKENS_KEPT
        assert documents._DOCUMENTS.get(text) is found  # the latest is kept
    finally:
        documents._DOCUMENTS.clear()


async def test_an_operation_leaves_nothing_in_its_sockets_context(
    service: Service, human: Caller, project: str
) -> None:
    """A WebSocket keeps one Context for all its operations (view.get_context,
    schema/execution.py `_fresh_loaders`): what an operation memoizes there
    must go with the operation, as its loaders do, or a socket that runs
    query after query (each with its own aliases) grows without end."""
    task = await new_task(human)
    decision = await open_decision(human, [task])
    node = global_id("Decision", decision["id"])
    actor = await service.rt.db.read(lambda conn: principals.authenticate(conn, human.token, "api"))
    context = Context(rt=service.rt, actor=actor, token=human.token)  # one socket's
    for n in range(20):
        # `node` is not on the fast path: graphql-core runs it, and
        # Decision.generations asks whether `affected { task }` is selected
        alias = f"a{n}_" + "x" * 1000
        asked = f"""query {{ {alias}: node(id: "{node}") {{ ... on Decision {{
          generations {{ nodes {{ affected {{ task {{ id }} }} }} }} }} }} }}"""
        result = await schema.execute(asked, context_value=context)
        assert not result.errors, result.errors
        assert result.data is not None
    # the last operation's entries at most (none once the memo goes with it)
    earlier = [key for key in context.memo if not any("a19_" in str(part) for part in key)]
    assert not earlier, f"{len(earlier)} entries of earlier operations left in the socket's context"


async def test_the_memos_of_valid_queries_hold_a_bounded_size(
    service: Service, human: Caller
) -> None:
    """Valid queries within every limit (a comment is a token too) run through
    the whole pipeline: the fast path's plans keep each one's operation, and
    with it every token of its text; by count alone 300 of them took a real
    serve from 85 MB to 364 MB, as much with the documents bounded (cacheaudit)."""
    actor = await service.rt.db.read(lambda conn: principals.authenticate(conn, human.token, "api"))
    memos: list[Memo[Any]] = [documents._DOCUMENTS, plan._PLANS]
    for memo in memos:
        memo.clear()
    tokens_of: dict[str, int] = {}
    try:
        for n in range(PADDED):
            text = f"query Q{n} {{ me {{ id }} }}\n" + "#\n" * (MAX_TOKENS - 20)
            tokens_of[text] = MAX_TOKENS - 20 + 10
            context = Context(rt=service.rt, actor=actor, token=human.token)
            result = await schema.execute(text, context_value=context)
            assert not result.errors, result.errors
        for memo in memos:
            assert _kept_tokens(memo, tokens_of) <= TOKENS_KEPT
        assert plan._PLANS.items and documents._DOCUMENTS.get(text) is not None
    finally:
        for memo in memos:
            memo.clear()
