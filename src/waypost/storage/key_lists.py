"""A list of keys as one statement parameter.

`WHERE id IN (SELECT value FROM json_each(?))` with `ids_param(ids)` is one
statement text whatever the list's length, where `IN (?, ?, ...)` is a text
per length: each its own entry in the connection's cache of prepared
statements (256), and a hundred lengths of a few look-ups would push the hot
statements out. (Keys JSON cannot carry, as token digests, are padded to a
few lengths instead: storage/coalesced.py.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable


def ids_param(ids: Iterable[str]) -> str:
    """A list of ids as one JSON parameter (`IN (SELECT value FROM json_each(?))`)."""
    return json.dumps(list(ids))
