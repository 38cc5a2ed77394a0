"""Property: any `q` (quotes, FTS5 operators, NUL, lone surrogates, 32 terms of
punctuation) answers 200 or a 400 naming `q`, never a 5xx, on the context
route, both list routes and GraphQL. One service serves every example (the
property is about one request at a time)."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.test_knowledge_fuzz import FUZZ, PROJECT, running_service, setup_targets
from waypost.errors import InvalidRequest
from waypost.resolvers.context.params import search_terms

OPERATORS = ["AND", "OR", "NOT", "NEAR", "NEAR(", ")", "(", "*", "^", ":", "title:", "+", "-",
             '"', '""', "'", "{", "}", "\\", "\x00", "\ud800", "\udfff", "%", "&", "#"]  # fmt: skip
any_text = st.text(st.characters(exclude_categories=()), max_size=12)  # surrogates too
punctuation = st.text(st.sampled_from(list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")), min_size=1)
term = st.one_of(st.sampled_from(OPERATORS), any_text, punctuation, st.just("record"))
queries = st.one_of(
    st.lists(term, max_size=34).map(" ".join),
    st.lists(punctuation, min_size=32, max_size=32).map(" ".join),
    any_text,
    st.text(max_size=1100),
)


DOCUMENT = (
    "query($p: String!, $q: String!) { project(id: $p) {"
    " context(q: $q) { truncated items { __typename } }"
    " knowledge(q: $q) { edges { cursor } } tasks(q: $q) { edges { cursor } } } }"
)


def raw_query(q: str) -> str:
    # the exact bytes a client may put on the wire, unpaired surrogates included
    return urllib.parse.quote(q.encode("utf-8", "surrogatepass"), safe="")


def check_rest(status: int, body: dict[str, Any]) -> None:
    assert status in (200, 400), body
    if status == 400:
        assert body["error"]["details"]["field"] == "q", body


def check_graphql(status: int, body: dict[str, Any]) -> None:
    assert status in (200, 400), body
    errors = body.get("errors") or []
    for error in errors:
        extensions = error["extensions"]
        assert extensions["code"] == "invalid_request", error
        # a variable the strict JSON parser refuses names its JSON path instead
        assert extensions.get("field") in ("q", "variables.q"), error


def test_any_q_is_a_200_or_a_400_naming_q(tmp_path: Path) -> None:
    with running_service(tmp_path / "waypost.db") as (loop, caller):
        setup_targets(loop, caller)

        async def ask(q: str) -> None:
            for route in ("context", "knowledge", "tasks"):
                url = f"/api/v1/projects/{PROJECT}/{route}?q={raw_query(q)}"
                r = await caller.client.get(url, headers=caller.headers())
                check_rest(r.status_code, r.json())
            variables = {"p": PROJECT, "q": q}
            # ASCII JSON: unpaired surrogates travel as \\ud800 escapes
            raw = json.dumps({"query": DOCUMENT, "variables": variables}).encode()
            r = await caller.client.post(
                "/graphql",
                content=raw,
                headers={**caller.headers(), "Content-Type": "application/json"},
            )
            check_graphql(r.status_code, r.json())

        @FUZZ
        @given(q=queries)
        def check(q: str) -> None:
            loop.run_until_complete(ask(q))

        check()


def test_a_lone_surrogate_that_reaches_the_resolver_is_a_400_naming_q() -> None:
    # HTTP refuses it earlier (strict JSON, GraphQL's own parser, URL decoding
    # replaces it); the resolver refuses it too, as the store could not take it
    for field in ("q", "other"):
        with pytest.raises(InvalidRequest) as caught:
            search_terms("a \ud800 b", field)
        assert caught.value.details == {"field": field}
