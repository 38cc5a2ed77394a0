"""Knowledge request models and the validation that needs no database.

msgspec enforces types, unknown fields and most limits and names the JSON
path of the offending value; `Content.of` adds the rules msgspec cannot
express (byte limits, uniqueness, blank titles, the create-only and
correction-only status rules). Limits the contracts leave open are chosen
here and documented in docs/knowledge.md.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec

from waypost.errors import InvalidRequest
from waypost.ids import END, ID_CHARS
from waypost.resolvers.core.secret_markers import credential_in, refuse_credential
from waypost.resolvers.core.text import (
    ONE_LINE_PATTERN,
    require_distinct,
    require_drawn_in_order,
    require_shown_at_both_ends,
    require_text,
)

# Limits fixed by the service contract (section 6).
TITLE_MAX_CHARS = 200
BODY_MAX_BYTES = 64 * 1024
TAGS_MAX = 32
TAG_MAX_CHARS = 64
SCOPE_ENTRIES_MAX = 100
MAX_SUBMISSION_LESSONS = 50
# Limits the contracts leave open (docs/knowledge.md).
SCOPE_VALUE_MAX_CHARS = 200
APPLICABILITY_MAX_CHARS = 4096
SUMMARY_MAX_CHARS = 4096
SOURCE_URI_MAX_CHARS = 2048
COMMENT_MAX_CHARS = 4096

Kind = Literal["lesson", "fact", "rejected_approach", "checkpoint"]
Status = Literal["observed", "validated", "deprecated", "superseded"]
Collection = Literal["project", "shared"]

RecordId = Annotated[str, msgspec.Meta(pattern=f"^{ID_CHARS}{END}")]
Title = Annotated[str, msgspec.Meta(min_length=1, max_length=TITLE_MAX_CHARS)]
# No control characters (C0, DEL, C1 with NEL and CSI, the line and paragraph
# separators): a tag is a label, and the search index reads the stored JSON
# list, where a newline would be the two characters "\n" and glue an "n" to
# the next word (acceptance criteria, which may span lines, are indexed as
# text instead: migration 0016).
Tag = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=TAG_MAX_CHARS,
        pattern=ONE_LINE_PATTERN,
    ),
]
Tags = Annotated[list[Tag], msgspec.Meta(max_length=TAGS_MAX)]
# One line, as a tag is: the context packet's filters match a scope value code
# point for code point, and a newline or tab in one could not be typed into them.
ScopeValue = Annotated[
    str,
    msgspec.Meta(min_length=1, max_length=SCOPE_VALUE_MAX_CHARS, pattern=ONE_LINE_PATTERN),
]
ScopeValues = Annotated[list[ScopeValue], msgspec.Meta(max_length=SCOPE_ENTRIES_MAX)]
ScopeTaskIds = Annotated[list[RecordId], msgspec.Meta(max_length=SCOPE_ENTRIES_MAX)]
Applicability = Annotated[str, msgspec.Meta(max_length=APPLICABILITY_MAX_CHARS)]
Summary = Annotated[str, msgspec.Meta(max_length=SUMMARY_MAX_CHARS)]
SourceUri = Annotated[str, msgspec.Meta(min_length=1, max_length=SOURCE_URI_MAX_CHARS)]
Comment = Annotated[str, msgspec.Meta(max_length=COMMENT_MAX_CHARS)]
Revision = Annotated[int, msgspec.Meta(ge=1)]


class ScopeInput(msgspec.Struct, forbid_unknown_fields=True):
    """Where a new record applies; an omitted dimension is empty (generally applicable)."""

    task_ids: ScopeTaskIds = []
    components: ScopeValues = []
    environments: ScopeValues = []
    versions: ScopeValues = []


class ScopeContent(msgspec.Struct, forbid_unknown_fields=True):
    """A correction's complete scope: every dimension is sent, even when empty.

    Required rather than defaulted so that a client that forgets a dimension
    gets a 400 instead of silently clearing it.
    """

    task_ids: ScopeTaskIds
    components: ScopeValues
    environments: ScopeValues
    versions: ScopeValues


class ProvenanceInput(msgspec.Struct, forbid_unknown_fields=True):
    """What the client says about a new record's origin; the server adds actor and time."""

    summary: Summary = ""
    source_uri: SourceUri | None = None
    source_task_id: RecordId | None = None
    source_submission_id: RecordId | None = None


class ProvenanceContent(msgspec.Struct, forbid_unknown_fields=True):
    """A correction's complete provenance: every member is sent (null where none).

    Leaving out `source_task_id` must not quietly drop a lesson's pinned task.
    """

    summary: Summary
    source_uri: SourceUri | None
    source_task_id: RecordId | None
    source_submission_id: RecordId | None


class LessonProvenanceInput(msgspec.Struct, forbid_unknown_fields=True):
    """A submission lesson's provenance: the server pins the task and submission."""

    summary: Summary = ""
    source_uri: SourceUri | None = None


def _check_label(value: str, field: str) -> None:
    """A scope value or a tag shows something, begins and ends with a
    character a reader sees, and is drawn in the order it holds: the context
    filters and the list's `tag` filter match it exactly, so `prod ` or
    `prod` + U+200B (refused beside `prod` as a duplicate a reader cannot
    tell apart) was kept from every `environment=prod` packet and `tag=prod`
    page, ` ` or U+200B alone matched no filter a person could type, and
    U+202E + `dorp` was drawn `prod` and found by no `prod`."""
    require_text(value, field)
    require_shown_at_both_ends(value, field)
    require_drawn_in_order(value, field)


class NewRecord(msgspec.Struct, forbid_unknown_fields=True):
    """What a create body and a submission lesson share (all but provenance)."""

    kind: Kind
    title: Title
    body: str
    status: Status = "observed"
    scope: ScopeInput = msgspec.field(default_factory=ScopeInput)
    tags: Tags = []
    applicability: Applicability = ""
    collection: Collection = "project"
    share_across_projects: bool = False


class KnowledgeCreate(NewRecord):
    provenance: ProvenanceInput = msgspec.field(default_factory=ProvenanceInput)


class SubmissionLessonInput(NewRecord):
    """The knowledge create body without provenance.source_task_id/source_submission_id."""

    provenance: LessonProvenanceInput = msgspec.field(default_factory=LessonProvenanceInput)


class KnowledgeCorrect(msgspec.Struct, forbid_unknown_fields=True):
    """A correction carries the complete new content; kind and collection are not fields."""

    expected_revision: Revision
    title: Title
    body: str
    status: Status
    scope: ScopeContent
    tags: Tags
    applicability: Applicability
    provenance: ProvenanceContent
    superseded_by_id: RecordId | None = None


class FeedbackInput(msgspec.Struct, forbid_unknown_fields=True):
    expected_revision: Revision
    useful: bool
    comment: Comment | None = None


class KnowledgeListQuery(msgspec.Struct, forbid_unknown_fields=True):
    q: str | None = None  # full-text filter, as the context packet searches (docs/context.md)
    kind: Kind | None = None
    status: Status | None = None
    tag: Tag | None = None
    include_shared: bool = False
    cursor: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=200)] | None = None


@dataclass(frozen=True)
class Content:
    """The revisioned content of a record, as one revision row stores it."""

    title: str
    body: str
    status: str
    task_ids: list[str]
    components: list[str]
    environments: list[str]
    versions: list[str]
    tags: list[str]
    applicability: str
    summary: str
    source_uri: str | None
    source_task_id: str | None
    source_submission_id: str | None
    superseded_by_id: str | None = None

    @classmethod
    def of(
        cls,
        body: KnowledgeCreate | SubmissionLessonInput | KnowledgeCorrect,
        *,
        source_task_id: str | None = None,
        source_submission_id: str | None = None,
    ) -> Content:
        """Check the database-free rules and build the content to store."""
        _check_text(body.title, body.body)
        for name in ("components", "environments", "versions"):
            for i, value in enumerate(getattr(body.scope, name)):
                _check_label(value, f"scope.{name}[{i}]")
        for name in ("task_ids", "components", "environments", "versions"):
            require_distinct(getattr(body.scope, name), f"scope.{name}")
        for i, tag in enumerate(body.tags):
            _check_label(tag, f"tags[{i}]")
            refuse_credential(tag, f"tags[{i}]")  # knowledge.corrected keeps them
        require_distinct(body.tags, "tags")
        prov = body.provenance
        if prov.source_uri is not None:
            _check_source_uri(prov.source_uri)
        if not isinstance(prov, LessonProvenanceInput):
            source_task_id, source_submission_id = prov.source_task_id, prov.source_submission_id
        superseded_by = body.superseded_by_id if isinstance(body, KnowledgeCorrect) else None
        return cls(
            title=body.title,
            body=body.body,
            status=body.status,
            task_ids=list(body.scope.task_ids),
            components=list(body.scope.components),
            environments=list(body.scope.environments),
            versions=list(body.scope.versions),
            tags=list(body.tags),
            applicability=body.applicability,
            summary=prov.summary,
            source_uri=prov.source_uri,
            source_task_id=source_task_id,
            source_submission_id=source_submission_id,
            superseded_by_id=superseded_by,
        )


def check_new(body: KnowledgeCreate | SubmissionLessonInput) -> None:
    """Rules of a new record: no `superseded` status, the explicit shared opt-in."""
    if body.status == "superseded":
        raise InvalidRequest.field(
            "status",
            "a record cannot be created superseded; correct it later naming superseded_by_id",
        )
    if body.collection == "shared" and not body.share_across_projects:
        raise InvalidRequest.field(
            "share_across_projects", "collection=shared requires share_across_projects=true"
        )
    if body.collection == "project" and body.share_across_projects:
        raise InvalidRequest.field(
            "share_across_projects", "share_across_projects must be false for collection=project"
        )


def check_correction_status(knowledge_id: str, body: KnowledgeCorrect) -> None:
    """`superseded` exactly when a replacement is named, and never the record itself."""
    if body.status == "superseded" and body.superseded_by_id is None:
        raise InvalidRequest.field(
            "superseded_by_id", "status=superseded requires superseded_by_id"
        )
    if body.status != "superseded" and body.superseded_by_id is not None:
        raise InvalidRequest.field(
            "superseded_by_id", "superseded_by_id is only allowed with status=superseded"
        )
    if body.superseded_by_id == knowledge_id:
        raise InvalidRequest.field("superseded_by_id", "a record cannot supersede itself")


# Control and format characters (bidi overrides, zero-width ones, the BOM)
_NOT_IN_A_LINK = frozenset({"Cc", "Cf"})


def _check_source_uri(uri: str) -> None:
    """Revisions are kept for good and travel to packets, events and shared
    projects, and the service stores no credentials in them (knowledge
    contract, "Mutations"): `https://ci:hunter2@host/...` or a token in the
    link was stored and handed to every reader."""
    if any(ch.isspace() or unicodedata.category(ch) in _NOT_IN_A_LINK for ch in uri):
        # RFC 3986 and 3987 have no raw space, control or bidi/format
        # character in a link: " ", "\u200b" or a leading U+202E was stored
        # for good and drawn as a link by every dashboard that shows it
        raise InvalidRequest.field(
            "provenance.source_uri",
            "provenance.source_uri is a link: it holds no space, control or "
            "invisible formatting character (percent-encode them)",
        )
    kind = credential_in(uri)
    if kind is not None:
        raise InvalidRequest.field(
            "provenance.source_uri", f"provenance.source_uri holds {kind}; link without it"
        )


def _check_text(title: str, body: str) -> None:
    require_text(title, "title")
    refuse_credential(title, "title")  # knowledge.created and knowledge.corrected keep it
    if len(body.encode("utf-8")) > BODY_MAX_BYTES:
        raise InvalidRequest.field("body", "body may hold at most 64 KiB of UTF-8")


def prefixed(error: InvalidRequest, prefix: str) -> InvalidRequest:
    """The same error with its field under `prefix` (e.g. `lessons[3]`), and
    its message too where it begins with the field's name (`tags[1] is a
    duplicate` of the second lesson said `tags[1]` while `field` said
    `lessons[1].tags[1]`)."""
    field = error.details.get("field")
    if not (isinstance(field, str) and field):
        return InvalidRequest(error.message, {**error.details, "field": prefix})
    name = f"{prefix}.{field}"
    message = error.message
    if message.startswith(f"{field} "):
        message = name + message[len(field) :]
    return InvalidRequest(message, {**error.details, "field": name})
