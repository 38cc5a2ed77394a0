"""What the package says about itself: one version, reported alike by the
installed metadata, the OpenAPI document and the MCP server (wheelaudit)."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import waypost

ROOT = Path(__file__).resolve().parent.parent


def test_the_version_is_spelled_once() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # a literal version in [project] beside __version__ could drift from it
    assert "version" not in config["project"]
    assert "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "waypost.__version__"}
    assert importlib.metadata.version("waypost") == waypost.__version__


def test_the_source_distribution_carries_what_the_tests_read(tmp_path: Path) -> None:
    """setuptools alone took tests/test_*.py and left out conftest.py, the
    support modules and what they read: no test ran from the sdist."""
    # built from a copy without the checkout's egg-info, whose SOURCES.txt
    # from an earlier build setuptools would take files from
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", "build", "*.db*"
    ))  # fmt: skip
    built = subprocess.run(
        [sys.executable, "-c",
         "import sys, setuptools.build_meta as b; print(b.build_sdist(sys.argv[1]))",
         str(tmp_path)],
        cwd=tree, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    with tarfile.open(tmp_path / built.stdout.split()[-1]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    tracked = subprocess.run(
        ["git", "ls-files", "tests", "docs", "bench"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    if tracked:  # a checkout (an unpacked sdist has no git: its own files are what it has)
        assert set(tracked) - names == set()
    assert {"schema.graphql", "constraints.txt", "Makefile", "tests/conftest.py"} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".db"))]
