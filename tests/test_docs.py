"""Everything a user can call or set is documented: every REST route of the
route table, every `serve` option, every environment variable, every admin
command (the Datasette habit)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from waypost import rest
from waypost.cli import main, serve
from waypost.live import sse
from waypost.settings import DEFAULT_TYPESAFE_URL

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# "METHOD /path", "METHOD .../suffix" (any prefix), or "GET|POST /path"; also
# inside tables ("| POST | /path |") and code spans.
MENTION = re.compile(
    r"\b((?:GET|POST|PATCH|PUT|DELETE)(?:\|(?:GET|POST|PATCH|PUT|DELETE))*)\b[\s`|]*"
    r"((?:/|\.\.\.)[^\s`|?)\"'<>,]*)"
)


def text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in DOCS)


def shape(path: str) -> str:
    """A path with its parameter names erased: `/tasks/{task}` == `/tasks/{id}`."""
    return re.sub(r"{[^}/]*}", "{}", path.rstrip("/.:;"))


def mentioned() -> set[tuple[str, str]]:
    found = set()
    for match in MENTION.finditer(text()):
        for method in match.group(1).split("|"):
            found.add((method, shape(match.group(2))))
    return found


def documented(method: str, path: str, mentions: set[tuple[str, str]]) -> bool:
    target = shape(path)
    for m, p in mentions:
        if m != method:
            continue
        if p == target or (p.startswith("...") and target.endswith(p[3:])):
            return True
    return False


ROUTES = sorted({(r.method, r.path) for t in rest.TABLES for r in t.routes})


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_every_rest_route_is_documented(method: str, path: str) -> None:
    assert documented(method, path, mentioned()), (
        f"{method} {path} is not mentioned in README.md or docs/*.md"
    )


def serve_options() -> list[str]:
    names: list[str] = []
    for param in serve.params:
        if isinstance(param, click.Option):
            names += [o for o in [*param.opts, *param.secondary_opts] if o.startswith("--")]
    return names


@pytest.mark.parametrize("option", serve_options())
def test_every_serve_option_is_documented(option: str) -> None:
    pattern = rf"(?<![\w-]){re.escape(option)}(?![\w-])"
    assert re.search(pattern, text()), f"serve {option} is not documented"


def environment_variables() -> list[str]:
    """Every WAYPOST_* / TYPESAFE_* name the code reads, found in the source."""
    names: set[str] = set()
    for source in (ROOT / "src" / "waypost").rglob("*.py"):
        names |= set(re.findall(r"[\"']((?:WAYPOST|TYPESAFE)_[A-Z_]+)[\"']", source.read_text()))
    return sorted(names)


def test_the_environment_variables_are_found() -> None:
    assert {"WAYPOST_DB", "WAYPOST_CLOCK_FILE", "TYPESAFE_API_KEY"} <= set(environment_variables())


@pytest.mark.parametrize("name", environment_variables())
def test_every_environment_variable_is_documented(name: str) -> None:
    assert f"`{name}`" in text(), f"{name} is not documented"


def test_the_default_provider_url_is_documented() -> None:
    assert DEFAULT_TYPESAFE_URL in text()


def admin_commands() -> list[str]:
    commands: list[str] = []

    def walk(group: click.Group, prefix: str) -> None:
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                walk(command, f"{prefix} {name}")
            else:
                commands.append(f"{prefix} {name}")

    admin = main.commands["admin"]
    assert isinstance(admin, click.Group)
    walk(admin, "waypost admin")
    return commands


@pytest.mark.parametrize("command", admin_commands())
def test_every_admin_command_is_documented(command: str) -> None:
    assert command in text(), f"{command} is not documented"


def test_readme_links_every_docs_page() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"


def test_readme_starts_with_make_run_and_make_test() -> None:
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```")[1]
    assert "make run" in first_block and "make test" in first_block


def test_documented_core_routes_exist() -> None:
    """The docs do not promise core routes that the table does not have."""
    known = {(m, shape(p)) for m, p in ROUTES} | {
        ("GET", "/healthz"),
        ("GET", "/api/v1/openapi.json"),
        # the event stream is text/event-stream, outside the JSON route table
        ("GET", shape(sse.PATH)),
    }
    api = (ROOT / "docs" / "api.md").read_text()
    for match in MENTION.finditer(api):
        path = match.group(2)
        if not path.startswith("/api/v1/") and path != "/healthz":
            continue
        for method in match.group(1).split("|"):
            assert (method, shape(path)) in known, f"docs/api.md mentions {method} {path}"


def test_the_readme_start_shows_todays_migrations() -> None:
    """The README's `make run` output names the migrations a fresh file gets
    (it named 31, to 0037, after 0038 landed; docsjourney)."""
    from waypost.storage.migrate import available

    names = [m.name for m in available()]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = re.findall(r"(?:applying|applied) (\d+) migrations, (\S+) to (\S+)", readme)
    assert shown, "the README shows no migration lines"
    for count, first, last in shown:
        assert (int(count), first, last) == (len(names), names[0], names[-1])
