"""The MCP server: tool and resource handlers over a backend.

One `Server` serves every MCP session of a transport; its lifespan runs once
per MCP session (the SDK enters it for each session) and holds that session's
state: an id for derived idempotency keys and the agent session it keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from hashlib import sha256
from typing import Any, TypeVar, cast

import anyio
import mcp.types as types
import msgspec
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

from waypost import __version__
from waypost.decoding import INT64_MAX, INT64_MIN, clip
from waypost.errors import WaypostError
from waypost.json_text import compact
from waypost.mcp_server import tools
from waypost.mcp_server.advice import explain
from waypost.mcp_server.arguments import ArgumentChecker
from waypost.mcp_server.backend import ROUTES, Backend
from waypost.mcp_server.calls import ApiError, Reply
from waypost.mcp_server.envelope import RESOURCE_NOT_FOUND, RESOURCE_URI, unknown_resource
from waypost.mcp_server.running import RunningCalls
from waypost.mcp_server.sessions import HEARTBEAT_SECONDS, AgentSession
from waypost.mcp_server.waiting import wait_for_decision
from waypost.resolvers.context import packet
from waypost.rest.routing import BODY_LIMIT, decode_body

T = TypeVar("T")

log = logging.getLogger("waypost.mcp")
INSTRUCTIONS = (
    "Waypost coordinates AI agents and humans on shared projects (`project_list` names them). "
    "Before acting on a project, call `context` (its rules text) and `policy` (review mode, "
    "lease length, integration owner): the policy's rules bind you. Split work with "
    "`task_create`, claim it with `task_claim`, leave notes with "
    "`task_checkpoint`, finish with `task_submit` (record lessons there). When a task needs "
    "a human's call, `decision_open` then `decision_wait`; never work around a pending "
    "decision. Mutating tools take an optional `idempotency_key`: reuse it to retry a call "
    "safely."
)
KEY_SAFE = re.compile(r"[!-~]{1,64}")
PROJECT_PAGES = 10  # resources list at most this many pages of 200 projects
# The key, in an HTTP request's ASGI scope, of the asyncio.Event set once its
# client has gone (http_endpoint.py sets both): a decision_wait whose caller
# left stops at once instead of holding one of the token's streams to its bound.
CLIENT_GONE = "waypost.mcp.client_gone"
_RESOURCE_CODES = {"not_found": RESOURCE_NOT_FOUND, "invalid_request": types.INVALID_PARAMS}


def _resource_error(code: int, message: str) -> McpError:
    return McpError(types.ErrorData(code=code, message=message))


@dataclass
class McpState:
    """One MCP session's state."""

    id: str
    agent: AgentSession


Context = RequestContext[Any, McpState, Any]
BackendFor = Callable[[Context], Backend]


def derived_key(state: McpState, request_id: Any) -> str:
    """The key of a call sent without one: MCP session + JSON-RPC request id, so a
    transport's resend of the same request replays instead of writing twice."""
    # by its JSON form: the ids 5 and "5" are two requests (JSON-RPC 2.0)
    text = json.dumps(request_id)
    part = text if KEY_SAFE.fullmatch(text) else sha256(text.encode()).hexdigest()[:32]
    return f"mcp-{state.id}-r{part}"


def _whole_numbers(value: Any) -> Any:
    """Whole floats as integers, all through the arguments: JSON Schema's
    integer takes 2.0 (many clients send floats), the REST body's strict
    decoding does not; a float field takes the integer as it is."""
    if isinstance(value, float) and value.is_integer() and INT64_MIN <= value <= INT64_MAX:
        # beyond 64 bits it stays a float, which the REST decoding refuses
        return int(value)
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    return value


def _query_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _placeholders(tool: tools.RouteTool) -> dict[str, str]:
    """The tool's arguments that go into its route's path: name -> placeholder."""
    found = {"project": "project"} if tool.project_arg else {}
    found.update({name: placeholder for name, (placeholder, _) in tool.path_args.items()})
    return found


def _too_large(tool: tools.RouteTool | None, args: dict[str, Any]) -> ApiError | None:
    """REST's refusal of a body over its limit, for a write whose arguments,
    as the REST body they become, are over it: REST refuses such a body
    before it reads a field of it, so the tool's schema must not name one
    first (parityjourney)."""
    if tool is None or not tool.mutating:
        return None
    placeholders = _placeholders(tool)
    body = {k: v for k, v in args.items() if k not in placeholders and k != "idempotency_key"}
    try:
        size = len(msgspec.json.encode(_whole_numbers(body)))
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        # (ValueError: a lone surrogate, which msgspec cannot write as UTF-8)
        return None  # the schema's check names what cannot be encoded
    if size <= BODY_LIMIT:
        return None
    message = f"request bodies are limited to {BODY_LIMIT} bytes"
    return ApiError("payload_too_large", message, {}, 413)


async def _route_call(
    tool: tools.RouteTool, backend: Backend, state: McpState, args: dict[str, Any], request_id: Any
) -> Reply:
    args = dict(args)
    params = {placeholder: str(args.pop(name)) for name, placeholder in _placeholders(tool).items()}
    key = args.pop("idempotency_key", None)
    if tool.mutating and key is None:
        key = derived_key(state, request_id)
    body = args if tool.mutating else None
    query = None if tool.mutating else {k: _query_text(v) for k, v in args.items() if v is not None}

    async def session_for() -> str | None:
        session = await state.agent.ensure(backend) if tool.needs_session else None
        return session or state.agent.session_id

    async def call(session: str | None) -> Reply:
        reply = await backend.call(
            tool.method, tool.path, params, query=query, body=body,
            idempotency_key=key, session_id=session,
        )  # fmt: skip
        if tool.name == "context" and isinstance(reply.body, dict):
            # REST's advice names routes; an agent here has tools (agentmcpjourney)
            actions = reply.body.get("next_actions")
            if isinstance(actions, list) and all(isinstance(a, str) for a in actions):
                said = packet.reworded(actions, packet.REST_WORDS, packet.MCP_WORDS)
                return Reply(reply.status, {**reply.body, "next_actions": said}, reply.replayed)
        if tool.name == "me" and session is None:
            # REST names the caller's latest live session when the request
            # names none, which may be another MCP session's: its leases are
            # not this one's to act on (review32)
            return Reply(reply.status, {**reply.body, "session": None})
        return reply

    return await _once_more_if_session_ended(state, session_for, call)


async def _answer_of_a_retry(
    tool: tools.RouteTool | None,
    backend: Backend,
    state: McpState,
    args: dict[str, Any],
    request_id: Any,
    checker: ArgumentChecker,
) -> Reply | None:
    """What REST answers a write whose arguments the tool's schema refused,
    when that answer is the stored one of an earlier call with its key.

    REST looks a key up before it refuses a body its decoding refuses: a
    retry of a write that committed under an earlier build, whose rules an
    upgrade tightened, gets its stored answer, not `invalid_request` (which
    would tell the agent its write failed, and it would write again under a
    new key). The schema is those rules, so a refused call whose body REST's
    decoding refuses too is sent on: REST replays it, or refuses it without
    running anything. A body REST decodes is not sent (its own operation
    would run); nor is one whose route or key the refusal is about.

    In process only: there REST's decoding is this process's. `waypost mcp`
    reaches a service that may run another build, whose decoding may take
    what this one refuses (a newer `waypost mcp` before an older service):
    sent on, such a call was written though its tool refused it."""
    if tool is None or not tool.mutating or not backend.decodes_here:
        return None
    placeholders = _placeholders(tool)
    placed = {p: v for name, p in placeholders.items() if isinstance(v := args.get(name), str)}
    key = args.get("idempotency_key", derived_key(state, request_id))
    if len(placed) != len(placeholders) or not isinstance(key, str):
        return None
    named = [*placeholders, *(["idempotency_key"] if "idempotency_key" in args else [])]
    if not checker.fit(tool.name, {name: args[name] for name in named}):
        return None  # the refusal is about the route (a project `.`) or the key
    body = {k: v for k, v in args.items() if k not in placeholders and k != "idempotency_key"}
    try:
        decode_body(ROUTES[(tool.method, tool.path)], body)
        return None
    except WaypostError:
        pass  # refused by REST too: no operation can run
    try:
        reply = await backend.call(
            tool.method, tool.path, placed, body=body, idempotency_key=key
        )  # fmt: skip
    except ApiError:
        return None  # the refusal stands; the schema's words say it in arguments
    return reply


async def _once_more_if_session_ended(
    state: McpState,
    session_for: Callable[[], Awaitable[str | None]],
    call: Callable[[str | None], Awaitable[T]],
) -> T:
    """`call(session)`, and once more when the kept agent session it was sent
    with ended behind its back (ended elsewhere, expired): the second call
    starts another session where the tool needs one, and reads go without.
    Only the session this call sent is forgotten: a concurrent call may have
    started a live one meanwhile."""
    session = await session_for()
    try:
        return await call(session)
    except ApiError as error:
        if session and error.details.get("reason") == "session_not_live":
            state.agent.forget(session)
            return await call(await session_for())
        raise


async def _decision_wait(backend: Backend, state: McpState, args: dict[str, Any]) -> Any:
    project, decision_id = str(args["project"]), str(args["decision_id"])
    timeout = float(args.get("timeout_seconds", tools.WAIT_TIMEOUT_DEFAULT))

    async def kept_session() -> str | None:
        return state.agent.session_id

    async def read_once(session: str | None) -> dict[str, Any]:
        reply = await backend.call(
            "GET", tools.DECISION, {"project": project, "decision": decision_id},
            session_id=session,
        )  # fmt: skip
        decision: dict[str, Any] = reply.body
        return decision

    async def read() -> dict[str, Any]:
        return await _once_more_if_session_ended(state, kept_session, read_once)

    return await wait_for_decision(backend.changes(project), read, timeout)


class ClientLeft(Exception):
    """The HTTP client of a call went away before its answer."""


def _client_gone(ctx: Context) -> asyncio.Event | None:
    """Set once the call's HTTP client has gone (None outside `/mcp`: stdio
    passes `build_server` the end of its input instead)."""
    gone = ctx.request.scope.get(CLIENT_GONE) if ctx.request is not None else None
    return gone if isinstance(gone, asyncio.Event) else None


async def _unless_client_leaves(work: Awaitable[T], gone: asyncio.Event | None) -> T:
    """`work`'s result, or ClientLeft once `gone` is set, `work` cancelled.

    The SDK runs a call on in its session after its POST's client has gone,
    to the end: a decision_wait held one of the token's 16 streams (and a
    task) for up to its 240-second bound for an answer nobody would read."""
    if gone is None:
        return await work
    # a cancel scope, not a task group: the work's own errors (a refusal of
    # the wait) must reach the caller as they are, not in an ExceptionGroup
    with anyio.CancelScope() as scope:

        async def watch() -> None:
            await gone.wait()
            scope.cancel()

        watcher = asyncio.create_task(watch())
        try:
            return await work
        finally:
            watcher.cancel()
    raise ClientLeft  # reached only when `watch` cancelled the work


# In a replayed write's `_meta`, as REST's `Idempotent-Replayed: true` and
# GraphQL's `replayed`: an agent could not tell "I wrote this" from "this was
# written before" (idemxaudit)
REPLAYED_META = "waypost/replayed"


def _result(body: Any, replayed: bool = False) -> types.CallToolResult:
    text = compact(body)
    structured = body if isinstance(body, dict) else {"result": body}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structuredContent=structured,
        _meta={REPLAYED_META: True} if replayed else None,
    )


def _named_as_arguments(error: ApiError) -> ApiError:
    """The refusal with its field named as a tool's caller knows it: REST
    names the key by its header (`Idempotency-Key`), a tool by its argument."""
    if error.details.get("field") != "Idempotency-Key":
        return error
    details = {**error.details, "field": "idempotency_key"}
    return ApiError(error.code, error.message, details, error.status)


def tool_error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)


def tool_list() -> list[types.Tool]:
    """The tools `tools/list` names, their input schemas the REST bodies'."""
    return list(_tools())


@functools.cache
def _tools() -> tuple[types.Tool, ...]:
    """Built once a process: the list is fixed by the route table, and
    deriving its 32 schemas from the models cost 36 ms, paid by every app
    built (each test's service among them) and by each `waypost mcp` start."""
    listed = [
        types.Tool(name=t.name, description=t.description, inputSchema=t.input_schema())
        for t in tools.ROUTE_TOOLS
        if t.available
    ]
    listed.append(
        types.Tool(
            name="decision_wait",
            description=tools.DECISION_WAIT_DESCRIPTION,
            inputSchema=tools.decision_wait_schema(),
        )
    )
    return tuple(listed)


def argument_checker(listed: list[types.Tool] | None = None) -> ArgumentChecker:
    """The tools' (`listed`, else tool_list()'s) arguments checked as their
    REST routes check them."""
    orders = {t.name: t.rest_order() for t in tools.ROUTE_TOOLS if t.available}
    schemas = {t.name: t.inputSchema for t in (listed or tool_list())}
    return ArgumentChecker(schemas, orders)


Handler = TypeVar("Handler", bound=Callable[..., Awaitable[Any]])


def build_server(
    backend_for: BackendFor,
    calls: RunningCalls,
    heartbeat_seconds: float = HEARTBEAT_SECONDS,
    client_gone: Callable[[Context], asyncio.Event | None] | None = None,
) -> Server[McpState, Any]:
    """The server; `calls` the calls running, which the transport's cancels
    reach; `client_gone(ctx)` is the event set once a call's client has left
    (by default the one `/mcp` puts in each request's scope)."""
    gone_for = client_gone or _client_gone

    def cancellable(handler: Handler) -> Handler:
        """The handler, as a call its client may cancel (running.py)."""

        @functools.wraps(handler)
        async def run(*args: Any, **kwargs: Any) -> Any:
            with calls.running(server.request_context):
                return await handler(*args, **kwargs)

        return cast(Handler, run)

    @contextlib.asynccontextmanager
    async def lifespan(_: Server[McpState, Any]) -> AsyncIterator[McpState]:
        async with anyio.create_task_group() as tasks:
            mcp_id = uuid.uuid4().hex
            state = McpState(mcp_id, AgentSession(mcp_id, tasks, heartbeat_seconds))
            try:
                yield state
            finally:
                await state.agent.close()
                tasks.cancel_scope.cancel()

    server: Server[McpState, Any] = Server(
        "waypost", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan
    )
    listed = tool_list()
    by_name = {t.name: t for t in tools.ROUTE_TOOLS if t.available}
    checker = argument_checker(listed)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return listed

    # the arguments are checked here, not by the SDK: its refusals have no REST code
    @server.call_tool(validate_input=False)
    @cancellable
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        ctx = server.request_context
        state = ctx.lifespan_context
        backend = backend_for(ctx)
        project = arguments.get("project")
        refused = _too_large(by_name.get(name), arguments) or checker.refusal(name, arguments)
        if refused is not None and refused.code == "payload_too_large":
            return tool_error(explain(refused, project if isinstance(project, str) else None))
        if refused is not None:
            tool = by_name.get(name)
            try:
                earlier = await _answer_of_a_retry(
                    tool, backend, state, arguments, ctx.request_id, checker
                )
            except Exception:
                log.exception("MCP tool %s failed", name)
                return tool_error(explain(ApiError("internal", "internal error", {}, 500)))
            if earlier is not None:
                return _result(earlier.body, earlier.replayed)
            return tool_error(explain(refused, project if isinstance(project, str) else None))
        arguments = _whole_numbers(arguments)
        state.agent.carry(backend)
        try:
            if name == "decision_wait":
                wait = _decision_wait(backend, state, arguments)
                result = Reply(200, await _unless_client_leaves(wait, gone_for(ctx)))
            elif name in by_name:
                result = await _route_call(by_name[name], backend, state, arguments, ctx.request_id)
            else:
                # the same form as every refusal: the code first, the envelope last
                unknown = ApiError("not_found", "no such tool; tools/list names the tools",
                                   {"tool": clip(name)}, 404)  # fmt: skip
                return tool_error(explain(unknown))
        except ApiError as error:
            own_key = "idempotency_key" in arguments
            refusal = _named_as_arguments(error)
            return tool_error(explain(refusal, str(project) if project else None, own_key, name))
        except ClientLeft:
            return tool_error("cancelled: the client went away before the answer")
        except WaypostError as error:
            # refused in process, outside any route: the stream caps of a wait
            # (too_many_streams), a busy store; the same REST format
            refusal = ApiError(error.code, error.message, error.details, error.status)
            return tool_error(explain(refusal, str(project) if project else None, tool=name))
        except Exception:
            # a fault of ours: the log gets the traceback, the agent a plain answer
            log.exception("MCP tool %s failed", name)
            return tool_error(explain(ApiError("internal", "internal error", {}, 500)))
        return _result(result.body, result.replayed)

    @server.list_resources()
    @cancellable
    async def list_resources() -> list[types.Resource]:
        backend = backend_for(server.request_context)
        resources: list[types.Resource] = []
        cursor: str | None = None
        for _ in range(PROJECT_PAGES):
            query = {"limit": "200", **({"cursor": cursor} if cursor else {})}
            try:
                reply = await backend.call("GET", "/api/v1/projects", {}, query=query)
            except ApiError as error:
                # a plain exception became JSON-RPC code 0 with a bare message
                code = _RESOURCE_CODES.get(error.code, types.INTERNAL_ERROR)
                raise _resource_error(code, explain(error)) from None
            except Exception:
                # the SDK would send its text (a path, SQL) and log nothing
                log.exception("MCP resource list failed")
                raise _resource_error(types.INTERNAL_ERROR, "internal: internal error") from None
            page = reply.body
            for project in page["items"]:
                pid = project["id"]
                for what, about in (("policy", "binding policy"), ("digest", "digest")):
                    resources.append(
                        types.Resource(
                            uri=AnyUrl(f"waypost://projects/{pid}/{what}"),
                            name=f"{pid} {what}",
                            description=f"The {about} of project {pid} ({project['name']}).",
                            mimeType="application/json",
                        )
                    )
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return resources

    @server.list_resource_templates()
    async def list_resource_templates() -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                uriTemplate=f"waypost://projects/{{project}}/{what}",
                name=f"project {what}",
                description=f"A project's {what} as JSON.",
                mimeType="application/json",
            )
            for what in ("policy", "digest")
        ]

    @server.read_resource()
    @cancellable
    async def read_resource(uri: AnyUrl) -> list[ReadResourceContents]:
        # both transports held the URI as sent to this already (envelope.py);
        # this is the parsed one, which the SDK may have normalised
        match = RESOURCE_URI.fullmatch(str(uri))
        if match is None:
            raise _resource_error(RESOURCE_NOT_FOUND, unknown_resource(str(uri)))
        project, what = match.groups()
        backend = backend_for(server.request_context)
        try:
            reply = await backend.call("GET", f"{tools.PROJECT}/{what}", {"project": project})
        except ApiError as error:
            code = _RESOURCE_CODES.get(error.code, types.INTERNAL_ERROR)
            raise _resource_error(code, explain(error, project)) from None
        except Exception:
            log.exception("MCP resource %s failed", uri)
            raise _resource_error(types.INTERNAL_ERROR, "internal: internal error") from None
        text = json.dumps(reply.body, ensure_ascii=False, separators=(",", ":"))
        return [ReadResourceContents(content=text, mime_type="application/json")]

    return server
