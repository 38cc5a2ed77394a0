"""docsjourney: a directory given as `--db` is refused as a directory.

docs/operations.md ("Admin commands"): "A directory given as `--db` is
`database_unusable`", and `admin backup --db DIR` says `is a directory, not a
database file`. Every other command, and `serve`, said instead that the
directory "has N names (hard links)" (a directory's link count is 2 and more)
and sent the operator to `find / -xdev -samefile DIR` for other names that do
not exist."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.test_cli import run
from waypost.storage.db import Database, DatabaseUnusable


@pytest.mark.parametrize(
    "command",
    [["admin", "migrate"], ["admin", "principal", "list"], ["admin", "token", "list"],
     ["admin", "principal", "create", "--kind", "human", "--name", "x"],
     ["serve", "--port", "0", "--lifecycle-port", "0"]],
)  # fmt: skip
def test_a_directory_as_the_database_is_called_a_directory(
    tmp_path: Path, command: list[str]
) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    (folder / "sub").mkdir()  # a link count of 3: "3 names"
    result = run(*command, "--db", str(folder))
    assert result.exit_code == 1, result.output
    assert f"Error: database_unusable: {folder}: " in result.output, result.output
    assert "hard links" not in result.output, result.output
    assert "is a directory" in result.output, result.output


async def test_the_store_names_a_directory_as_one(tmp_path: Path) -> None:
    with pytest.raises(DatabaseUnusable, match="is a directory"):
        await Database(tmp_path).open()


def test_verify_names_a_directory_as_one(tmp_path: Path) -> None:
    """`admin verify --db DIR` said "unable to open database file" (review75);
    its code stays `verify_failed` (operations.md)."""
    result = run("admin", "verify", "--db", str(tmp_path))
    assert result.exit_code == 1, result.output
    assert f"Error: verify_failed: {tmp_path}: is a directory, not a database file" in (
        result.output
    ), result.output


@pytest.mark.parametrize(
    "command",
    [["admin", "migrate"], ["admin", "principal", "list"],
     ["serve", "--port", "0", "--lifecycle-port", "0"]],
)  # fmt: skip
def test_a_fifo_as_the_database_is_called_no_regular_file(
    tmp_path: Path, command: list[str]
) -> None:
    """`serve` said "disk I/O error" of a FIFO, the admin commands "not a
    regular file" (operatorjourney)."""
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)
    result = run(*command, "--db", str(fifo))
    assert result.exit_code == 1, result.output
    assert f"Error: database_unusable: {fifo}: not a regular file" in result.output, result.output
