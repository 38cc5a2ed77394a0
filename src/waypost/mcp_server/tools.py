"""The tool table: each tool is one REST route, described for an agent.

A tool's input schema is generated from the route's own request model (see
schemas.py); its result is the route's JSON. A tool whose route this build
does not have is left out of the list rather than advertised broken.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from waypost.mcp_server import schemas
from waypost.mcp_server.arguments import RestOrder
from waypost.mcp_server.backend import ROUTES, has_route
from waypost.rest.openapi import ITEM_MODELS

PROJECT = "/api/v1/projects/{project}"
TASK = PROJECT + "/tasks/{task}"
KNOWLEDGE = PROJECT + "/knowledge/{id}"
DECISION = PROJECT + "/decisions/{decision}"


@dataclass(frozen=True)
class RouteTool:
    name: str
    description: str
    method: str
    path: str
    # tool argument -> (path placeholder, what it names)
    path_args: dict[str, tuple[str, str]] = field(default_factory=dict)
    # agents need a live Waypost session for this route (docs/api.md)
    needs_session: bool = False
    project_arg: bool = True

    @property
    def mutating(self) -> bool:
        return self.method != "GET"

    @property
    def available(self) -> bool:
        return has_route(self.method, self.path)

    def rest_order(self) -> RestOrder:
        """What the route checks after the body's model and NUL: the key,
        the items of a field its write checks, the project and the path's
        ids (after a reading route's query, too)."""
        path = {*self.path_args, *(["project"] if self.project_arg else [])}
        if not self.mutating:  # the query first, the project and ids after
            return RestOrder(path=frozenset(path))
        body = ROUTES[(self.method, self.path)].body
        owner = body.__name__ if body is not None else None
        return RestOrder(
            key=frozenset([schemas.IDEMPOTENCY_KEY_ARGUMENT]),
            items_later=frozenset(f for (model, f) in ITEM_MODELS if model == owner),
            path=frozenset(path),
        )

    def input_schema(self) -> dict[str, Any]:
        route = ROUTES[(self.method, self.path)]
        model = route.body if self.mutating else route.query
        args: dict[str, dict[str, Any]] = {}
        if self.project_arg:
            args["project"] = schemas.project_arg()
        for name, (_, what) in self.path_args.items():
            args[name] = schemas.id_arg(what)
        return schemas.tool_schema(path_args=args, model=model, mutating=self.mutating)


def _task(name: str, action: str, description: str) -> RouteTool:
    return RouteTool(
        name,
        description,
        "POST",
        f"{TASK}/{action}",
        {"task_id": ("task", "task")},
        needs_session=True,
    )


ROUTE_TOOLS: list[RouteTool] = [
    RouteTool(
        "me",
        "Who you are: your principal (id, kind, name) and the Waypost session this MCP "
        "session keeps (null until a tool that needs one starts it). Compare your id with "
        "a lease's owner_id, a publication's holder_id or the policy's integration_owner.",
        "GET",
        "/api/v1/me",
        project_arg=False,
    ),
    RouteTool(
        "project_list",
        "The projects there are (id, name), ordered by id: the `project` argument of every "
        "other tool; page with cursor.",
        "GET",
        "/api/v1/projects",
        project_arg=False,
    ),
    RouteTool(
        "context",
        "Call this first, before acting on a project: the complete binding rules text and the "
        "decisions, tasks and knowledge that match your query, within a byte budget (the "
        "policy tool gives the rest of the policy: review mode, lease length, integration "
        "owner). Follow "
        "`next_actions` when `truncated` is true or `items` is empty. Every term of `q` is "
        "required and matched as a whole word (no stemming); open decisions are listed "
        "whether or not they match, so an answer of decisions alone, with `next_actions` "
        "empty, means no task or knowledge matched: try fewer or other words.",
        "GET",
        PROJECT + "/context",
    ),
    RouteTool(
        "policy",
        "The project's binding policy: rules text (obey it), review mode, lease length, "
        "relay switch, integration owner, revision.",
        "GET",
        PROJECT + "/policy",
    ),
    RouteTool(
        "policy_history",
        "The policy's revisions, newest first: each one's rules text and settings, who "
        "made it, when and why (provenance); page with cursor. Read it to learn what "
        "changed since the policy revision a stale decision pinned.",
        "GET",
        PROJECT + "/policy/history",
    ),
    RouteTool(
        "policy_edit",
        "Edit the project's binding rules, where its policy delegates rule editing to "
        "agents (agent_rule_editing): the revision you read (policy) as expected_revision, "
        "the complete new rules text, and why in provenance. Agents change the rules only; "
        "every other field is a human's.",
        "PATCH",
        PROJECT + "/policy",
    ),
    RouteTool(
        "knowledge_record",
        "Record advisory knowledge (a lesson, fact, rejected approach or checkpoint) for "
        "others to find. Returns the knowledge object (revision 1).",
        "POST",
        PROJECT + "/knowledge",
    ),
    RouteTool(
        "knowledge_correct",
        "Correct a knowledge record: send its complete new content and the revision you read "
        "as expected_revision; a stale revision is refused with the current one.",
        "PATCH",
        KNOWLEDGE,
        {"knowledge_id": ("id", "knowledge record")},
    ),
    RouteTool(
        "knowledge_feedback",
        "Say whether a knowledge record (at the revision you read) was useful.",
        "POST",
        KNOWLEDGE + "/feedback",
        {"knowledge_id": ("id", "knowledge record")},
    ),
    RouteTool(
        "knowledge_search",
        "List a project's knowledge, newest first, filtered by kind, status and tag "
        "(and text, where the service supports `q`); page with cursor.",
        "GET",
        PROJECT + "/knowledge",
    ),
    RouteTool(
        "knowledge_get",
        "One knowledge record as it is now (its revision, for knowledge_correct and "
        "knowledge_feedback) with its revisions newest first, each with its feedback; page "
        "the revisions with cursor.",
        "GET",
        KNOWLEDGE,
        {"knowledge_id": ("id", "knowledge record")},
    ),
    RouteTool(
        "task_list",
        "List a project's tasks in creation order, filtered by status (open, claimed, "
        "submitted, done, cancelled), ready (true: claimable now) and full-text q; page with "
        "cursor. Each task says whether it is ready, what blocks it, and its lease.",
        "GET",
        PROJECT + "/tasks",
    ),
    RouteTool(
        "task_get",
        "One task: its status, readiness and blockers (decisions, dependencies), lease "
        "(with expires_at: a lease that expired is recovered with task_recover) and "
        "publication authority.",
        "GET",
        TASK,
        {"task_id": ("task", "task")},
    ),
    RouteTool(
        "task_submissions",
        "A task's submissions, newest first: each summary, the task revision it was made "
        "at and who made it. Read them before task_complete as its reviewer, or from a "
        "review activity, on its subject task; page with cursor.",
        "GET",
        TASK + "/submissions",
        {"task_id": ("task", "task")},
    ),
    RouteTool(
        "task_checkpoints",
        "A task's checkpoint notes, newest first: the progress its owners recorded "
        "(task_checkpoint); page with cursor.",
        "GET",
        TASK + "/checkpoints",
        {"task_id": ("task", "task")},
    ),
    RouteTool(
        "task_create",
        "Create a task in a project: a title and, optionally, a description, acceptance "
        "criteria, kind, priority, the tasks it depends_on, and subject_task_id to make it "
        "an activity (a review, a verification) on another task. Returns the task "
        "(revision 1); anyone may create one.",
        "POST",
        PROJECT + "/tasks",
    ),
    RouteTool(
        "task_edit",
        "Edit a task: the revision you read (task_get) as expected_revision and only the "
        "fields to change; a stale revision is refused with the current one. Changing what "
        "a decision judged (title, description, acceptance criteria, kind; not priority or "
        "depends_on) makes that decision stale. Only a human changes status, or removes a "
        "dependency that is not done.",
        "PATCH",
        TASK,
        {"task_id": ("task", "task")},
    ),
    RouteTool(
        "task_claim",
        "Claim work: without task_id the highest-priority ready task, else the named one. "
        "Returns the task and your lease. Refused with decision_required when a decision "
        "gates the work.",
        "POST",
        PROJECT + "/claims",
        needs_session=True,
    ),
    _task(
        "task_checkpoint",
        "checkpoint",
        "Record a progress note on a task you hold (others see it if they recover the work).",
    ),
    _task(
        "task_renew",
        "renew",
        "Extend your lease on a task by the policy's lease length from now (long work).",
    ),
    _task(
        "task_submit",
        "submit",
        "Submit the work on a task you hold, with a summary and up to 50 lessons (each a "
        "knowledge record pinned to this task and submission). Ends your lease. Pass "
        "expected_revision, the task revision you worked from, to be refused instead if "
        "someone edited the task since.",
    ),
    _task("task_release", "release", "Give a task you hold back: it is open again for others."),
    _task(
        "task_complete",
        "complete",
        "Complete a submitted task as its reviewer, where the policy's review_mode lets you "
        "(any: any principal but the submitter; none: its owner; human: only a human).",
    ),
    _task(
        "publication_prepare",
        "publication/prepare",
        "Before publishing a task's result outside Waypost (merging, deploying), take "
        "exclusive publication authority for it: only the policy's integration_owner may "
        "(a human, when it names none). Refused with publication_in_progress while someone "
        "holds it. Then publication_result, then publication_finalize.",
    ),
    _task(
        "publication_result",
        "publication/result",
        "Record the outcome of a publication you prepared (succeeded or failed, with a "
        "detail such as the merge commit or the error), then publication_finalize.",
    ),
    _task(
        "publication_finalize",
        "publication/finalize",
        "Release the publication authority you hold on a task, so that others may prepare "
        "theirs (the task's publication is null again); as the integration owner the policy "
        "names now, end authority a holder it no longer names kept.",
    ),
    _task(
        "task_recover",
        "recover",
        "Take over a task whose lease expired (anyone's, yours from an earlier session "
        "included): a fresh lease for you, the lapsed lease and its latest checkpoints.",
    ),
    RouteTool(
        "decision_open",
        "Ask a narrow, structured question that gates the listed tasks until answered "
        "(question, 2-20 options, rationale, who must answer, the task_ids it gates and the "
        "environment it is about). Optional: conditions (at most 50, what an allow must "
        "confirm), recommendation (one of the options), reversible (true needs a "
        "recommendation: unanswered for 24 hours, the decision is allowed with it; an agent "
        "may not make a human-required one reversible) and expires_at (RFC 3339 with an "
        "offset: once it passes the decision expires, answered or not, and blocks until "
        "reopened). Then call decision_wait.",
        "POST",
        PROJECT + "/decisions",
    ),
    RouteTool(
        "decision_get",
        "One decision: status (pending, allowed, denied, deferred, expired, stale), "
        "work_allowed, the current generation with its answer, and its history (newest "
        "first, paged with cursor and limit).",
        "GET",
        DECISION,
        {"decision_id": ("decision", "decision")},
    ),
    RouteTool(
        "decision_list",
        "List a project's decisions, oldest first, filtered by status (pending, allowed, "
        "denied, deferred, expired, stale); page with cursor. Each says its tasks, its "
        "current generation with its answer, and work_allowed.",
        "GET",
        PROJECT + "/decisions",
    ),
    RouteTool(
        "decision_answer",
        "Answer a decision an agent may answer (required_actor agent or either): one of its "
        "options exactly, allow, deny or defer, your rationale, and the current generation "
        "(decision_get) as expected_generation; an allow sends conditions_confirmed: true "
        "(even when it lists no conditions). A decision that "
        "requires a human is a human's to answer (or relay, where the policy allows).",
        "POST",
        DECISION + "/answer",
        {"decision_id": ("decision", "decision")},
        needs_session=True,
    ),
    RouteTool(
        "decision_reopen",
        "Reopen a decision, whatever its status, so it can be answered again: a stale (what "
        "it judged changed) or expired one must be before it can be answered, and a denied "
        "or deferred one when something changed that its answerer should weigh. A new "
        "generation pinned to the current task revisions and rules, "
        "with your rationale (and, optionally, a new environment, conditions or expiry; "
        "an expired one needs a new expires_at, or null for none). Send the generation you "
        "read (decision_get) as expected_generation; then call decision_wait. The question, "
        "options and who answers never change; a reversible decision that requires a human "
        "only a human reopens. An allowed decision is not reopened while a task it affects "
        "(or its subject or an activity of it) holds publication authority "
        "(publication_in_progress: wait for the holder to finalize); one that already blocks "
        "may be.",
        "POST",
        DECISION + "/reopen",
        {"decision_id": ("decision", "decision")},
    ),
    RouteTool(
        "digest",
        "What awaits attention in a project: pending decisions, what proceeded by timeout "
        "or soon will, blocked tasks and the number of ready tasks.",
        "GET",
        PROJECT + "/digest",
    ),
]

WAIT_TIMEOUT_DEFAULT = 60
# under the 300-second read timeout the official SDK clients give a response stream
WAIT_TIMEOUT_MAX = 240

DECISION_WAIT_DESCRIPTION = (
    "Block until a decision is answered, goes stale or expires, for at most timeout_seconds "
    f"(default {WAIT_TIMEOUT_DEFAULT}, at most {WAIT_TIMEOUT_MAX}). Returns at once when it "
    'is not pending. Result: {"outcome": "answered"|"stale"|"expired"|"timeout", '
    '"decision": the decision object}. On "timeout", call it again to keep waiting. '
    # a lease runs down while its owner waits: an agent that followed these
    # words alone lost its task to a recover after four waits (agentmcpjourney)
    "A task you hold stays yours only while you call task_renew before its lease "
    "expires: the wait renews nothing."
)


def decision_wait_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "project": schemas.project_arg(),
            "decision_id": schemas.id_arg("decision"),
            "timeout_seconds": {
                "type": "integer",
                "minimum": 1,
                "maximum": WAIT_TIMEOUT_MAX,
                "default": WAIT_TIMEOUT_DEFAULT,
                "description": "How long to wait at most.",
            },
        },
        "required": ["project", "decision_id"],
        "additionalProperties": False,
    }


@functools.cache
def tool_names() -> frozenset[str]:
    """Every tool this server lists (a route tool whose route this build has,
    and `decision_wait`)."""
    return frozenset(t.name for t in ROUTE_TOOLS if t.available) | {"decision_wait"}
