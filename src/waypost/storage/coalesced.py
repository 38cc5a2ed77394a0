"""Point look-ups by key, coalesced: while writes are under way, the
requests one pass of the event loop handles ask for their keys together, in
one statement on the loop's own connection (`Database.read_point`).

Why: the sqlite3 module releases the GIL around every statement, and under
concurrent writes the writer thread takes it each time and the event loop
waits to get it back. A bearer token's look-up and an idempotency key's
receipt look-up per create cost more in those hand-offs than in SQLite
(docs/operations.md, "What the GIL costs"). Asked together, 16 concurrent
creates make a few statements instead of 32.

Each key still reads the latest commit at the moment its statement runs,
which is after its request arrived: nothing is cached between passes.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

from waypost.storage.db import Database

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# keys per statement: far below SQLite's 32,766 bound variables, and a
# statement's plan stays the same few point searches
CHUNK = 200
# The sizes a batch is padded to (its last key repeated): the statement's
# text grows with its keys, and every size its own text would have put up
# to 200 texts of each look-up into the connection's cache of 256 prepared
# statements, pushing out the hot ones; these are nine.
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, CHUNK)


def padded(keys: list[K]) -> list[K]:
    """`keys` (1 to CHUNK of them) with the last repeated up to the next of SIZES."""
    size = next(size for size in SIZES if size >= len(keys))
    return keys + keys[-1:] * (size - len(keys))


ReadMany = Callable[[sqlite3.Connection, Sequence[K]], dict[K, V]]
Waiting = dict[K, list[asyncio.Future[V | None]]]


class Coalesced(Generic[K, V]):
    """`get(key)` answers what `read_many(conn, keys)` found for `key` (None
    if nothing); the keys asked for while the loop runs other callbacks are
    read together, soon after the first of them was asked for."""

    def __init__(self, db: Database, read_many: ReadMany[K, V]) -> None:
        self._db = db
        self._read_many = read_many
        self._waiting: Waiting[K, V] = {}
        self._reads: set[asyncio.Task[None]] = set()  # held until done (asyncio keeps weak ones)

    async def get(self, key: K) -> V | None:
        if not self._waiting and self._db.unanswered_writes() == 0:
            # no write under way, so no writer thread to take the GIL: read
            # now, as a request alone would (waiting for the pass to end cost
            # a sequential create 0.3 ms)
            found = await self._db.read_point(lambda conn: self._read_many(conn, [key]))
            return found.get(key)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[V | None] = loop.create_future()
        if not self._waiting:
            loop.call_soon(self._flush)
        self._waiting.setdefault(key, []).append(future)
        return await future

    def _flush(self) -> None:
        waiting, self._waiting = self._waiting, {}
        keys = list(waiting)
        for start in range(0, len(keys), CHUNK):
            chunk = keys[start : start + CHUNK]
            read = asyncio.ensure_future(self._answer(chunk, waiting))
            self._reads.add(read)
            read.add_done_callback(self._reads.discard)

    async def _answer(self, keys: list[K], waiting: Waiting[K, V]) -> None:
        try:
            asked = padded(keys)
            found = await self._db.read_point(lambda conn: self._read_many(conn, asked))
        except Exception as exc:  # a refusal of the store (busy, damaged): every asker's
            for key in keys:
                for future in waiting[key]:
                    if not future.done():
                        future.set_exception(exc)
            return
        except BaseException:  # cancelled (the loop closing): nobody is answered
            for key in keys:
                for future in waiting[key]:
                    future.cancel()
            raise
        for key in keys:
            for future in waiting[key]:
                if not future.done():  # its request went away meanwhile
                    future.set_result(found.get(key))
