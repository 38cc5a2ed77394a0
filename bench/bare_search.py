"""The floor of the context suite over HTTP: the bare FTS5 query behind a bare endpoint.

`GET /search?q=...` escapes `q` as the packet does and runs the bare ranked
query of both tables (`MATCH ... ORDER BY rank LIMIT 21`) on one SQLite
connection, answering `{"knowledge": [[rowid, rank], ...], "tasks": [...]}`.
No authentication, no policy, no decisions, no objects: what any search
service over this file pays for HTTP plus the ranking itself, on the same
server stack as `waypost serve` (uvicorn, uvloop, httptools), so that the
packet's p50 can be compared with a floor that is also an HTTP service.

Run: `python -m bench.bare_search --db PATH --port N`.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from waypost.resolvers.context.search import escape_fts
from waypost.serving import loop_factory


def create_search_app(db: Path) -> Starlette:
    conn = sqlite3.connect(db, check_same_thread=False)

    def search(match: str) -> dict[str, list[tuple[int, float]]]:
        return {
            name: conn.execute(
                f"SELECT rowid, rank FROM {name}_fts WHERE {name}_fts MATCH ?"
                " ORDER BY rank LIMIT 21",
                (match,),
            ).fetchall()
            for name in ("knowledge", "tasks")
        }

    async def endpoint(request: Request) -> Response:
        terms = request.query_params.get("q", "").split()
        # off the event loop, as `serve` runs its reads (one thread at a time here)
        return JSONResponse(await run_in_threadpool(search, escape_fts(terms)))

    return Starlette(routes=[Route("/search", endpoint)])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bare_search")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    config = uvicorn.Config(
        create_search_app(args.db), host="127.0.0.1", port=args.port, http="auto",
        log_level="warning", access_log=False,
    )  # fmt: skip
    with asyncio.Runner(loop_factory=loop_factory("auto")) as runner:
        runner.run(uvicorn.Server(config).serve())


if __name__ == "__main__":
    main()
