"""Property: any sequence of create / correct / feedback calls leaves every earlier
revision byte-identical, and the feedback totals equal the accepted feedback calls.

Each example runs on its own fresh SQLite file with the app's lifespan entered,
driven through one event loop inside this synchronous test (hypothesis and
function-scoped async fixtures do not mix).
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Caller, MovableClock
from tests.knowledge_support import correction, kpath, new_body
from waypost.app import create_app
from waypost.resolvers.access import principals
from waypost.settings import Settings

PROJECT = "prop"
# letters, digits, punctuation and symbols, less those fonts draw blank: a
# title or tag needs one of them (docs/knowledge.md, "not blank")
DRAWN_BLANK = "\u115f\u1160\u3164\uffa0\u2800"


def visible(c: str) -> bool:
    return unicodedata.category(c)[0] in "LNPS" and c not in DRAWN_BLANK


titles = st.text(
    # no surrogates or NUL: neither is text a record may hold
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=24,
).filter(lambda t: any(visible(c) for c in t))
operations = st.one_of(
    st.tuples(st.just("create"), st.booleans()),
    st.tuples(st.just("correct"), st.integers(0, 7), st.booleans(), titles),
    st.tuples(st.just("feedback"), st.integers(0, 7), st.booleans(), st.booleans()),
)


@dataclass
class Model:
    """What the service must show: each record's accepted revisions and feedback."""

    revisions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    feedback: Counter[tuple[str, int, bool]] = field(default_factory=Counter)


def revision_bytes(db_path: Path) -> dict[tuple[bytes, int], tuple[Any, ...]]:
    """Every revision row, every column read back as stored bytes."""
    conn = sqlite3.connect(db_path)
    conn.text_factory = bytes
    try:
        rows = conn.execute("SELECT * FROM knowledge_revisions").fetchall()
    finally:
        conn.close()
    return {(row[0], row[1]): tuple(row) for row in rows}


async def apply(caller: Caller, clock: MovableClock, model: Model, op: tuple[Any, ...]) -> None:
    clock.advance(seconds=1)
    ids = list(model.revisions)
    if op[0] == "create":
        shared = op[1]
        extra = {"collection": "shared", "share_across_projects": True} if shared else {}
        r = await caller.post(kpath(PROJECT), new_body(tags=["p"], **extra))
        assert r.status_code == 201, r.text
        model.revisions[r.json()["id"]] = [r.json()]
        return
    if not ids:
        return
    record_id = ids[op[1] % len(ids)]
    current = model.revisions[record_id][-1]
    stale = op[2]
    expected = current["revision"] + (1 if stale else 0)
    if op[0] == "correct":
        # a tag takes no control characters (a title may)
        tag = "".join(c for c in op[3] if visible(c))[:64] or "tag"
        body = correction(current, expected_revision=expected, title=op[3], tags=[tag])
        r = await caller.patch(kpath(PROJECT, record_id), body)
        if stale:
            assert r.status_code == 409 and r.json()["error"]["code"] == "revision_conflict"
        else:
            assert r.status_code == 200, r.text
            model.revisions[record_id].append(r.json())
    else:
        useful = op[3]
        r = await caller.post(
            kpath(PROJECT, record_id, "feedback"), {"expected_revision": expected, "useful": useful}
        )
        if stale:
            assert r.status_code == 409 and r.json()["error"]["code"] == "revision_conflict"
        else:
            assert r.status_code == 201, r.text
            model.feedback[(record_id, current["revision"], useful)] += 1


async def check_detail(caller: Caller, model: Model) -> None:
    content = ("title", "body", "status", "scope", "tags", "applicability", "provenance")
    for record_id, accepted in model.revisions.items():
        detail = (await caller.get(kpath(PROJECT, record_id), limit=200)).json()
        history = list(reversed(detail["history"]["items"]))
        assert [h["revision"] for h in history] == [a["revision"] for a in accepted]
        for item, written in zip(history, accepted, strict=True):
            assert {k: item[k] for k in content} == {k: written[k] for k in content}
            assert item["feedback"] == {
                "useful": model.feedback[(record_id, item["revision"], True)],
                "not_useful": model.feedback[(record_id, item["revision"], False)],
            }
        assert detail["feedback"] == {
            "useful": sum(n for (i, _, u), n in model.feedback.items() if i == record_id and u),
            "not_useful": sum(
                n for (i, _, u), n in model.feedback.items() if i == record_id and not u
            ),
        }


async def run(db_path: Path, ops: list[tuple[Any, ...]]) -> None:
    clock = MovableClock()
    app = create_app(Settings(db_path=db_path, sweep_interval=3600), clock=clock)
    async with app.router.lifespan_context(app):
        rt = app.state.runtime
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://waypost.test") as client:
            made = await rt.db.write(
                lambda c: principals.create_principal(c, "human", "prop", clock.iso())
            )
            caller = Caller(client, made["principal_id"], "human", made["token"])
            r = await caller.post("/api/v1/projects", {"id": PROJECT, "name": "Property"})
            assert r.status_code == 201, r.text
            model = Model()
            seen: dict[tuple[bytes, int], tuple[Any, ...]] = {}
            for op in ops:
                await apply(caller, clock, model, op)
                now = revision_bytes(db_path)
                for key, row in seen.items():
                    assert now[key] == row, f"revision {key} changed"
                seen = now
            total_revisions = sum(len(v) for v in model.revisions.values())
            assert len(seen) == total_revisions
            await check_detail(caller, model)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(ops=st.lists(operations, min_size=1, max_size=14))
def test_revisions_stay_identical_and_feedback_totals_match(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(Path(folder) / "waypost.db", ops))
