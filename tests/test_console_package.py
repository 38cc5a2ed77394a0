"""The console's files: shipped in the wheel, loading nothing from elsewhere,
served without a token (and only those), with their security headers."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from tests.conftest import Service

ROOT = Path(__file__).resolve().parent.parent
CONSOLE = ROOT / "src" / "waypost" / "console"


def test_every_console_file_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["waypost"]
    for path in CONSOLE.rglob("*"):
        if path.is_dir() or path.suffix == ".py" or "__pycache__" in path.parts:
            continue
        relative = path.relative_to(ROOT / "src" / "waypost").as_posix()
        # setuptools' "*" does not cross "/"
        assert any(
            fnmatch.fnmatch(relative, p) and relative.count("/") == p.count("/") for p in patterns
        ), f"{relative} would not ship in the wheel"


def test_the_console_pages_hold_no_inline_code_and_no_other_origin() -> None:
    for page in (CONSOLE / "static" / "index.html", CONSOLE / "graphiql" / "index.html"):
        html = page.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), f"inline script in {page}"
        assert "<style" not in html and " style=" not in html and " on" + "click=" not in html
        for ref in re.findall(r'(?:src|href)="([^"]+)"', html):
            if ref.startswith("#"):
                continue
            assert ref.startswith(("/console/static/", "/graphiql/")), ref
            prefix, folder = (
                ("/console/static/", CONSOLE / "static")
                if ref.startswith("/console/static/")
                else ("/graphiql/", CONSOLE / "graphiql")
            )
            assert (folder / ref.removeprefix(prefix)).is_file(), ref
    for source in (CONSOLE / "static").rglob("*"):
        if source.is_file() and source.suffix in (".js", ".css", ".html"):
            text = source.read_text()
            assert not re.search(r"https?://", text), f"{source} names another origin"
            assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write", text), (
                f"{source}: text goes in as text"
            )


async def test_console_routes_and_their_narrow_exception(service: Service) -> None:
    client = service.client
    page = await client.get("/console")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert csp.startswith("default-src 'self';") and "frame-ancestors 'none'" in csp
    assert "connect-src 'self' ws://waypost.test wss://waypost.test" in csp
    assert "data:" not in csp  # section 14: default-src 'self' plus the WebSocket's connect-src
    assert page.headers["x-frame-options"] == "DENY"
    assert (await client.get("/console/static/js/main.js")).status_code == 200
    missing = await client.get("/console/static/nothing.js")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    # a file that is not there carries the page's headers too (it had none)
    assert missing.headers["x-frame-options"] == "DENY"
    assert missing.headers["content-security-policy"] == csp
    # a method files do not take is a 405 naming what they take (it said `not_found`)
    human = await service.principal()
    posted = await client.post("/console/static/js/main.js", headers=human.headers())
    assert posted.status_code == 405 and posted.headers["allow"] == "GET, HEAD"
    assert posted.json()["error"]["code"] == "method_not_allowed"
    assert posted.headers["content-security-policy"] == csp
    # as do the redirect to the console and a path under it that is no page
    to_console = await client.get("/", follow_redirects=False)
    assert to_console.headers["location"] == "/console"
    nowhere = await client.get("/console/nope")
    assert nowhere.status_code == 404 and nowhere.json()["error"]["code"] == "not_found"
    for answer in (to_console, nowhere):
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["content-security-policy"] == csp
    # every other answer of a page's path too: a method pages do not take
    # (a token's 405, the refused token's 401) went out before these headers
    for path in ("/", "/console", "/console/", "/console/nope"):
        for headers in (human.headers(), {}):
            other = await client.post(path, headers=headers)
            assert other.status_code == (405 if headers else 401), (path, other.text)
            if headers:
                assert other.headers["allow"] == "GET, HEAD"
                assert other.json()["error"]["code"] == "method_not_allowed"
            assert other.headers["x-frame-options"] == "DENY", path
            assert other.headers["content-security-policy"] == csp, path
    # GraphiQL is off here: its files are not public, and GET /graphql executes nothing
    assert (await client.get("/graphiql/init.js")).status_code == 401
    assert (await client.get("/graphql")).status_code == 401
    assert (await client.request("DELETE", "/console")).status_code == 401
    assert (await client.get("/consolex")).status_code == 401


async def test_a_host_header_that_is_not_a_host_stays_out_of_the_csp(service: Service) -> None:
    page = await service.client.get("/console", headers={"Host": "evil.test; script-src *"})
    csp = page.headers["content-security-policy"]
    assert "evil" not in csp and "connect-src 'self';" in csp


@pytest.mark.parametrize("range_header", ["bytes=5-2", "bytes=x", "bytes=99999999-", "bytes=0-3"])
async def test_a_range_on_a_console_file_is_ignored_the_whole_file_comes(
    service: Service, range_header: str
) -> None:
    """Starlette answered a malformed or unsatisfiable Range in plain text (400,
    416), outside the error envelope every route keeps to."""
    whole = await service.client.get("/console/static/console.css")
    r = await service.client.get("/console/static/console.css", headers={"Range": range_header})
    assert r.status_code == 200 and r.content == whole.content
    assert r.headers["x-frame-options"] == "DENY"
    # and no answer offers the ranges it ignores
    assert "accept-ranges" not in whole.headers and "accept-ranges" not in r.headers
