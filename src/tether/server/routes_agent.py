"""Agent turns over HTTP (only when the server was given an agent).

``POST /v1/ns/{namespace}/threads/{thread}/step`` runs one turn; ``approve`` and
``reject`` decide a pending tool call (and by default continue the run);
``resume`` finishes an interrupted run. Each returns ``StepResult.to_dict()``:
a completed, suspended or failed run is a 200 with that status (the run's own
failure is data, not an HTTP error). Grants: ``agent.step`` (step, resume) and
``agent.approve`` (approve, reject).

The four routes differ only in their body's fields and the agent method they call,
so each is one ``_Route`` entry and one handler is built per entry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from ..core.errors import InvalidRequest
from ..core.scopes import thread as thread_scope
from ..runtime.agent import Agent
from ._deps import At, StartAt, ThreadAt, need
from ._http import json_object, json_response, read_json
from .auth import Forbidden
from .openapi import errors, ok, request_body

__all__ = ["router"]

_RESPONSES = {
    **ok("StepResult", "The run as the graph records it: completed, suspended or failed."),
    **errors(400, 401, 403, 404, 409, 410, 413),
}

Body = dict[str, Any]


def _mapping(body: Body, key: str) -> Mapping[str, Any] | None:
    v = body.get(key)
    if v is not None and not isinstance(v, dict):
        raise InvalidRequest(f"{key} is a JSON object", field=key)
    return v


def _str(body: Body, key: str) -> str | None:
    v = body.get(key)
    if v is not None and not isinstance(v, str):
        raise InvalidRequest(f"{key} is a string", field=key)
    return v


async def _step(agent: Agent, thread: str, body: Body) -> Any:
    result = await agent.step(
        body["input"],
        thread=thread,
        user=_str(body, "user"),
        context=_mapping(body, "context"),
        metadata=_mapping(body, "metadata"),
        # A token bound to a user: the thread stays theirs even if another user's first
        # turn lands between the route's check and this step's commit.
        owner=body.get("$owner"),
    )
    return result.to_dict()


async def _resume(agent: Agent, thread: str, body: Body) -> Any:
    return (await agent.resume(thread, context=_mapping(body, "context"))).to_dict()


def _decide(approve: bool) -> Callable[[Agent, str, Body], Awaitable[Any]]:
    async def decide(agent: Agent, thread: str, body: Body) -> Any:
        call = _str(body, "call") or ""
        resume = body.get("resume", True)
        if not isinstance(resume, bool):
            raise InvalidRequest("resume is true or false", field="resume")
        fn = agent.approve if approve else agent.reject
        result = await fn(
            thread,
            call,
            reason=_str(body, "reason"),
            context=_mapping(body, "context"),
            resume=resume,
        )
        if result is None:  # resume=False: only the decision was committed
            decision = "approved" if approve else "rejected"
            return {"thread": thread, "status": "decided", "call": call, "decision": decision}
        return result.to_dict()

    return decide


@dataclass(frozen=True, kw_only=True, slots=True)
class _Route:
    name: str
    grant: str
    summary: str
    schema: str  # the request body's component
    fields: frozenset[str]
    required: tuple[str, ...]
    call: Callable[[Agent, str, Body], Awaitable[Any]]


_DECISION = frozenset({"call", "reason", "context", "resume"})
ROUTES = (
    _Route(
        name="step",
        grant="agent.step",
        summary="Run one turn of the agent on this thread",
        schema="StepRequest",
        fields=frozenset({"input", "user", "context", "metadata"}),
        required=("input",),
        call=_step,
    ),
    _Route(
        name="resume",
        grant="agent.step",
        summary="Finish the thread's latest run from the graph (after a crash or shutdown)",
        schema="ResumeRequest",
        fields=frozenset({"context"}),
        required=(),
        call=_resume,
    ),
    *(
        _Route(
            name=name,
            grant="agent.approve",
            summary=f"{name.capitalize()} a pending tool call (and continue the run)",
            schema="DecisionRequest",
            fields=_DECISION,
            required=("call",),
            call=_decide(name == "approve"),
        )
        for name in ("approve", "reject")
    ),
)


def _body(data: Any, route: _Route) -> Body:
    what = f"the {route.name} request"
    body = json_object({} if data is None else data, what)
    for k in body:
        if k not in route.fields:
            known = ", ".join(sorted(route.fields))
            raise InvalidRequest(f"unknown field {k!r} in {what}; known: {known}", field=k)
    for k in route.required:
        if k not in body:
            raise InvalidRequest(f"{what} needs {k!r}", field=k)
    return body


def _add(r: APIRouter, route: _Route) -> None:
    async def run(at: At, request: Request) -> Response:
        body = _body(await read_json(request, required=bool(route.required)), route)
        thread = at.thread or ""
        thread_scope(thread)  # a bad id is a 400 before the agent is looked up
        if at.user is not None and route.name == "step":
            # A token bound to a user steps as that user: the goal records them, and the
            # thread's first turn makes it theirs.
            if body.get("user", at.user) != at.user:
                raise Forbidden(
                    f"this token is bound to user {at.user!r}; it cannot step as "
                    f"{body.get('user')!r}",
                    user=at.user,
                )
            body = {**body, "user": at.user, "$owner": at.user}
        agent = await at.server.agent_for(at.namespace)
        return json_response(await route.call(agent, thread, body))

    if route.name == "step":

        async def handler(request: Request, at: StartAt) -> Response:
            return await run(at, request)
    else:

        async def handler(request: Request, at: ThreadAt) -> Response:
            return await run(at, request)

    handler.__name__ = route.name
    r.add_api_route(
        f"/{route.name}",
        handler,
        methods=["POST"],
        dependencies=[need(route.grant)],
        summary=route.summary,
        openapi_extra=request_body(route.schema, required=bool(route.required)),
        responses=_RESPONSES,
    )


def router() -> APIRouter:
    r = APIRouter(prefix="/v1/ns/{namespace}/threads/{thread}", tags=["agent"])
    for route in ROUTES:
        _add(r, route)
    return r
