"""Mutation plumbing: userErrors for business errors, inputs as plain JSON values."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import graphql
import strawberry
from strawberry.scalars import JSON

from waypost.decoding import refuse_nul
from waypost.errors import (
    CallerSessionNotLive,
    InvalidRequest,
    Unauthenticated,
    Unavailable,
    WaypostError,
)
from waypost.resolvers.core.receipts import Idempotency, Outcome, check_key


@strawberry.type(description="A business error, with the same code as the REST API.")
class UserError:
    code: str
    field: str | None
    message: str
    reason: str | None = strawberry.field(
        default=None, description="The REST `details.reason`, when the refusal names one."
    )
    wait_on: list[str] | None = strawberry.field(
        default=None,
        description="For decision_required: the subscriptions to wait on instead of polling,"
        " one per decision in details.decision_ids, at most 20 (`decisionChanged(id:"
        ' "dec_...")`); null otherwise, and when one of them was answered deny or defer'
        " (nothing to wait for).",
    )
    details: JSON | None = strawberry.field(
        default=None,
        description="The REST error's `details` object, keys as REST names them"
        " (`decision_ids`, `reopen`, `declined`, `expired_leases`, `owner_id`,"
        " `current_revision`, ...; `field` as in this error's `field`); null when the"
        " refusal carries none.",
    )


def input_value(value: Any) -> Any:
    """A Strawberry input as plain JSON values, snake_case keys, unset fields left out."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: input_value(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not strawberry.UNSET
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list):
        return [input_value(v) for v in value]
    return value


def split_input(name: str, data: Any) -> tuple[Idempotency, dict[str, Any]]:
    """(idempotency, the rest of the input) for mutation `name`."""
    body = input_value(data)
    key = body.pop("idempotency_key", None)
    check_key(key, field="idempotencyKey")
    refuse_nul(body, named=camel_path)
    return Idempotency.for_request(key, operation=f"graphql {name}", body=body), body


def refuses_the_caller(error: BaseException) -> bool:
    """A refusal of the caller, not of the operation: its token (revoked
    while the request waited for the writer, which checks it again) or its
    session (ended meanwhile). At the gate these answer HTTP 401 and 403;
    met inside a mutation they do too (schema/view.py): they were a 200
    with the error under the mutation's path, and a userError."""
    return isinstance(error, Unauthenticated | CallerSessionNotLive)


async def mutate(run: Callable[[], Awaitable[Outcome]]) -> tuple[Outcome | None, list[UserError]]:
    """Run a mutation; business errors become userErrors, faults and
    refusals of the caller stay top-level."""
    try:
        return await run(), []
    except (Unauthenticated, Unavailable):
        raise
    except WaypostError as error:
        if refuses_the_caller(error):
            raise
        field = error.details.get("field")
        reason = error.details.get("reason")
        # none when a decision answered deny or defer holds the work: the
        # refusal then leaves `wait_on` out (nothing to wait for)
        blocking = error.details.get("decision_ids") if "wait_on" in error.details else None
        # the ids and figures a refusal's advice points to (the lapsed leases
        # to recover, the decisions to reopen, the holder of a lease): only
        # `reason` came through, and an agent on GraphQL could not act on it
        details = dict(error.details)
        if isinstance(field, str):
            details["field"] = camel_path(field)
        return None, [
            UserError(
                code=error.code,
                field=camel_path(field) if isinstance(field, str) else None,
                message=in_graphql_words(error.message, field),
                reason=reason if isinstance(reason, str) else None,
                wait_on=[f'decisionChanged(id: "{d}")' for d in blocking] if blocking else None,
                details=JSON(details) if details else None,
            )
        ]


@contextlib.contextmanager
def graphql_field_names() -> Iterator[None]:
    """An InvalidRequest raised inside names its field as GraphQL names it
    (`task_id` -> `taskId`), for refusals made by the REST request models."""
    try:
        yield
    except InvalidRequest as error:
        field = error.details.get("field")
        if isinstance(field, str):
            error.details["field"] = camel_path(field)
            error.message = in_graphql_words(error.message, field)
        raise


def in_graphql_words(message: str, field: object) -> str:
    """`message` naming its field as GraphQL does: the rules are written in
    REST's words ("acceptance_criteria[1] must not be blank") and a client
    reading `acceptanceCriteria[1]` in `field` should read it in the text too."""
    # a value the client sent, quoted back ("no task 'task_id' in this
    # project": an id may be spelt as a field is), stays as it was sent
    # (parityjourney); only the words around it name fields
    parts = _QUOTED.split(message)  # text, quoted, text, quoted, ..., text
    return "".join(
        part if i % 2 else _fields_in_graphql_words(part, field) for i, part in enumerate(parts)
    )


# a quoted value: its quotes not inside a word (an apostrophe, "the task's
# title", opens nothing)
_QUOTED = re.compile(r"(?<!\w)('[^']*')(?!\w)")


def _fields_in_graphql_words(message: str, field: object) -> str:
    if isinstance(field, str) and "_" in field:
        message = message.replace(field, camel_path(field))
        # a nested field's own name, alone: the decoder names a missing member
        # quoted ("Object missing required field `source_uri`" for
        # provenance.source_uri), and a rule shared by a lesson and a record
        # says "requires share_across_projects=true" for lessons[0]....
        leaf = re.sub(r"\[\d+\]", "", field.rsplit(".", 1)[-1])
        message = re.sub(rf"\b{re.escape(leaf)}\b", camel_path(leaf), message)
    # another input field it names ("correct it later naming superseded_by_id"
    # beside `field: status`); not a REST `details` key (`details.reopen`),
    # which `details` keeps in REST's words, nor a code (`decision_required`)
    return _SNAKE_WORD.sub(
        lambda m: camel_path(m[0]) if m[0] in _input_field_names() else m[0], message
    )


_SNAKE_WORD = re.compile(r"(?<![\w.])[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


@functools.cache
def _input_field_names() -> frozenset[str]:
    """Every input field of the schema, as REST names it (snake_case): read
    from the built schema's types (printing and parsing it held the first
    refusal 33 ms)."""
    from waypost.schema import schema  # the schema imports this module

    return frozenset(
        re.sub(r"[A-Z]", lambda m: "_" + m[0].lower(), name)
        for kind in schema._schema.type_map.values()  # as schema/__init__.py's describe()
        if isinstance(kind, graphql.GraphQLInputObjectType)
        for name in kind.fields
    )


def camel_path(path: str) -> str:
    """`scope.task_ids[2]` -> `scope.taskIds[2]`: GraphQL names fields in camelCase.

    The REST header `Idempotency-Key` is the input field `idempotencyKey` here."""
    if path == "Idempotency-Key":
        return "idempotencyKey"
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), path)
