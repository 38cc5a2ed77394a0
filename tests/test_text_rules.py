"""What counts as blank and what counts as the same entry (resolvers/core/text.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waypost.errors import InvalidRequest
from waypost.resolvers.core.text import (
    drawn_as,
    drawn_in_general,
    require_distinct,
    require_drawn_in_order,
    require_shown_at_both_ends,
    require_text,
    shown_as,
)

SHOWS_NOTHING = [
    "", "   ", "\t\n", "\u00a0", "\u3000",  # whitespace
    "\u200b", "\ufeff", "\u2060", "\u200d", "\u202e\u202c", "\u200e",  # format characters
    "\u0301", " \u0301 ",  # a combining mark with no letter under it
    "\u3164", "\u115f\u1160", "\uffa0", "\u2800",  # letters drawn blank
    "\x00\x7f", "\u0085",  # controls
    # code points not assigned yet that Unicode reserves as default-ignorable
    "\u2065", "\u2065\u2065 \u2065", "\ufff0\ufff8", "\U000e0080", "\U000e0fff",
]  # fmt: skip


@pytest.mark.parametrize("text", SHOWS_NOTHING)
def test_text_that_shows_nothing_is_blank(text: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        require_text(text, "title")
    assert refused.value.details == {"field": "title"}


# U+1FAE8 (a shaking face) is assigned after this Python's Unicode tables:
# unknown to them, it is still drawn (at least as a box)
@pytest.mark.parametrize(
    "text", ["a", " é ", "\u200b日本", "\u05e9", "🚀", "1", "-", "\u202eok", "\U0001fae8"]
)
def test_text_with_anything_to_see_is_not(text: str) -> None:
    require_text(text, "title")


def test_entries_a_reader_cannot_tell_apart_are_one_too_many() -> None:
    assert shown_as("Cafe\u0301") == shown_as("Caf\u00e9") == "Caf\u00e9"
    assert shown_as("De\u200bny\u202e") == "Deny"
    assert shown_as("Deny\u2065\U000e0080") == "Deny"
    # marks that never show, and a variation selector after a letter
    assert shown_as("De\u034fny\u17b4\ufe0f\U000e0100") == "Deny"
    # a variation selector that selects something stays: a text-style and
    # an emoji-style heart, a keycap, an ideograph's variant
    # an ideograph's variant, and a Myanmar letter's dotted form
    for kept in ("\u2764\ufe0f", "1\ufe0f\u20e3", "\u845b\U000e0100", "\u1000\ufe00"):
        assert shown_as(kept) == kept
    assert shown_as("  Go \u00a0\t now\n") == "Go now"
    require_distinct(["Deny", "Allow", "deny", "\uff21llow"], "options")  # these can be told apart
    # joiners shape what is seen: a family emoji, a Persian plural, an Indic conjunct
    require_distinct(["\U0001f468\u200d\U0001f469", "\U0001f468\U0001f469"], "tags")
    require_distinct(
        ["\u0646\u0627\u0645\u0647\u200c\u0647\u0627", "\u0646\u0627\u0645\u0647\u0647\u0627"],
        "tags",
    )
    require_distinct(["\u0915\u094d\u200d\u0937", "\u0915\u094d\u0937"], "tags")
    for values in (
        ["Deny", "Allow", "Deny"],
        ["Deny", "Allow", "Deny\u200b"],
        ["Deny", "Allow", "Deny\u200d"],  # a joiner beside ASCII shapes nothing
        ["Deny", "Allow", "Deny\ufe0f"],  # a letter has no variants
        ["Deny", "Allow", "D\u034feny"],
        ["Allow", "Deny", "Al\u200clow"],
        # a page trims and collapses whitespace, and shows no control
        ["Stop", "Go", "Stop "],
        ["Stop", "Go", " Stop"],
        ["Stop", "Go", "Stop\u00a0"],
        ["Stop", "Go", "Stop\u3000"],
        ["Stop", "Go", "Stop\t"],
        ["Stop", "Go", "Stop\n"],
        ["Stop", "Go", "Stop\u2800"],
        ["Stop", "Go", "St\x01op"],
        ["Go now", "Stop", "Go  now"],
        # a letter of Latin, Greek or Cyrillic beyond ASCII has no variants either
        ["Café", "Go", "Café\ufe0f"],
        ["Да", "Нет", "Да\ufe0f"],
        ["\u03bd\u03b1\u03b9", "\u03cc\u03c7\u03b9", "\u03bd\u03b1\u03b9\ufe0e"],  # Greek
        ["Stop", "Go", "Stop \ufe0f"],
    ):
        with pytest.raises(InvalidRequest) as refused:
            require_distinct(values, "options")
        assert refused.value.details == {"field": "options[2]"}


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40))
@settings(max_examples=2000, deadline=None)
def test_printable_ascii_is_drawn_as_any_text_is(value: str) -> None:
    """drawn_as takes a short way for printable ASCII (nearly every tag and
    option): it must draw such text exactly as the general way does."""
    assert drawn_as(value) == drawn_in_general(value)


@pytest.mark.parametrize(
    "value", ["(prod) Approve", "a]b[c", "{x}  <y>", "  spaced   out  ", "123", "", "\tTab"]
)
def test_brackets_and_spaces_are_drawn_alike_either_way(value: str) -> None:
    assert drawn_as(value) == drawn_in_general(value)


@pytest.mark.parametrize("control", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e"])
def test_every_bidi_embedding_and_override_and_their_pop_is_refused_inside(control: str) -> None:
    """docs/knowledge.md, docs/decisions.md: no bidi embedding or override
    (U+202A-U+202E), the pop U+202C included, wherever it stands."""
    with pytest.raises(InvalidRequest) as refused:
        require_drawn_in_order(f"Keep{control} it", "options[0]")
    assert refused.value.details == {"field": "options[0]"}


def test_the_marks_and_isolates_stay() -> None:
    for value in ("\u05e9\u200f ok", "a\u200eb", "\u2067\u05e9\u2069 ok", "x\u061cy"):
        require_drawn_in_order(value, "options[0]")


def test_a_variation_selector_with_nothing_before_it_shows_nothing() -> None:
    """shown_as: a variation selector is of the character shown before it,
    if any; at the start it selects nothing, so `prod` after one is `prod`
    and begins with a character that shows nothing."""
    assert shown_as("\ufe0fDeny") == shown_as(" \ufe0fDeny") == "Deny"
    with pytest.raises(InvalidRequest):
        require_distinct(["Deny", "Allow", "\ufe0fDeny"], "options")
    with pytest.raises(InvalidRequest) as refused:
        require_shown_at_both_ends("\ufe0fprod", "environment")
    assert refused.value.details == {"field": "environment"}


def test_a_joiner_beside_an_ascii_letter_shows_nothing_on_either_side() -> None:
    """_between_shaped: beside an ASCII letter a joiner shapes nothing, even
    with a letter it could shape on its other side."""
    assert shown_as("Go\u200d\u65e5") == "Go\u65e5"
    assert shown_as("\u65e5\u200dGo") == "\u65e5Go"
    for values in (["Go\u65e5", "Go\u200d\u65e5"], ["\u65e5Go", "\u65e5\u200cGo"]):
        with pytest.raises(InvalidRequest) as refused:
            require_distinct(values, "tags")
        assert refused.value.details == {"field": "tags[1]"}


@pytest.mark.parametrize("value", ["prod\t", "\tprod", "prod\x7f", "\x1bprod", "prod ", " prod"])
def test_an_ascii_value_ending_in_a_tab_or_control_is_refused_at_its_end(value: str) -> None:
    """require_shown_at_both_ends' ASCII fast path (storecpu) is for
    printable ASCII only: a tab or a control at an end shows nothing, as
    the general path judges it, and is refused (review80)."""
    with pytest.raises(InvalidRequest) as refused:
        require_shown_at_both_ends(value, "environment")
    assert refused.value.details == {"field": "environment"}
    require_shown_at_both_ends("prod\tweb", "environment")  # inside: shown at both ends
