"""waypost/json_text.py spells every value as `json.dumps` does: stored
text (tag lists, event data, receipt bodies) and request fingerprints of
earlier builds stay byte for byte the same."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waypost.json_text import canonical, compact, line_breaks_escaped

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(), inner, max_size=6),
    max_leaves=40,
)


@settings(max_examples=400)
@given(_values)
def test_spelled_as_json_dumps(value: Any) -> None:
    assert compact(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert canonical(value) == json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


@settings(max_examples=200)
@given(st.recursive(st.text() | st.integers(), lambda inner: st.lists(inner, max_size=4),
                    max_leaves=10))  # fmt: skip
def test_line_breaks_escaped_is_the_same_value_on_one_line(value: Any) -> None:
    """Every line reader reads it as one line (str.splitlines breaks at NEL,
    U+2028 and U+2029 too), and it is the same JSON value."""
    text = line_breaks_escaped(compact(value).encode()).decode()
    assert len(text.splitlines()) <= 1 and json.loads(text) == value


def test_every_code_point_and_the_edges() -> None:
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    value = {"z": [text, "\ud800", 1e16, 1e-5, -0.0, float("nan"), 2**70], "a": {"é": None}}
    assert compact(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert canonical(value) == json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


@pytest.mark.parametrize("spell", [compact, canonical])
def test_refuses_what_json_dumps_refuses(spell: Callable[[Any], str]) -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        spell({"when": object()})
