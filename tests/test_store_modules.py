"""The domain packages keep their SQL in store modules (`store.py`, and
`<concept>_store.py` where one concept's SQL outgrows it, like
`tasks/ready_store.py`): operation modules hold the rules and call store
functions, so a second engine could stand behind the same operations
(issue 8). A statement run anywhere else in them fails here."""

from __future__ import annotations

import ast
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
TRANSPORTS = ("schema", "rest", "mcp_server", "lifecycle_http", "live", "http", "console",
              "cli.py", "admin_cli.py", "serving.py", "app.py")  # fmt: skip


def _store_imports(module: Path) -> list[str]:
    """The store modules of `waypost.resolvers` that `module` imports, in any form."""
    found = []
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        found += [
            n for n in names
            if n.startswith("waypost.resolvers.") and n.rsplit(".", 1)[-1].endswith("store")
        ]  # fmt: skip
    return found


def _modules(package: str) -> list[Path]:
    """A package's modules, or the one module `package` names (`cli.py`)."""
    path = SOURCE / package
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


def test_transports_reach_the_store_only_through_operations() -> None:
    found = [
        f"{module.relative_to(SOURCE)}: {name}"
        for package in TRANSPORTS
        for module in _modules(package)
        for name in _store_imports(module)
    ]
    assert found == [], "call the domain's operations instead:\n" + "\n".join(found)


def test_the_store_import_check_sees_every_form(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import waypost.resolvers.tasks.store\n"
        "from waypost.resolvers.access import (\n    principals,\n    store,\n)\n"
        "from waypost.resolvers.tasks.ready_store import X\n"
        "from waypost.resolvers.tasks import stored_gate\n"
    )
    assert _store_imports(module) == [
        "waypost.resolvers.tasks.store",
        "waypost.resolvers.access.store",
        "waypost.resolvers.tasks.ready_store",
    ]
