"""The baseline of the store bench: a bare Starlette endpoint, no framework of ours.

`POST /knowledge` parses the same JSON body as a knowledge create, checks
its three required fields, and commits one INSERT per request on one SQLite
connection in WAL mode with `synchronous=FULL` (the durability `serve` uses),
answering 201 with the stored row. No authentication, no idempotency
receipt, no event: the least any durable create must do.

Run: `python -m bench.bare --db PATH --port N [--loop asyncio|uvloop] [--http h11|httptools]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import time
import uuid
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from waypost.serving import loop_factory


def create_bare_app(db: Path) -> Starlette:
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS knowledge (id TEXT PRIMARY KEY, kind TEXT, title TEXT,"
        " body TEXT, tags TEXT, created_at REAL)"
    )

    async def create(request: Request) -> Response:
        try:
            data = json.loads(await request.body())
            kind, title, body = data["kind"], data["title"], data["body"]
            if not all(isinstance(v, str) for v in (kind, title, body)):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        row = (str(uuid.uuid4()), kind, title, body, json.dumps(data.get("tags", [])), time.time())
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO knowledge VALUES (?, ?, ?, ?, ?, ?)", row)
        conn.execute("COMMIT")
        keys = ("id", "kind", "title", "body", "tags", "created_at")
        return JSONResponse(dict(zip(keys, row, strict=True)), status_code=201)

    return Starlette(routes=[Route("/knowledge", create, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bare")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--loop", default="asyncio")
    parser.add_argument("--http", default="h11")
    args = parser.parse_args()
    config = uvicorn.Config(
        create_bare_app(args.db), host="127.0.0.1", port=args.port, http=args.http,
        log_level="warning", access_log=False,
    )  # fmt: skip
    with asyncio.Runner(loop_factory=loop_factory(args.loop)) as runner:
        runner.run(uvicorn.Server(config).serve())


if __name__ == "__main__":
    main()
