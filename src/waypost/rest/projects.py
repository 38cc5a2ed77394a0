"""REST routes: projects, policy and the event log."""

from __future__ import annotations

from typing import Any

from waypost.pagination import Page
from waypost.resolvers.core import events
from waypost.resolvers.core.receipts import Outcome
from waypost.resolvers.projects import operations as projects
from waypost.resolvers.projects import policy
from waypost.rest.queries import EventsQuery, ListQuery
from waypost.rest.routing import Call, RouteTable

table = RouteTable("projects")


@table.post("/api/v1/projects", body=projects.ProjectCreate, status=201)
async def create_project(call: Call) -> Outcome:
    """Create a project (humans only); its policy starts at revision 1."""
    assert call.idem
    return await projects.create(call.rt, call.actor, call.idem, call.body)


@table.get("/api/v1/projects", query=ListQuery)
async def list_projects(call: Call) -> Page[Any]:
    """Every project, by id."""
    return await projects.list_projects(call.rt, call.query.cursor, call.query.limit)


@table.get("/api/v1/projects/{project}")
async def get_project(call: Call) -> dict[str, Any]:
    """One project."""
    return await projects.get(call.rt, call.params["project"])


@table.get("/api/v1/projects/{project}/policy")
async def get_policy(call: Call) -> dict[str, Any]:
    """The project's binding policy projection."""
    return await policy.get(call.rt, call.params["project"])


@table.patch("/api/v1/projects/{project}/policy", body=policy.PolicyPatch)
async def update_policy(call: Call) -> Outcome:
    """Write the next policy revision (humans: any field; agents: rules, when delegated)."""
    assert call.idem
    return await policy.update(call.rt, call.actor, call.idem, call.params["project"], call.body)


@table.get("/api/v1/projects/{project}/policy/history", query=ListQuery)
async def policy_history(call: Call) -> Page[Any]:
    """Immutable policy revisions, newest first."""
    return await policy.history(
        call.rt, call.params["project"], call.query.cursor, call.query.limit
    )


@table.get("/api/v1/projects/{project}/events", query=EventsQuery)
async def list_events(call: Call) -> dict[str, Any]:
    """Events oldest first after a sequence; poll again from `next_after`."""
    return await events.for_project(
        call.rt, call.params["project"], call.query.after, call.query.limit
    )
