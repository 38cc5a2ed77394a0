"""Tool errors an agent can act on: what went wrong and what to call next.

The text starts with the REST error code and ends with the REST error
envelope as JSON, so a program can still read the code and details; there is
never a stack trace.
"""

from __future__ import annotations

import json
from typing import Any, Final

from waypost.mcp_server.calls import ApiError
from waypost.rest.routing import BODY_LIMIT
from waypost.storage.connection import STORAGE_RETRY_AFTER


def _decisions(details: dict[str, Any]) -> str:
    ids = [str(i) for i in details.get("decision_ids", [])]
    more = " (and more: the list is truncated)" if details.get("truncated") else ""
    return ", ".join(ids) + more


# Who reopens a stale or expired decision, and how (an agent may, except a
# reversible one that requires a human).
_REOPEN_WHO = (
    "decision_reopen with its current generation, an expired one with a new expires_at "
    "or null; if it is reversible and requires a human, only a human reopens it: tell "
    "your user"
)


# The store needs an operator (the same reasons as GET /healthz's): retrying
# helps no sooner than someone has acted (upgradeaudit4: the advice for
# `unavailable` alone had agents retry "in a few seconds")
_OPERATOR = (
    "Waypost cannot serve until an operator {}: tell your user; retrying will not help before then."
)

# Advice that depends on the refusal's code and `details.reason` alone (no
# other branch below names these pairs).
_BY_REASON: Final[dict[tuple[str, str], str]] = {
    # the store needs an operator (the same reasons as GET /healthz's)
    ("unavailable", "database_files_changed"): _OPERATOR.format("restarts it"),
    ("unavailable", "database_damaged"): _OPERATOR.format("restores its database"),
    ("unavailable", "database_upgraded"): _OPERATOR.format(
        "starts it again with the build that migrated its database"
    ),
    # most often a retry of a finalize (or of a result before it) whose answer
    # was lost: the publication is over, and advice to prepare again would
    # have the agent publish twice (mcpteamflow)
    ("state_conflict", "not_prepared"): (
        "Nobody holds publication authority for this task. If you finalized it already "
        "(an earlier call whose answer you lost), that publication is over: task_get "
        "shows its publication as null; do not publish again. To publish, call "
        "publication_prepare first, then publication_result, then publication_finalize."
    ),
    # a named claim or a recover of a task whose live lease is the caller's:
    # the probe of an agent unsure whether its lease outlived a pause
    ("state_conflict", "already_claimed"): (
        "You hold this task's lease (an agent: in this session): go on with it "
        "(task_renew extends the lease, task_checkpoint records progress, task_submit "
        "hands the work in)."
    ),
    ("state_conflict", "result_recorded"): (
        "The publication's result is already recorded (an earlier call whose answer you "
        "lost counts): call publication_finalize; prepare again only for a new attempt "
        "to publish, never to repeat this one."
    ),
    ("forbidden", "review_mode"): (
        "This project's review_mode does not let you complete this task (human: only a "
        "human; any: anyone but its submitter; none: its owner). Leave it for its "
        "reviewer and claim other work; a decision cannot grant this."
    ),
    ("forbidden", "agent_rule_editing_off"): (
        "This project's policy does not delegate rule editing to agents: propose the "
        "change (and why) to your user; a human edits the policy, and a decision cannot "
        "grant this."
    ),
    ("forbidden", "agent_rules_only"): (
        "Agents may change the rules text only (details.fields names what you sent "
        "besides): send expected_revision, rules and, if you like, provenance alone; "
        "ask your user for any other change."
    ),
    ("forbidden", "humans_only"): (
        "Only a human may make this change (a task's status, removing a dependency that "
        "is not done, creating a project): tell your user what you need and why; a "
        "decision cannot grant this."
    ),
}

# Advice that depends on the refusal's code alone (after every branch below).
_BY_CODE: Final[dict[str, str]] = {
    "idempotency_in_flight": (
        "The same call is still running; call again in a moment to get its result."
    ),
    "too_many_streams": (
        "This token already has as many open streams and waits as the service allows "
        "(other decision_wait calls, event streams, subscriptions; the message says "
        "how many). Let one end, or wait with a shorter timeout_seconds, then call again."
    ),
    "unsupported_media_type": "Send the arguments as JSON (application/json).",
    "unavailable": "Waypost is busy or unreachable; retry in a few seconds.",
    "unauthenticated": "The token was refused: check WAYPOST_TOKEN or the Authorization header.",
}


# The one tool a lease's holder calls that the decision gate refuses (renew,
# checkpoint and release stay open behind a decision): refused behind a
# declined decision, the holder is told to give the task back, or its lease
# outlives the refusal (up to the policy's lease_seconds) and the task stays
# unclaimable after the decision is reconsidered (mcpjourney).
_HOLDER_TOOLS: Final = frozenset({"task_submit"})
_GIVE_BACK: Final = (
    "You hold this task's lease: give it back with task_release (it is open again "
    "for whoever takes it once the decision allows). "
)


# The storage cannot serve the call (a full disk, a read-only or failing
# device, a commit whose outcome is unknown): REST's `Retry-After` is
# STORAGE_RETRY_AFTER, "an operator must act" (docs/api.md); told to retry
# in a few seconds, an agent on a full disk made 337 calls in 35 s
# (diskfulljourney). The message says what happened, and whether a write may
# have been committed (review77): the advice does not guess.
_STORAGE = (
    "Waypost's storage cannot serve this call now (the message says how). Someone has to "
    "act on the server first (free disk space, mend the device): tell your user, and retry "
    "in a minute or more (a write with the same idempotency key, which runs it once "
    "whatever happened to the first)."
)


def _next_step(error: ApiError, project: str | None, own_key: bool, tool: str | None) -> str:
    d = error.details
    reason = d.get("reason")
    code = error.code
    fixed = _BY_REASON.get((code, reason)) if isinstance(reason, str) else None
    if fixed is not None:
        return fixed
    if code == "unavailable" and (error.retry_after or 0) >= STORAGE_RETRY_AFTER:
        return _STORAGE
    where = f"project={project!r}, " if project else ""
    if code == "decision_required" and d.get("declined"):
        declined = [str(i) for i in d["declined"]]
        return (
            f"Decision(s) {', '.join(declined)} were answered deny or defer: that answer "
            "keeps this work blocked, and decision_wait returns at once, so do not wait or "
            "retry (nor reopen the others first: nothing lifts the work while it stands). "
            f"{_GIVE_BACK if tool in _HOLDER_TOOLS else ''}"
            "Claim other work with task_claim (no task_id), and tell your user this task is "
            "held; reopen such a decision (decision_reopen) only if something changed that "
            "its answerer should weigh. Do not work around the decision."
        )
    if code == "decision_required" and d.get("reopen"):
        stuck = [str(i) for i in d["reopen"]]
        return (
            f"Decision(s) {', '.join(stuck)} are stale or expired: no answer can lift them "
            f"as they stand, and decision_wait returns at once. For each, call decision_get "
            f"with {where}decision_id (its current.affected task revisions and "
            "current.policy_revision are what its answer judged: task_get and policy_history "
            "show what changed since), then decision_reopen with its generation as "
            "expected_generation and a rationale (an expired one also needs a new "
            "expires_at, or null for none); then decision_wait until it is answered and "
            "call this tool again. If decision_reopen is refused (human_required_reversible: "
            "a reversible decision that requires a human), a human must reopen it: say so "
            "to your user. Do not work around the decision."
        )
    if code == "decision_required":
        ids = [str(i) for i in d.get("decision_ids", [])]
        first = ids[0] if ids else "<id>"
        return (
            f"This work waits for decision(s) {_decisions(d)}. Call decision_wait with "
            f"{where}decision_id={first!r} to block until it is answered, then call this "
            "tool again. Do not work around the decision."
        )
    if code == "revision_conflict" and tool == "task_submit":
        current = d.get("current_revision")
        return (
            f"The task was edited while you held it (it is at revision {current}). Call "
            "task_get, check that your work answers what it asks now, and submit again "
            "with expected_revision set to it; your lease is still yours."
        )
    if code == "revision_conflict":
        current = d.get("current_revision")
        hint = f" The current revision is {current}." if current is not None else ""
        moved = _moved(d, "revision", "The record changed since you read it.")
        return (
            f"{moved}{hint} Read it again (task_get, policy, "
            "or knowledge_get for a knowledge record), check that your change still "
            "makes sense, and retry with expected_revision set to the current revision."
        )
    if code == "generation_conflict":
        current = d.get("current_generation")
        hint = f" The current generation is {current}." if current is not None else ""
        moved = _moved(d, "generation", "The decision was reopened since you read it.")
        return f"{moved}{hint} Call decision_get and retry."
    if reason == "lease_expired":
        return (
            "The lease on this task expired, so nobody holds it. Call task_recover with "
            "this task_id to take it over (you get its latest checkpoints), then go on."
        )
    if code == "lease_conflict":
        until = f" (until {d['expires_at']})" if d.get("expires_at") else ""
        return (
            f"Another principal or session holds this task's lease{until} (an earlier "
            "session of yours counts as another). Claim other work with task_claim (no "
            "task_id), or call task_list with ready=true to see what is ready; once that "
            "lease expires, task_recover takes the task over."
        )
    if code == "not_found" and reason == "nothing_ready" and d.get("expired_leases"):
        lapsed = [str(i) for i in d["expired_leases"]]
        held = {str(i) for i in d.get("expired_leases_held", ())}
        free = [i for i in lapsed if i not in held]
        said = (
            f"No task is ready to claim, but {', '.join(lapsed)} hold a lease that expired "
            "(their holder stopped)."
        )
        if held:  # recovered, these could not be submitted (collabjourney)
            said += (
                f" A decision holds {', '.join(i for i in lapsed if i in held)}: one "
                "recovered cannot be submitted until its decisions allow the work (digest "
                "names them)."
            )
        if not free:
            return said
        return (
            f"{said} Call task_recover with {where}task_id={free[0]!r} to take one over "
            "with its latest checkpoints."
        )
    if code == "not_found" and reason == "nothing_ready":
        return (
            "No task is ready to claim. Call digest to see the decisions that hold work and "
            "the blocked tasks (task_list lists them all): decision_wait on a pending one; "
            "a stale or expired one is answered only after decision_reopen; one answered "
            "deny or defer holds its tasks until someone reconsiders and reopens it."
        )
    if code == "not_found" and "tool" in d:
        return "List the tools this server has (the MCP method tools/list)."
    if code == "not_found" and "project_id" in d:
        return "No such project: project_list names the projects there are."
    if code == "not_found":
        return (
            "Check the ids: task_list lists the project's tasks, knowledge_search its "
            "knowledge and digest its pending decisions (project_list names the projects)."
        )
    if code == "state_conflict" and reason in ("stale", "expired"):
        return (
            f"The decision is {reason}: no answer counts until it is reopened "
            f"({_REOPEN_WHO}), then answer the new generation."
        )
    if code == "state_conflict" and reason == "not_claimed" and d.get("status") == "open":
        return (
            # not "(it was released)": a task never claimed is refused so too
            # (docsexamples), and a named claim takes it only once it is ready
            "Nobody holds this task now: task_claim with its task_id takes it once it "
            "is ready (task_get shows what it waits for), if you are to go on with it."
        )
    if code == "state_conflict" and reason == "not_claimed":
        return (
            "You no longer hold this task (task_get shows its status: cancelled, submitted "
            "or done). Stop working on it and claim other work with task_claim."
        )
    if code == "state_conflict" and reason == "dependencies_not_done":
        deps = ", ".join(str(i) for i in d.get("dependencies", []))
        return (
            f"This task waits for its dependencies ({deps}) to be done: claim other work with "
            "task_claim (no task_id), which takes only ready tasks."
        )
    if code == "state_conflict" and reason == "task_closed" and d.get("status") == "cancelled":
        return (
            "The task is cancelled: only a human can reopen it (task_edit with status open "
            "is a human's); tell your user if it should go on, or claim other work."
        )
    if code == "state_conflict" and reason == "task_closed":
        return (
            "The task is done: it is final, and no edit or publication applies to it any "
            "more (task_create makes a new task for further work)."
        )
    if code == "state_conflict":
        return (
            "The record is not in a state that allows this. Read it again (task_get, "
            "decision_get or digest)."
        )
    if code == "forbidden" and reason in ("session_required", "session_not_live"):
        return (
            "The Waypost agent session this MCP session kept has ended. Call the tool again: "
            "a new session starts; leases held by the old one stay with it until they "
            "expire, then task_recover takes them over."
        )
    if code == "forbidden" and reason == "human_required":
        return (
            "Only a human answers this decision: tell your user what it asks (where the "
            "policy's allow_relayed_human_answers is on, see policy, send your user's "
            "answer verbatim as relay). If decision_get "
            f"shows it stale or expired, it must be reopened first ({_REOPEN_WHO}); once it "
            "is pending, decision_wait until it is answered."
        )
    if code == "forbidden" and reason == "relay_disabled":
        return (
            "This project's policy does not take relayed answers: a human answers this "
            "decision; tell your user what it asks, then decision_wait."
        )
    # the same reason from decision_open and decision_reopen: the tool tells
    # them apart (its message's words did, which a rewording would change)
    if code == "forbidden" and reason == "human_required_reversible" and tool == "decision_reopen":
        return (
            "Only a human reopens a reversible decision that requires a human: tell your "
            "user. decision_wait returns at once while it is stale or expired, so do not "
            "wait on it in a loop: claim other work with task_claim meanwhile."
        )
    if code == "forbidden" and reason == "human_required_reversible":
        return (
            "An agent cannot open a reversible decision that requires a human (it would "
            "time out to its recommendation): open it with reversible false, or ask your "
            "user to open it."
        )
    if code == "forbidden" and reason == "not_integration_owner" and tool == "publication_result":
        # the holder the policy no longer names: its authority still blocks
        # decisions and judged edits of the task until it is given back
        return (
            "The policy changed since you prepared: call publication_finalize on this "
            "task_id to give the authority back (it blocks new decisions and judged edits "
            "of the task while you hold it), then go on with other work."
        )
    if code == "forbidden" and reason == "not_integration_owner":
        owner = d.get("integration_owner")
        who = f"its integration owner ({owner})" if owner else "a human (the policy names none)"
        return (
            f"Only the project's policy lets {who} publish its work: leave publication to "
            "them and go on with other work; a decision cannot grant this."
        )
    if code == "forbidden" and reason == "source_project_only" and d.get("project_id"):
        return (
            "The record is shared from another project: call the same tool with "
            f"project='{d['project_id']}' (its source project) to correct it."
        )
    if code == "forbidden":
        return "Policy or authority rules refuse this for you; ask a human or open a decision."
    if code == "invalid_request":
        field = d.get("field")
        at = f" (argument `{field}`)" if field else ""
        return f"Fix the argument{at} and call again."
    if code == "idempotency_key_reused" and not own_key:
        # the key was derived from the MCP session and the JSON-RPC request id
        return (
            "Your client sent this JSON-RPC request id before in this MCP session, with "
            "other arguments; a call without idempotency_key is keyed by the session and "
            "the request id. Send the call under a new request id, or pass an "
            "idempotency_key of your own."
        )
    if code == "idempotency_key_reused":
        return "That idempotency_key was used for a different call; use a new key."
    if code == "publication_in_progress":
        wait = (
            "A task this touches is being published under someone's publication authority. "
            "Wait until its holder finalizes it (the task's `publication` names the holder; "
            "context shows it for a task your q matches), then call again."
        )
        if tool == "publication_prepare":
            return (
                f"{wait} If details.holder_id is your own id (me), an earlier "
                "publication_prepare of yours went through: go on with publication_result, "
                "then publication_finalize. If the policy names you and not the holder "
                "(the owner changed), you may end its authority with publication_finalize, "
                "then prepare."
            )
        if d.get("holder_id"):
            return (
                f"{wait} If details.holder_id is your own id (me), finish that publication "
                "first (publication_result, publication_finalize on details.task_id)."
            )
        return wait
    if code == "payload_too_large":
        return f"The arguments are too large (REST bodies are limited to {BODY_LIMIT // 1024} KiB)."
    return _BY_CODE.get(code, "An unexpected server fault; retry later.")


def _moved(d: dict[str, Any], kind: str, said: str) -> str:
    """What a conflict says of the record: `said`, unless the number sent is
    ahead of the record's, which it never had (no one changed it)."""
    expected, current = d.get(f"expected_{kind}"), d.get(f"current_{kind}")
    if isinstance(expected, int) and isinstance(current, int) and expected > current:
        return f"You sent a {kind} it never had."
    return said


def explain(
    error: ApiError, project: str | None = None, own_key: bool = True, tool: str | None = None
) -> str:
    """The refusal as an agent reads it; `own_key` is False when the call sent no
    idempotency_key (the server derived one), and `tool` names the tool that was
    refused, so that the advice fits."""
    envelope = {"error": {"code": error.code, "message": error.message, "details": error.details}}
    return (
        f"{error.code}: {error.message}. {_next_step(error, project, own_key, tool)}\n"
        f"{json.dumps(envelope, separators=(',', ':'))}"
    )
