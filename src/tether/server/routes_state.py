"""Seed 002's endpoints, one per control-plane operation: ``POST /state/<operation>``.

The body is a ``StateOperationRequest`` (the namespace is its ``namespace``
field; without one, the token's only namespace or ``"default"``); the response is
the operation's ``StateOperationResult.to_dict()``. Each needs the grant
``state.<operation>`` on that namespace. The work is ``tether.control``; these
routes read and answer as seed 002's own clients expect (``seed_state``: lenient
request fields, a reset without a session resets the namespace, store names first).
"""

# No `from __future__ import annotations`: FastAPI reads the route signature built
# in _add, whose dependency names a local (the grant).
import contextlib
import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from ..control.types import OPERATIONS, StateOperationRequest
from ..core import scopes
from ..core.errors import NotFound
from ..store import Store
from ._access import refuse_thread_import, require_scope
from ._deps import need, server_of
from ._http import json_object, json_response, read_json
from .auth import Token
from .openapi import errors, ok, request_body
from .seed_state import parse
from .seed_state import run as run_seed

__all__ = ["router"]

_SUMMARIES = {
    "describe": "What exists: per-store counts and sizes (data optional)",
    "reset": "Clear exactly what is named: a thread, user, app, variable, run or namespace",
    "compact": "Compact a thread's conversation behind a summary (non-destructive)",
    "export": "A scope's snapshot (SPEC §1)",
    "import": "Validate a snapshot and write it into an empty scope",
    "history": "One page of a scope's nodes",
    "fork": "A new thread from any node",
    "verify": "Recompute identities and links of a scope, a namespace or a snapshot",
}


def router() -> APIRouter:
    r = APIRouter(prefix="/state", tags=["state (seed 002)"])
    for op in OPERATIONS:
        _add(r, op)
    return r


async def _allow_user(token: Token, store: Store, op: str, req: StateOperationRequest) -> None:
    """A token bound to a user: only that user's scope and threads (``_access``)."""
    if op == "verify" and req.snapshot is not None:
        return  # a snapshot in the body: nothing of the store is read
    if op == "import" and req.thread is not None:
        refuse_thread_import(_Held(token))
    scope = None if req.whole_namespace else req.scope
    await require_scope(token, store, req.namespace, scope)
    if op == "fork" and req.new_thread is not None:
        # The copy is a new thread: it must be empty (fork refuses otherwise), and it
        # carries the source's goals, so it is the same user's.
        await require_scope(token, store, req.namespace, scopes.thread(req.new_thread), start=True)


@dataclasses.dataclass(frozen=True, slots=True)
class _Held:
    token: Token | None


def _add(r: APIRouter, op: str) -> None:
    grant = f"state.{op}"

    async def run(request: Request, token: Annotated[Token, need(grant)]) -> Response:
        body = await read_json(request, required=False, snapshot=op in ("import", "verify"))
        parsed = parse(
            op,
            None if body is None else json_object(body, "a StateOperationRequest"),
            namespace=token.only_namespace,
        )
        req = parsed.request
        token.require(grant, req.namespace)
        server = server_of(request)
        if token.user is not None:
            await _allow_user(token, await server.store(), op, req)
        options: dict[str, Any] = {}
        enabled: tuple[str, ...] | None = None
        if server.has_agent:
            with contextlib.suppress(NotFound):
                agent = await server.agent_for(req.namespace)
                # The agent's modules (Agent(state=[...])) are what these routes act on.
                enabled = agent.state_modules
                if op == "compact" and req.strategy == "summary":
                    # The summary strategy asks the namespace's model.
                    options["model"] = agent.model
        result = await run_seed(await server.store(), op, parsed, enabled=enabled, **options)
        return json_response(result.to_dict())

    run.__name__ = f"state_{op}"
    r.add_api_route(
        f"/{op}",
        run,
        methods=["POST"],
        summary=_SUMMARIES[op],
        description=(
            f"Needs the grant `{grant}` on the body's `namespace`. "
            "The body is a StateOperationRequest, read as seed 002 reads it: unknown "
            "fields are ignored, null is the default, 20.0 is an integer."
        ),
        operation_id=f"state_{op}",
        openapi_extra=request_body("StateOperationRequest", required=False),
        responses={
            **ok("StateOperationResult", "The operation's result."),
            **errors(400, 401, 403, 404, 409, 410, 413, 422),
        },
    )
