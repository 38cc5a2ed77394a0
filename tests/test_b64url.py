"""Cursors and global ids decode only as their encoder writes them."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from waypost.b64url import decode_b64url, encode_b64url

ALPHABET = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


@given(st.binary(max_size=64))
def test_what_the_encoder_writes_decodes_padded_or_not(raw: bytes) -> None:
    text = encode_b64url(raw)
    assert set(text) <= set(ALPHABET)
    assert decode_b64url(text) == raw
    assert decode_b64url(text + "=" * (-len(text) % 4)) == raw  # ids from before were padded


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
