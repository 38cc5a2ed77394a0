"""Cursors and global ids decode only as their encoder writes them."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import Caller
from waypost.b64url import decode_b64url, encode_b64url

ALPHABET = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


@given(st.binary(max_size=64))
def test_what_the_encoder_writes_decodes_and_padded_only_where_asked(raw: bytes) -> None:
    text = encode_b64url(raw)
    assert set(text) <= set(ALPHABET)
    assert decode_b64url(text) == raw
    padded = text + "=" * (-len(text) % 4)
    assert decode_b64url(padded, padded=True) == raw  # global ids from before were padded
    if padded != text:  # a cursor is never served padded: it is malformed so
        with pytest.raises(ValueError):
            decode_b64url(padded)


async def test_a_padded_cursor_is_malformed_over_rest_and_graphql(
    human: Caller, project: str
) -> None:
    """`=` is outside the cursor's alphabet; a padded cursor read as the
    unpadded one (docs/api.md: a malformed cursor is 400)."""
    for rules in map(str, range(11)):  # revision 12: a position of two digits
        revision = (await human.get("/api/v1/projects/demo/policy")).json()["revision"]
        r = await human.patch("/api/v1/projects/demo/policy",
                              {"expected_revision": revision, "rules": rules})  # fmt: skip
        assert r.status_code == 200, r.text
    page = (await human.get("/api/v1/projects/demo/policy/history", limit=1)).json()
    cursor = page["next_cursor"]
    assert (
        len(cursor) % 4
        and (
            await human.get("/api/v1/projects/demo/policy/history", limit=1, cursor=cursor)
        ).status_code
        == 200
    )
    padded = cursor + "=" * (-len(cursor) % 4)
    r = await human.get("/api/v1/projects/demo/policy/history", limit=1, cursor=padded)
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "cursor", r.text
    query = """query($after: String) { project(id: "demo") {
        policyHistory(first: 1, after: $after) { nodes { revision } } } }"""
    answer = await human.gql(query, {"after": padded})
    assert answer["errors"][0]["extensions"]["code"] == "invalid_request", answer


@given(
    st.binary(min_size=1, max_size=64),
    st.text(alphabet=st.characters(exclude_characters=ALPHABET + "="), min_size=1, max_size=4),
    st.integers(min_value=0),
)
def test_a_character_outside_the_alphabet_anywhere_is_refused(
    raw: bytes, junk: str, where: int
) -> None:
    text = encode_b64url(raw)
    at = where % (len(text) + 1)
    with pytest.raises(ValueError):
        decode_b64url(text[:at] + junk + text[at:])


@given(st.binary(min_size=1, max_size=64).filter(lambda raw: len(raw) % 3 != 0))
def test_a_last_character_whose_unused_bits_differ_is_refused(raw: bytes) -> None:
    """Its unused low bits were ignored, so two texts read as one cursor."""
    text = encode_b64url(raw)
    sibling = ALPHABET[ALPHABET.index(text[-1]) ^ 1]
    with pytest.raises(ValueError):
        decode_b64url(text[:-1] + sibling)


@pytest.mark.parametrize("text", ["A", "AB=", "AB===", "=", "QQ=="[:3] + "=="])
def test_broken_lengths_and_padding_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        decode_b64url(text)


@given(st.binary(min_size=1, max_size=64))
def test_where_padding_is_taken_only_the_encoders_padding_is(raw: bytes) -> None:
    """docs/api.md: a global id "may also come padded, as ids were once
    served": as an encoder pads it, not with any number of `=` (mutantaudit10)."""
    text = encode_b64url(raw)
    padded = text + "=" * (-len(text) % 4)
    assert decode_b64url(padded, padded=True) == raw
    for wrong in {text + "=" * n for n in range(1, 4)} - {padded}:
        with pytest.raises(ValueError):
            decode_b64url(wrong, padded=True)
