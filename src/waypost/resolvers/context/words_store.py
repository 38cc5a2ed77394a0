"""The words FTS5's tokenizer makes of search terms, to search each once.

Each term of a query costs a pass over its words' lists in the index, so a
word asked for twice is paid for twice: `the` sent 32 times took 3.5 s at
100,000 records where once took 0.12 s, and spellings that the tokenizer
makes into that one word (`the.`, `thé`, `THÈ`, one decomposed) got round a
comparison of the terms as sent (12 s and more uncut; searchcostaudit). The
words are the index's own: the terms go through a table in memory with the
same tokenizer (`TOKENIZER`, as every index here uses since migration 0038),
read back with `fts5vocab`. A term of ASCII letters and digits alone (most
queries) is its own one word, in lower case, without that round trip.
"""

from __future__ import annotations

import sqlite3
import threading

Words = tuple[str, ...]

# The indexes' tokenizer (migration 0038 writes the same text): `unicode61`
# with combining marks (Mn, Mc) kept in their words (a script's own marks:
# Arabic, Hebrew, Thai, Indic vowel signs), the 25 accents SQLite folds
# dropped from the Latin letters they follow, whatever their number
# (`remove_diacritics 2`), and two kinds of mark made separators (as the
# marks SQLite's Unicode tables know were before; the 125 newer ones were
# word characters): the variation selectors U+FE00-U+FE0F (as word
# characters the emoji selector glued `⚠️` to the word after it) and the
# marks of the script-neutral blocks SQLite does not fold (overlines,
# strokes, U+0329 below a Yoruba vowel: as word characters `ile` no longer
# found `ile` + U+0329; review56).
VARIATION_SELECTORS = "".join(map(chr, range(0xFE00, 0xFE10)))
FOLDED_ACCENTS = frozenset(
    (*range(0x300, 0x305), *range(0x306, 0x30D), 0x30F, 0x311, 0x31B, 0x323, *range(0x324, 0x329),
     0x32D, 0x32E, 0x330, 0x331)
)  # fmt: skip
_GENERIC_MARK_BLOCKS = (
    (0x300, 0x370),  # Combining Diacritical Marks
    (0x1AB0, 0x1B00),  # ... Extended
    (0x1DC0, 0x1E00),  # ... Supplement
    (0x20D0, 0x2100),  # ... for Symbols
    (0xFE20, 0xFE30),  # Combining Half Marks
)
# Polytonic Greek's own marks, though they sit in the first block: the
# breathings, the perispomeni and the koronis and dialytika tonos (U+0313,
# U+0314, U+0342-U+0344), and U+0345, YPOGEGRAMMENI, which SQLite folds to
# an iota. As separators they split Greek written decomposed into letters
# (`ἀλλά` into two words, its first letter and the rest, and that letter
# alone found it; review57).
_GREEK_MARKS = frozenset((0x313, 0x314, 0x342, 0x343, 0x344, 0x345))
GENERIC_MARKS = "".join(
    chr(point)
    for start, end in _GENERIC_MARK_BLOCKS
    for point in range(start, end)
    if point not in FOLDED_ACCENTS and point not in _GREEK_MARKS
)
# The bidi controls newer than SQLite's Unicode 6.1 tables (6.3): the Arabic
# letter mark and the four isolates. Unassigned there, they were word
# characters, and right-to-left text is written with them (docs/decisions.md):
# `גרסה ⁨rollback⁩` was indexed with the word `⁨rollback⁩`, which `rollback`
# did not find (i18njourney; migration 0038). The older controls (LRM, RLM,
# the embeddings and overrides) are format characters there: separators.
NEWER_BIDI_CONTROLS = "\u061c\u2066\u2067\u2068\u2069"
TOKENIZER = (
    "unicode61 remove_diacritics 2 categories 'L* N* Co Mn Mc'"
    f" separators '{VARIATION_SELECTORS}{GENERIC_MARKS}{NEWER_BIDI_CONTROLS}'"
)

_local = threading.local()


def _tokenizer() -> sqlite3.Connection:
    """This thread's table in memory (a search's terms are read on the event
    loop or a reader thread; a connection serves the thread that made it)."""
    conn: sqlite3.Connection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute(f'CREATE VIRTUAL TABLE terms USING fts5(term, tokenize = "{TOKENIZER}")')
        conn.execute("CREATE VIRTUAL TABLE words USING fts5vocab(terms, 'instance')")
        _local.conn = conn
    return conn


def words_of(terms: list[str]) -> list[Words]:
    """The words of each term, in order (none for punctuation alone). The
    terms hold no NUL (`search_terms` refuses it, the lifecycle's search
    splits on it): FTS5's query parser ends a string there, this table not."""
    if all(term.isascii() and term.isalnum() for term in terms):
        return [(term.lower(),) for term in terms]
    conn = _tokenizer()
    found: list[list[str]] = [[] for _ in terms]
    # one transaction, rolled back: the table stays empty, and each row in a
    # transaction of its own made FTS5 flush and merge a segment per row
    # (2.2-2.7 ms of the event loop for 32 terms, 0.3 ms so; review42)
    conn.execute("BEGIN")
    try:
        conn.executemany("INSERT INTO terms (rowid, term) VALUES (?, ?)", enumerate(terms, 1))
        for doc, word in conn.execute("SELECT doc, term FROM words ORDER BY doc, offset"):
            found[doc - 1].append(word)
    finally:
        if conn.in_transaction:  # (SQLite may have ended it itself)
            conn.execute("ROLLBACK")
    return [tuple(words) for words in found]
