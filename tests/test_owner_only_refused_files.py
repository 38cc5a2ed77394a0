"""`serve` makes an older build's 0644 database owner-only at start (section
14, docs/operations.md "File permissions"); a `--db` it then refuses (a
directory, a file that is no database, a file with a second name) is the
operator's mistake, not an older build's database: its mode stays as it was."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.test_cli import run

SERVE = ["serve", "--port", "0", "--lifecycle-port", "0"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_directory_given_as_the_database_keeps_its_mode(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    folder.chmod(0o755)
    result = run(*SERVE, "--db", str(folder))
    assert "is a directory" in result.output, result.output
    assert _mode(folder) == 0o755, oct(_mode(folder))  # was made 0600: no one may enter it


def test_a_file_that_is_no_database_keeps_its_mode(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database, and meant for everyone to read\n")
    notes.chmod(0o644)
    result = run(*SERVE, "--db", str(notes))
    assert "file is not a database" in result.output, result.output
    assert _mode(notes) == 0o644, oct(_mode(notes))


def test_a_refused_hard_linked_file_keeps_its_mode(tmp_path: Path) -> None:
    made = run("admin", "migrate", "--db", str(tmp_path / "one.db"))
    assert made.exit_code == 0, made.output
    (tmp_path / "one.db").chmod(0o644)
    os.link(tmp_path / "one.db", tmp_path / "two.db")
    result = run(*SERVE, "--db", str(tmp_path / "one.db"))
    assert "2 names" in result.output, result.output
    assert _mode(tmp_path / "two.db") == 0o644, oct(_mode(tmp_path / "two.db"))
