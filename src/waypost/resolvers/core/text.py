"""Text a record must hold: a title, a question, a summary is not blank, and
the entries of a list a person picks from can be told apart."""

from __future__ import annotations

import unicodedata

from bidi import get_display
from bidi.mirror import MIRRORED

from waypost.errors import InvalidRequest

# Characters that show nothing on their own: controls, format characters
# (zero-width space and joiner, the byte-order mark, bidi controls), separators,
# combining marks with no letter under them, and the letters fonts draw blank
# (the Hangul fillers, the Braille blank). A title of U+200B alone passed as
# "not blank" where one of spaces did not.
_SHOWS_NOTHING = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me"})
_DRAWN_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800")
# Code points not assigned yet that Unicode reserves as default-ignorable
# (Default_Ignorable_Code_Point in DerivedCoreProperties.txt): whatever they
# become, a renderer that does not know them must show nothing. A title of
# U+2065 alone passed; other unassigned code points (emoji newer than this
# Python's Unicode tables) are drawn, at least as a box, and pass.
_RESERVED_IGNORABLE = (
    range(0x2065, 0x2066),
    range(0xFFF0, 0xFFF9),
    range(0xE0000, 0xE0001),
    range(0xE0002, 0xE0020),
    range(0xE0080, 0xE0100),
    range(0xE01F0, 0xE1000),
)


def _reserved_ignorable(ch: str) -> bool:
    code = ord(ch)
    return any(code in reserved for reserved in _RESERVED_IGNORABLE)


def _visible(ch: str) -> bool:
    category = unicodedata.category(ch)
    if category == "Cn":
        return not _reserved_ignorable(ch)
    return ch not in _DRAWN_BLANK and category not in _SHOWS_NOTHING


def blank(value: str) -> bool:
    """Whether `value` shows nothing: empty, whitespace, or only characters
    that show nothing."""
    text = value.strip()
    if text and _visible(text[0]):
        return False  # the common case, decided by one character
    return not any(_visible(ch) for ch in text)


def require_text(value: str, field: str) -> None:
    """Refuse `value` when it is `blank`, naming `field`; the models bound
    lengths, and `"   "` passes any minimum length."""
    if blank(value):
        raise InvalidRequest.field(field, f"{field} must not be blank")


# Characters that break a name out of its one line, or out of the text around
# it where a terminal shows it: C0 and C1 controls (newline, tab, ESC, DEL)
# and the Unicode line and paragraph separators.
_BREAKS_A_LINE = frozenset({"Cc", "Zl", "Zp"})
# The same set as a JSON Schema pattern (ECMA-262 and Python alike), for the
# tags the decoder checks and for the names the OpenAPI document describes.
ONE_LINE_PATTERN = r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*(?![\s\S])"


def require_name(value: str, field: str) -> None:
    """Refuse a name (of a principal, of a project) that shows nothing or
    holds a control character: names are one line, printed by `waypost admin`
    and shown beside every record their owner writes."""
    require_text(value, field)
    require_one_line(value, field)
    require_drawn_in_order(value, field)


def require_shown_at_both_ends(value: str, field: str) -> None:
    """Refuse a value matched or vouched for exactly (a knowledge scope's
    environment, a decision's) that begins or ends with whitespace or a
    character that shows nothing: `prod` + U+200B is read as `prod` and is
    not it. Each end is judged as the reader sees the whole: a combining mark
    at the end (`café` decomposed) shows with its letter, and so does the
    variation selector of an emoji (`prod ⚠️`), which alone shows nothing
    and was refused (review68)."""
    if value.isascii() and value.isprintable():
        # printable ASCII (nearly every tag and scope value): composed
        # already, nothing in it hidden, the space its only whitespace, so
        # `shown_as` is its words joined by single spaces and each end shows
        # exactly when it is no space. Walking `shown_as` character by
        # character was most of a knowledge create's validation
        if value and (value[0] == " " or value[-1] == " "):
            _refuse_hidden_end(field)
        return
    composed, shown = unicodedata.normalize("NFC", value), shown_as(value)
    if value and not (shown and composed.startswith(shown[0]) and composed.endswith(shown[-1])):
        _refuse_hidden_end(field)


def _refuse_hidden_end(field: str) -> None:
    shows_nothing = "whitespace or a character that shows nothing"
    raise InvalidRequest.field(field, f"{field} must not begin or end with {shows_nothing}")


def require_one_line(value: str, field: str) -> None:
    """Refuse a label shown as one line (a name, a decision's environment)
    that holds a control character or a line or paragraph separator."""
    if any(unicodedata.category(ch) in _BREAKS_A_LINE for ch in value):
        raise InvalidRequest.field(field, f"{field} must be one line without control characters")


# The bidi embeddings and overrides (and the pop that ends them): they
# reorder how the letters after them are drawn, so text holding one reads
# as other words than it holds (U+202E + "ti peeK" is drawn "Keep it", and
# an option so written passed as distinct from "Keep it": spoofaudit).
# Right-to-left text needs none of them: its letters carry their direction,
# and the marks and isolates (U+200E, U+200F, U+061C, U+2066-U+2069) stay.
_REORDERING = frozenset("\u202a\u202b\u202c\u202d\u202e")


def require_drawn_in_order(value: str, field: str) -> None:
    """Refuse text a person picks or vouches for (an option, a name, what an
    allow confirms) that holds a bidi embedding or override."""
    if value.isascii():
        return  # U+202A-U+202E are not ASCII
    if any(ch in _REORDERING for ch in value):
        raise InvalidRequest.field(
            field,
            f"{field} must not hold a bidi embedding or override (U+202A-U+202E): they"
            " make it read as other words than it holds",
        )


# Format characters that do change what a reader sees: the zero-width
# non-joiner and joiner shape Persian and Indic letters and join emoji (a
# Persian plural with U+200C is not the word without it; man, ZWJ, woman is
# one picture where man, woman is two).
_SHAPING = frozenset("\u200c\u200d")


# Marks that never show: the combining grapheme joiner and the Khmer
# inherent vowels (default-ignorable, and shaping nothing around them).
_NEVER_SHOWN = frozenset("\u034f\u17b4\u17b5")


# Unicode's Variation_Selector property (PropList.txt): the Mongolian free
# variation selectors too, which only Mongolian letters have variants for;
# `Stop` + U+180B was drawn "Stop" and taken apart from it (securityjourney)
_MONGOLIAN_SELECTORS = frozenset("\u180b\u180c\u180d\u180f")


def _variation_selector(ch: str) -> bool:
    code = ord(ch)
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF or ch in _MONGOLIAN_SELECTORS


def shown_as(value: str) -> str:
    """`value` as a reader sees it: composed (NFC), its whitespace (and the
    letters drawn blank) collapsed to single spaces and trimmed, as a page
    shows a list's entries, and without the controls and format characters
    that show nothing (zero-width space, BOM, bidi controls), the reserved
    default-ignorable code points, the marks that never show, and a
    variation selector after a space or a Latin, Greek or Cyrillic letter
    (those have no variants: a digit, an emoji, an ideograph or a letter of
    another script may, and keeps it).
    Two entries of one list with the same `shown_as` look the same to the
    person who picks one (`Stop` and `Stop` + NBSP, `Café` and `Café` +
    U+FE0F)."""
    composed = unicodedata.normalize("NFC", value)
    shown: list[str] = []
    for i, ch in enumerate(composed):
        category = unicodedata.category(ch)
        if ch.isspace() or ch in _DRAWN_BLANK:
            shown.append(" ")
            continue
        if category in ("Cc", "Cf"):
            hidden = not (ch in _SHAPING and _between_shaped(composed, i))
        elif _variation_selector(ch):
            # of the character shown before it, if any
            hidden = not shown or _has_no_variants(shown[-1])
        else:
            # the reserved code points are unassigned (Cn): only those are looked up
            hidden = ch in _NEVER_SHOWN or (category == "Cn" and _reserved_ignorable(ch))
        if not hidden:
            shown.append(ch)
    return " ".join("".join(shown).split())


# Scripts whose letters have no standardized variation sequence (Unicode's
# StandardizedVariants.txt lists some for Myanmar, Phags-pa and CJK letters,
# and for the letterlike and mathematical symbols, named otherwise)
_UNVARIED_SCRIPTS = ("LATIN ", "GREEK ", "CYRILLIC ")


def _has_no_variants(ch: str) -> bool:
    if ch == " ":
        return True
    if ch.isascii():
        return ch.isalpha()
    return ch.isalpha() and unicodedata.name(ch, "").startswith(_UNVARIED_SCRIPTS)


def _between_shaped(text: str, i: int) -> bool:
    """Whether the joiner at `i` stands between two characters it may shape:
    beside an ASCII letter (`Deny` + U+200D) it shows nothing at all."""
    return 0 < i < len(text) - 1 and not (text[i - 1].isascii() or text[i + 1].isascii())


def drawn_as(value: str) -> tuple[str, str, str]:
    """How `value` reads: `shown_as` of it as stored, and of its letters in
    the order the Unicode bidirectional algorithm draws them, on a line of
    its own direction (as the console isolates record text) and on a
    left-to-right one. In stored order an isolate and two marks passed
    "Keep it" drawn from `it`, RLM, space, RLM, `Keep` inside U+2067 as
    another option than "Keep it" (review53). Two values with a key in
    common, at the same place, look the same.

    Drawn on one line, as a page shows a list's entries: a line break laid
    out as a break kept "yes" + newline + "no" in Hebrew apart from "yes no"
    (review54). And a bracket counts as its mirror: python-bidi does not
    turn brackets round in a right-to-left run (the algorithm's rule L4,
    which the browser applies), so RLM + "(prod) Approve", drawn "Approve
    (prod)", was compared as "(prod) Approve" (review54); two entries told
    apart only by which way a bracket faces are one too many."""
    if value.isascii() and value.isprintable():
        # printable ASCII (U+0020-U+007E), nearly every tag and option:
        # composed already, no control, format or ignorable character, and
        # no right-to-left letter, so both drawings keep the stored order;
        # only the brackets differ. Drawing a create's two tags through
        # python-bidi was a quarter of its Python time on the writer (createprofile)
        shown = " ".join(value.split())
        unmirrored = shown.translate(_ASCII_UNMIRRORED)
        return shown, unmirrored, unmirrored
    return drawn_in_general(value)


def drawn_in_general(value: str) -> tuple[str, str, str]:
    """`drawn_as` for any text, printable ASCII included."""
    line = " ".join(value.split())
    return (
        shown_as(value),
        _unmirrored(shown_as(get_display(line))),
        _unmirrored(shown_as(get_display(line, base_dir="L"))),
    )


# `_unmirrored` of the printable ASCII characters, as a str.translate table
_ASCII_UNMIRRORED = {
    ord(ch): min(ch, MIRRORED.get(ch, ch))
    for ch in map(chr, range(0x20, 0x7F))
    if min(ch, MIRRORED.get(ch, ch)) != ch
}


def _unmirrored(text: str) -> str:
    return "".join(min(ch, MIRRORED.get(ch, ch)) for ch in text)


def require_distinct(values: list[str], field: str) -> None:
    """Refuse a list with two entries a reader cannot tell apart (`café`
    composed and decomposed, `Deny` and `Deny` + U+200B, words drawn in
    another order than stored), naming the later."""
    seen: dict[tuple[int, str], str] = {}
    for index, value in enumerate(values):
        keys = list(enumerate(drawn_as(value)))
        earlier = next((seen[key] for key in keys if key in seen), None)
        if earlier is not None:
            same = "a duplicate of" if earlier == value else "shown the same as"
            raise InvalidRequest.field(
                f"{field}[{index}]", f"{field}[{index}] is {same} an earlier entry"
            )
        seen.update((key, value) for key in keys)
