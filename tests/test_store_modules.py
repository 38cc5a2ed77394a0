"""The domain packages keep their SQL in store modules (`store.py`, and
`<concept>_store.py` where one concept's SQL outgrows it, like
`tasks/ready_store.py`): operation modules hold the rules and call store
functions, so a second engine could stand behind the same operations
(issue 8). A statement run anywhere else in them fails here."""

from __future__ import annotations

import re
from pathlib import Path

import waypost.resolvers

RESOLVERS = Path(waypost.resolvers.__file__).parent
DOMAINS = (
    "core", "access", "projects", "tasks", "knowledge", "decisions", "context", "lifecycle",
)  # fmt: skip
RUNS_SQL = re.compile(r"\.(execute|executemany|executescript)\(")


def test_only_store_modules_run_sql() -> None:
    found = []
    for domain in DOMAINS:
        for module in sorted((RESOLVERS / domain).glob("*.py")):
            if module.name == "store.py" or module.name.endswith("_store.py"):
                continue
            for number, line in enumerate(module.read_text().splitlines(), 1):
                if RUNS_SQL.search(line):
                    found.append(f"{domain}/{module.name}:{number}: {line.strip()}")
    move = "move these statements into a store module of the domain:\n"
    assert found == [], move + "\n".join(found)


def test_every_domain_has_a_store_module() -> None:
    assert [d for d in DOMAINS if not (RESOLVERS / d / "store.py").is_file()] == []


SOURCE = RESOLVERS.parent
# the packages that serve requests: they call a domain's operations, never its store
TRANSPORTS = ("schema", "rest", "mcp_server", "lifecycle_http", "live", "http", "console")
STORE_IMPORT = re.compile(
    r"^\s*from waypost\.resolvers\.\w+(\.\w*store\b| import .*\b\w*store\b)", re.MULTILINE
)


def test_transports_reach_the_store_only_through_operations() -> None:
    found = []
    for package in TRANSPORTS:
        for module in sorted((SOURCE / package).rglob("*.py")):
            for match in STORE_IMPORT.finditer(module.read_text()):
                found.append(f"{module.relative_to(SOURCE)}: {match.group(0).strip()}")
    assert found == [], "call the domain's operations instead:\n" + "\n".join(found)
