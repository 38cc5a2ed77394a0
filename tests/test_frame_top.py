"""`frame_top`: the top level of a WebSocket frame the strict parser refused,
read whatever its members hold."""

from __future__ import annotations

import json

import pytest

from waypost.schema.frame_top import member_value, top_level


def test_members_are_read_at_any_depth_and_length_of_their_values() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    text = f'{{"type": "subscribe", "id": "a", "payload": {{"v": {deep}, "n": {"9" * 9000}}}}}'
    members = top_level(text)
    assert members is not None and set(members) == {"type", "id", "payload"}
    assert (member_value(members, "type"), member_value(members, "id")) == ("subscribe", "a")
    assert members["payload"].startswith('{"v": [[[') and members["payload"].endswith("}")


@pytest.mark.parametrize(
    "document",
    [{}, {"a": 1}, {"s": 'x", "y": "}],{["', "t": [1, {"u": [2, 3]}], "e": 'A"\\ \u00e9'},
     {"k": None, "b": True, "f": -1.5e3}],
)  # fmt: skip
def test_members_are_what_json_reads(document: dict[str, object]) -> None:
    for text in (json.dumps(document), json.dumps(document, indent=3)):
        members = top_level(text)
        assert members is not None
        assert {k: json.loads(v) for k, v in members.items()} == document


@pytest.mark.parametrize(
    "text", ["", "[]", '"a"', "5", "{", '{"a"}', '{"a": 1', '{"a": [1, 2}', '{"a": "x', "{a: 1}"]
)
def test_what_is_no_object_at_its_top_level_is_none(text: str) -> None:
    assert top_level(text) is None


def test_a_long_or_unreadable_member_has_no_value() -> None:
    members = top_level('{"id": ' + json.dumps("x" * 2000) + ', "n": NaNa}')
    assert members is not None
    assert member_value(members, "id") is None and member_value(members, "n") is None
    assert member_value(members, "absent") is None
