"""`waypost serve` on a chosen event loop and HTTP parser, for the store bench.

Run: `python -m bench.serve_variant --db PATH --port N --loop asyncio|uvloop --http h11|httptools`.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from waypost import serving
from waypost.settings import Settings


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.serve_variant")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--loop", default="asyncio")
    parser.add_argument("--http", default="h11")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    settings = Settings(db_path=args.db, port=args.port, lifecycle_port=0, sweep_interval=3600)
    serving.run(settings, loop=args.loop, http=args.http)


if __name__ == "__main__":
    main()
