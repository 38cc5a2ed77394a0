"""Placeholder, replaced below."""

from __future__ import annotations

from pathlib import Path


async def run_suite(directory: Path) -> None:
    raise SystemExit("not yet")
