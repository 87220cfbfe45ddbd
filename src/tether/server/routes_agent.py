"""Agent turns over HTTP (only when the server was given an agent).

``POST /v1/ns/{namespace}/threads/{thread}/step`` runs one turn; ``approve`` and
``reject`` decide a pending tool call (and by default continue the run);
``resume`` finishes an interrupted run. Each returns ``StepResult.to_dict()``:
a completed, suspended or failed run is a 200 with that status (the run's own
failure is data, not an HTTP error). Grants: ``agent.step`` (step, resume) and
``agent.approve`` (approve, reject).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from .._errors import InvalidRequest
from ..scopes import thread as thread_scope
from ._deps import need, server_of
from ._http import json_object, json_response, read_json
from ._schemas import ref
from .auth import Token
from .openapi import errors
from .routes_ns import NamespacePath, ThreadPath

__all__ = ["router"]

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The run as the graph records it: completed, suspended or failed.",
        "content": {"application/json": {"schema": ref("StepResult")}},
    },
    **errors(400, 401, 403, 404, 409, 410, 413),
}


def _body(
    data: Any, what: str, allowed: set[str], required: tuple[str, ...] = ()
) -> dict[str, Any]:
    body = json_object({} if data is None else data, what)
    for k in body:
        if k not in allowed:
            raise InvalidRequest(
                f"unknown field {k!r} in {what}; known: {', '.join(sorted(allowed))}", field=k
            )
    for k in required:
        if k not in body:
            raise InvalidRequest(f"{what} needs {k!r}", field=k)
    return body


def _mapping(body: dict[str, Any], key: str) -> Mapping[str, Any] | None:
    v = body.get(key)
    if v is not None and not isinstance(v, dict):
        raise InvalidRequest(f"{key} is a JSON object", field=key)
    return v


def _str(body: dict[str, Any], key: str) -> str | None:
    v = body.get(key)
    if v is not None and not isinstance(v, str):
        raise InvalidRequest(f"{key} is a string", field=key)
    return v


def _request_body(schema: str, required: bool) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": required,
            "content": {"application/json": {"schema": ref(schema)}},
        }
    }


def router() -> APIRouter:
    r = APIRouter(prefix="/v1/ns/{namespace}/threads/{thread}", tags=["agent"])

    @r.post(
        "/step",
        summary="Run one turn of the agent on this thread",
        openapi_extra=_request_body("StepRequest", True),
        responses=_RESPONSES,
    )
    async def step(
        request: Request,
        token: Annotated[Token, need("agent.step")],
        namespace: NamespacePath,
        thread: ThreadPath,
    ) -> Response:
        body = _body(
            await read_json(request),
            "a step request",
            {"input", "user", "context", "metadata"},
            ("input",),
        )
        thread_scope(thread)
        agent = await server_of(request).agent_for(namespace)
        result = await agent.step(
            body["input"],
            thread=thread,
            user=_str(body, "user"),
            context=_mapping(body, "context"),
            metadata=_mapping(body, "metadata"),
        )
        return json_response(result.to_dict())

    @r.post(
        "/resume",
        summary="Finish the thread's latest run from the graph (after a crash or shutdown)",
        openapi_extra=_request_body("ResumeRequest", False),
        responses=_RESPONSES,
    )
    async def resume(
        request: Request,
        token: Annotated[Token, need("agent.step")],
        namespace: NamespacePath,
        thread: ThreadPath,
    ) -> Response:
        body = _body(await read_json(request, required=False), "a resume request", {"context"})
        thread_scope(thread)
        agent = await server_of(request).agent_for(namespace)
        result = await agent.resume(thread, context=_mapping(body, "context"))
        return json_response(result.to_dict())

    def decision(approve: bool) -> Any:
        async def decide(
            request: Request,
            token: Annotated[Token, need("agent.approve")],
            namespace: NamespacePath,
            thread: ThreadPath,
        ) -> Response:
            body = _body(
                await read_json(request),
                "a decision",
                {"call", "reason", "context", "resume"},
                ("call",),
            )
            call = _str(body, "call")
            resume = body.get("resume", True)
            if not isinstance(resume, bool):
                raise InvalidRequest("resume is true or false", field="resume")
            thread_scope(thread)
            agent = await server_of(request).agent_for(namespace)
            fn = agent.approve if approve else agent.reject
            result = await fn(
                thread,
                call or "",
                reason=_str(body, "reason"),
                context=_mapping(body, "context"),
                resume=resume,
            )
            if result is None:
                return json_response(
                    {
                        "thread": thread,
                        "status": "decided",
                        "call": call,
                        "decision": "approved" if approve else "rejected",
                    }
                )
            return json_response(result.to_dict())

        decide.__name__ = "approve" if approve else "reject"
        return decide

    for approve in (True, False):
        name = "approve" if approve else "reject"
        r.add_api_route(
            f"/{name}",
            decision(approve),
            methods=["POST"],
            summary=f"{name.capitalize()} a pending tool call (and continue the run)",
            openapi_extra=_request_body("DecisionRequest", True),
            responses=_RESPONSES,
        )
    return r
