"""GraphQL operations in the request line and the metrics."""

from __future__ import annotations

from collections.abc import Iterator

from strawberry.extensions import SchemaExtension

from waypost.cancelling import CallerGone
from waypost.observe.requests import note_graphql_operation


class GraphQLObserver(SchemaExtension):
    """Names the operation on the request's log line and counts it by type and
    outcome: `refused` (not parsed, not valid, over a limit: nothing ran),
    `errors` (ran, with errors; a variable that does not fit its type too:
    graphql-core checks variables as execution begins), `ok`."""

    executed = False

    def on_execute(self) -> Iterator[None]:
        self.executed = True
        yield

    def on_operation(self) -> Iterator[None]:
        # finally: a subscription's operation lasts as long as its stream, and
        # a stream ends by being closed (the client's `complete`, a closed
        # socket), which does not come back here past the yield
        try:
            yield
        finally:
            self._observe()

    def _observe(self) -> None:
        ctx = self.execution_context
        note_graphql_operation(ctx.operation_name)
        metrics = getattr(getattr(ctx.context, "rt", None), "metrics", None)
        if metrics is None:
            return
        try:
            kind = ctx.operation_type.value
        except Exception:  # no document, or no operation of that name
            kind = "unknown"
        errors = ctx.result.errors if ctx.result is not None else None
        if errors and any(isinstance(e.original_error, CallerGone) for e in errors):
            outcome = "gone"  # its client left while it waited: no fault, nothing answered
        elif not self.executed:
            outcome = "refused"
        elif errors:
            outcome = "errors"
        else:
            outcome = "ok"
        metrics.graphql.labels(type=kind, outcome=outcome).inc()
