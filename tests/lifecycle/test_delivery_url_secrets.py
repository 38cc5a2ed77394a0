"""A refused endpoint URL never quotes the password it holds.

docs/lifecycle.md, "Events and delivery": a user and password in the
webhook URL "are sent as an `Authorization: Basic` header ..., and neither
is ever logged"; http/urls.py: "Named, never quoted: the URL itself holds
the password". deliveryjourney: a password holding an unescaped `/`, `?` or
`#` (base64 secrets hold `/`) ends the authority there, httpx takes the
password's first part for a port, and the refusal at start printed it:

    $ waypost serve --lifecycle-webhook 'https://hookuser:Xq9Zk/Lm+Tz@hooks.example/x'
    Error: --lifecycle-webhook is not a URL (Invalid port: 'Xq9Zk')

The same function checks `--k8s-api` and `waypost mcp --url`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from waypost.cli import main

SECRET = "Xq9ZkSecret"
URLS = (
    f"https://hookuser:{SECRET}/Lm+Tz@hooks.example/x",
    f"https://hookuser:{SECRET}?x@hooks.example/x",
    f"https://hookuser:{SECRET}#x@hooks.example/x",
)


@pytest.mark.parametrize("url", URLS)
def test_a_webhook_url_refused_at_start_does_not_quote_its_password(
    tmp_path: Path, url: str
) -> None:
    result = CliRunner().invoke(
        main, ["serve", "--db", str(tmp_path / "w.db"), "--lifecycle-webhook", url]
    )
    assert result.exit_code == 2, result.output
    assert "--lifecycle-webhook" in result.output
    assert SECRET not in result.output, result.output
    assert not (tmp_path / "w.db").exists()


@pytest.mark.parametrize("url", URLS)
def test_a_k8s_api_or_mcp_url_refused_does_not_quote_its_password(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ca.pem").write_text("")
    result = CliRunner().invoke(main, [
        "serve", "--db", str(tmp_path / "w.db"), "--lifecycle-auth", "tokenreview",
        "--k8s-api", url, "--k8s-ca", str(tmp_path / "ca.pem")])  # fmt: skip
    assert result.exit_code == 2 and "--k8s-api" in result.output, result.output
    assert SECRET not in result.output, result.output
    monkeypatch.setenv("WAYPOST_TOKEN", "wp_token")
    result = CliRunner().invoke(main, ["mcp", "--url", url])
    assert result.exit_code == 2 and "--url" in result.output, result.output
    assert SECRET not in result.output, result.output


def test_a_refused_url_without_a_user_part_still_says_what_is_wrong() -> None:
    """Only a URL that may hold a password is named rather than quoted
    (review85: the `@` test in http/urls.py, made always true, passed)."""
    from waypost.http.urls import endpoint_url_refusal

    assert endpoint_url_refusal("http://hooks.example:abc/x", ("http", "https")) == (
        "is not a URL (Invalid port: 'abc')"
    )
