"""The closed Memo model and the lifecycle request bodies (lifecycle-model.md).

One set of msgspec structs is the whole model: every struct forbids unknown
fields, conversion is strict (a boolean is never a version number), and the
defaults of the model are the only defaults. `decode.py` is the one decoder
that turns request bytes into these.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

import msgspec

# Patterns end in (?![\s\S]) because `$` would also match before a final newline.
ID_PATTERN = r"^[A-Za-z0-9._:-]{1,256}(?![\s\S])"
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}(?![\s\S])"
MEDIA_TYPE_PATTERN = r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}(?![\s\S])"

Id = Annotated[str, msgspec.Meta(pattern=ID_PATTERN)]
Digest = Annotated[str, msgspec.Meta(pattern=DIGEST_PATTERN)]
MediaType = Annotated[str, msgspec.Meta(pattern=MEDIA_TYPE_PATTERN)]
Version = Annotated[int, msgspec.Meta(ge=1)]
Title = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
# the model gives source titles and criteria an upper bound only ("≤ 200"),
# where it wants text it says so ("text": 1-8,000)
UpTo200 = Annotated[str, msgspec.Meta(max_length=200)]
Text = Annotated[str, msgspec.Meta(max_length=20_000)]
Label = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class _Closed(msgspec.Struct, forbid_unknown_fields=True):
    """Every lifecycle struct refuses fields it does not name."""


class Option(_Closed):
    id: Id
    title: Title
    summary: Text


class Recommendation(_Closed):
    option_id: Id
    rationale: Text


class PacketEntry(_Closed):
    id: Id
    digest: Digest
    media_type: MediaType
    title: Title


class Highlight(_Closed):
    id: Id
    packet_id: Id
    locator: Annotated[str, msgspec.Meta(max_length=200)]
    text: Annotated[str, msgspec.Meta(max_length=8_000)]


class Memo(_Closed):
    id: Id
    version: Version
    title: Title
    question: str
    options: Annotated[list[Option], msgspec.Meta(min_length=2, max_length=20)]
    context: Annotated[str, msgspec.Meta(max_length=100_000)] = ""
    recommendation: Recommendation | None = None
    packet: Annotated[list[PacketEntry], msgspec.Meta(max_length=100)] = []
    highlights: Annotated[list[Highlight], msgspec.Meta(max_length=200)] = []
    proposed_binding_principal: Label | None = None
    tags: Annotated[
        list[Annotated[str, msgspec.Meta(min_length=1, max_length=64)]], msgspec.Meta(max_length=50)
    ] = []


class Document(_Closed):
    digest: Digest
    media_type: MediaType
    content_base64: str


Documents = Annotated[list[Document], msgspec.Meta(max_length=100)]


class RegisterBody(_Closed):
    memo: Memo
    documents: Documents = []


class ReviseBody(_Closed):
    memo: Memo
    expected_version: Version
    summary: Annotated[str, msgspec.Meta(min_length=1, max_length=2_000)]
    documents: Documents = []


class CommentText(_Closed):
    text: Annotated[str, msgspec.Meta(min_length=1, max_length=8_000)]
    locator: Annotated[str, msgspec.Meta(max_length=200)] | None = None


class CommentBody(_Closed):
    version: Version
    body: CommentText


def _spans(*spans: tuple[int, int]) -> str:
    """The body of a regex character class holding the code point spans."""
    return "".join(f"{re.escape(chr(low))}-{re.escape(chr(high))}" for low, high in spans)


# What an https URI may hold: RFC 3986's characters (no space, control
# character, DEL or `<>"{}|\^``), and the non-ASCII ones an IRI takes (RFC
# 3987's `ucschar`, and `iprivate` in the query alone), but for Unicode's
# spaces and line separators and the bidirectional formatting characters
# (RFC 3987, 4.1: an author's U+202E made a link read as another URL).
_UCSCHAR = _spans(
    (0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF),
    *(((plane << 16), (plane << 16) | 0xFFFD) for plane in range(1, 14)),
    (0xE1000, 0xEFFFD),
)  # fmt: skip
_IPRIVATE = _spans((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))
_NOT_IN_IRI = _spans(
    (0xA0, 0xA0), (0x61C, 0x61C), (0x1680, 0x1680), (0x2000, 0x200A), (0x200E, 0x200F),
    (0x2028, 0x202F), (0x205F, 0x205F), (0x2066, 0x2069), (0x3000, 0x3000),
)  # fmt: skip
_URI_TEXT = re.compile(rf"(?:(?![{_NOT_IN_IRI}])[!#-;=?-\[\]_a-z~{_UCSCHAR}{_IPRIVATE}]){{1,2048}}")
_PRIVATE = re.compile(f"[{_IPRIVATE}]")
# a `%` that does not begin an escape of two hex digits (RFC 3986, 2.1)
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def is_https_uri(text: str) -> bool:
    """An absolute https URI with a host: the scheme in any case (RFC 3986
    says it is case-insensitive); `https:///` names no host; a port is
    digits within 0-65535 and a `%` begins two hex digits (`https://x:abc/`
    and `https://%zz/` were taken)."""
    if _URI_TEXT.fullmatch(text) is None or _BAD_ESCAPE.search(text) is not None:
        return False
    try:
        parts = urlsplit(text)
        if _PRIVATE.search(text.partition("#")[0].partition("?")[0] + parts.fragment):
            return False  # private-use characters only in the query (RFC 3987)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:  # a malformed [IPv6] host, or port
        return False
    return parts.scheme.lower() == "https" and bool(host)


class Source(_Closed):
    title: UpTo200
    uri: Annotated[str, msgspec.Meta(max_length=2_048)] | None = None
    digest: Digest | None = None
    note: Annotated[str, msgspec.Meta(max_length=2_000)] | None = None

    def __post_init__(self) -> None:
        # msgspec turns this into the body's validation error
        if self.uri is not None and not is_https_uri(self.uri):
            raise ValueError("source.uri must be an https URI with a host")


class SourceBody(_Closed):
    version: Version
    source: Source


class Evaluation(_Closed):
    option_id: Id
    criterion: UpTo200
    score: Annotated[int, msgspec.Meta(ge=-2, le=2)]
    rationale: Annotated[str, msgspec.Meta(max_length=4_000)]


class EvaluationBody(_Closed):
    version: Version
    evaluation: Evaluation


class ReviewOptions(_Closed):
    profile: Literal["standard"]
    reviewers: Annotated[list[Label], msgspec.Meta(min_length=1, max_length=10)]
    due_at: str | None = None
    note: Annotated[str, msgspec.Meta(max_length=2_000)] | None = None


class ReviewRequestBody(_Closed):
    version: Version
    options: ReviewOptions


class Audience(_Closed):
    subjects: Annotated[list[Label], msgspec.Meta(max_length=100)]
    groups: Annotated[list[Label], msgspec.Meta(max_length=100)]


class PublicationBody(_Closed):
    version: Version
    audience: Audience


class OutcomeBody(_Closed):
    """The public listener's `POST /api/v1/reviews/{request_id}/outcome` body."""

    disposition: Literal["accepted", "rejected", "changes_requested"]
    rationale: Annotated[str, msgspec.Meta(min_length=1, max_length=4_000)]


class VersionQuery(_Closed):
    version: Version | None = None


class RequiredVersionQuery(_Closed):
    version: Version


class EventsQuery(_Closed):
    after: Annotated[int, msgspec.Meta(ge=0)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None


class SearchQuery(_Closed):
    q: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    # any length: one too long for a cursor of ours is `invalid_cursor` (cursors.py)
    cursor: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
