"""Server-made ids: the contract's alphabet and length, unique, and in time order."""

from __future__ import annotations

import base64
import time

from waypost.errors import InvalidRequest, NotFound
from waypost.ids import ID_PATTERN, _time_part, global_id_parts, new_id
from waypost.schema.relay import global_id


def test_ids_fit_the_contract_and_do_not_repeat() -> None:
    made = [new_id("task") for _ in range(20_000)]
    assert len(set(made)) == len(made)
    assert all(ID_PATTERN.match(i) for i in made)
    assert all(i.startswith("task_") and len(i) == len("task_") + 24 for i in made)


def test_the_time_part_sorts_as_the_time_does() -> None:
    times = [0, 1, 63, 64, 4095, 1_700_000_000_000, 1_800_000_000_123, 2**48 - 1]
    parts = [_time_part(ms) for ms in times]
    assert parts == sorted(parts)
    assert len(set(parts)) == len(parts) and all(len(p) == 8 for p in parts)


def test_ids_made_later_sort_after_earlier_ones() -> None:
    first = new_id("kn")
    time.sleep(0.002)
    assert new_id("kn")[: 3 + 8] > first[: 3 + 8]


def test_a_global_id_is_told_apart_from_rest_ids() -> None:
    assert global_id_parts(global_id("Decision", "dec_x")) == ("Decision", "dec_x")
    padded = base64.urlsafe_b64encode(b"Task:task_1").decode()  # as once served
    assert padded.endswith("=") and global_id_parts(padded) == ("Task", "task_1")
    made = [new_id("dec") for _ in range(2_000)] + ["demo", "a-b-c", "RGVj", "", "!!!"]
    assert [i for i in made if global_id_parts(i) is not None] == []


def test_a_record_not_found_by_its_global_id_says_which_id_to_give() -> None:
    """A dashboard that passed `id` where `restId` is taken was told only
    that there was no such decision (dashdev)."""
    given = global_id("Decision", "dec_x")
    error = NotFound("no such decision", {"decision_id": given})
    assert error.message.startswith("no such decision (")
    assert '"dec_x"' in error.message and "`restId`" in error.message
    assert error.details == {"decision_id": given}
    assert NotFound("no such decision", {"decision_id": "dec_x"}).message == "no such decision"
    # another type's global id: not the advice to give its REST id here
    wrong = NotFound("no such decision", {"decision_id": global_id("Task", "task_x")})
    assert wrong.message == (
        'no such decision (that is the global id of Task "task_x", not a REST id)'
    )
    given = global_id("Task", "t")
    refused = InvalidRequest.unknown("depends_on[0]", "no such task", given, "Task")
    assert refused.details == {"field": "depends_on[0]"}
    assert '"t": give its REST id' in refused.message


def test_an_id_is_1_to_64_of_the_alphabet() -> None:
    """docs/api.md: "Ids are opaque strings (1-64 of `A-Za-z0-9_-`)"; a
    65-character reference was refused all the same, on the same field, by
    the route's own bound (mutantaudit10)."""
    assert ID_PATTERN.match("a" * 64) and ID_PATTERN.match("a")
    assert not ID_PATTERN.match("a" * 65) and not ID_PATTERN.match("")


def test_the_time_part_is_the_low_48_bits_spelt_in_the_ordered_alphabet() -> None:
    """ids._time_part is spelt by binascii and a translation table
    (storecpu): each 6-bit digit must be the `_ORDERED` character of its
    value at every one of the 8 places, so that ids sort by time across
    every letter-digit-symbol boundary of the alphabet (63 `z` after 62
    `y`, 37 `_` after 36 `Z`), and a value past 48 bits or below zero is cut
    to its low 48 bits as the digit-by-digit spelling did (reviewed: review80)."""
    alphabet = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"

    def spelt(ms: int) -> str:
        return "".join(alphabet[(ms >> shift) & 63] for shift in range(42, -1, -6))

    for place in range(8):
        for digit in range(64):
            ms = digit << (6 * place)
            assert _time_part(ms) == spelt(ms), (place, digit)
    ordered = [d << 42 | d for d in range(64)]
    assert [_time_part(ms) for ms in ordered] == sorted(_time_part(ms) for ms in ordered)
    for ms in (2**48, 2**48 + 5, 2**60 + 123, -1, -(2**47)):
        assert _time_part(ms) == spelt(ms) == _time_part(ms & (2**48 - 1)), ms
