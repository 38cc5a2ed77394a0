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
