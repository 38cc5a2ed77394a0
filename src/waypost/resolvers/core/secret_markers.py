"""Credentials pasted into text the service keeps for good.

The lifecycle API refuses them wherever they appear in a memo or its
documents (lifecycle-model.md "Secret markers"). Elsewhere they are refused
in every text an event copies into its `data` (a project's name, a task's
title, a knowledge record's title and tags, a decision's options, of which
its answers copy one, a publication result's `detail`): events are never
rewritten, and their `data` never holds credentials (service-contract
section 10). A knowledge record's title and tags went into events unread
(knowledgejourney).
"""

from __future__ import annotations

import re

from waypost.errors import InvalidRequest

# lifecycle-model.md "Secret markers": refused wherever they appear in the memo
# or in UTF-8 document content. Besides PEM's private-key headers, OpenPGP's
# armor for one (`-----BEGIN PGP PRIVATE KEY BLOCK-----`): not PEM by name,
# but a private key all the same (a choice beyond the model; docs/lifecycle.md).
# Two more choices: `password=`, `secret=` and `token=` in any letter case
# (`PASSWORD=` in a pasted .env file passed), and Waypost's own API tokens
# (`wp_` and the 43 characters of `ids.new_token`). Named by what they are.
_MARKERS = {
    "a private key": r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    "an AWS access key": r"AKIA[A-Z0-9]{16}",
    "a GitHub token": r"gh[pos]_[A-Za-z0-9]{36}",
    "a Slack token": r"xox[abprs]-",
    "an API key (sk-)": r"sk-[A-Za-z0-9]{20,}",
    "a password=, secret= or token= setting": r"(?i:password|secret|token)=\S{8,}",
    # exactly a token's length: `wp_ajax_nopriv_woocommerce_checkout_...` is none
    "a Waypost token": r"(?<![A-Za-z0-9_-])wp_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])",
}
SECRET_MARKERS = re.compile("|".join(_MARKERS.values()))

# In free text, such as a push's output, a marker starts a word: a branch
# `task-20261205releasecandidate` holds `sk-` and 20 alphanumerics, and is no
# key (review60). The lifecycle's markers stay as its model writes them,
# wherever they appear. And a URL's password (`https://user:pass@host`), which
# a push that failed prints with its remote.
_IN_FREE_TEXT = {
    **{kind: rf"(?<![A-Za-z0-9]){pattern}" for kind, pattern in _MARKERS.items()},
    # and a title says what it is about: "xoxb- tokens for the Slack bot",
    # "Stop printing password=${DB_PASSWORD}", "Mask token=********" or
    # "token=<redacted>" name a kind of secret or a placeholder, not one
    # (review83); a Slack token has its digits after the prefix
    # ("xoxp-legacy-tokens" names a kind: review84)
    "a Slack token": r"(?<![A-Za-z0-9])xox[abprs]-[0-9][A-Za-z0-9-]{9,}",
    "a password=, secret= or token= setting": (
        # wherever it appears, as the lifecycle's: `PGPASSWORD=` is psql's own
        r"(?i:password|secret|token)=(?![<${%*\[])"
        # and not a value a bug report quotes or a redaction writes:
        # "token=undefined", "token=[REDACTED]", "password=xxxxxxxx"
        r"(?!(?i:undefined|null|none|redacted|masked|hidden)(?:(?!\S)|[\"'`,;&)\]}]))"
        r"(?![xX#•._-]+(?!\S))\S{8,}"
    ),
    "a password in a URL": r"://[^/\s:@]*:[^/\s@]+@",
}
_FREE_TEXT_MARKERS = [(kind, re.compile(pattern)) for kind, pattern in _IN_FREE_TEXT.items()]
_URL_PASSWORD = re.compile(_IN_FREE_TEXT["a password in a URL"])


def has_secret(text: str) -> bool:
    return SECRET_MARKERS.search(text) is not None


def password_in_url(text: str) -> bool:
    """`https://user:pass@host`: a source link that carries its own login."""
    return _URL_PASSWORD.search(text) is not None


def credential_in(text: str) -> str | None:
    """What kind of credential free text holds ("a GitHub token"), or None."""
    return next((kind for kind, found in _FREE_TEXT_MARKERS if found.search(text)), None)


def refuse_credential(text: str, field: str) -> None:
    """`400 invalid_request` (reason `secret_marker_detected`, naming
    `field`) for a text an event copies, when it holds a credential."""
    kind = credential_in(text)
    if kind is not None:
        raise InvalidRequest(
            f"{field} holds what looks like {kind}: remove it and send it again; the"
            " project's events keep it, and events are never rewritten",
            {"reason": "secret_marker_detected", "field": field},
        )
