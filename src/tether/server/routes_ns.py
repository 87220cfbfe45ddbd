"""Resource-style endpoints under ``/v1/ns/{namespace}``: threads and what they hold.

The namespace is the path's ``{namespace}``; each route needs one grant on it
(``need``), checked before anything is read. Operations go through
``tether.control`` exactly as ``/state/<operation>`` does; the few plain reads the
inspector needs (thread listing, resource heads, versions, a run's executor
tree) are one store or memory call each.

On an encrypted store, erased data reads as erased (``tether.crypto``): resource
heads and versions hold ``{"$erased": true}`` payloads, describe and history
show what remains (``tether.control``); what cannot be shown without lying
(export, verify, fork, a run's executor tree) answers 410 with code
``key_erased``. ``POST /users/{user}/erase`` erases a user (grant ``state.erase``).

Thread ids containing ``/`` cannot be named in a path: use ``/state/<operation>``
with ``thread`` in the body for those.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Annotated, Any, Final

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response, StreamingResponse

from .. import control, scopes
from .._errors import InvalidRequest
from ..control.types import MAX_PAGE, StateOperationRequest
from ..crypto import erased_placeholders
from ..memory.execution import execution_view
from ..store._base import check_name
from ._deps import need, server_of
from ._http import json_object, json_response, read_json
from .auth import Token
from .openapi import errors, ok, request_body

__all__ = ["NamespacePath", "ThreadPath", "router"]

NamespacePath = Annotated[str, Path(min_length=1, max_length=256)]
ThreadPath = Annotated[str, Path(min_length=1, max_length=200)]
_MAX_THREADS: Final = 500
_MAX_VERSIONS: Final = 1000
_FILENAME_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


_READ = errors(400, 401, 403, 410, 413)
_RESULT = ok("StateOperationResult", "The operation's result.")


def _stores(value: str | None) -> tuple[str, ...]:
    return tuple(s.strip() for s in value.split(",") if s.strip()) if value else ()


def _request(namespace: str, **fields: Any) -> StateOperationRequest:
    return StateOperationRequest(namespace=namespace, **fields)


def _scope(value: str) -> str:
    """A scope name from a query parameter: ``app``, ``user:<id>`` or ``thread:<id>``."""
    check_name("scope", value)
    kind, ident = scopes.parse(value)
    if ident is not None:
        # The same rules as a request's thread/user fields.
        _request("default", **{kind: ident})
    return value


def router() -> APIRouter:
    r = APIRouter(prefix="/v1/ns/{namespace}", tags=["namespace"])

    @r.get(
        "/threads",
        summary="The threads of a namespace, paged by thread id",
        responses={**ok("Threads", "One page of threads."), **_READ},
    )
    async def list_threads(
        request: Request,
        token: Annotated[Token, need("state.describe")],
        namespace: NamespacePath,
        after: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
        limit: Annotated[int, Query(ge=1, le=_MAX_THREADS)] = 100,
    ) -> Response:
        check_name("namespace", namespace)
        store = await server_of(request).store()
        cursor = None if after is None else "thread:" + after
        page = await store.list_scopes(namespace, prefix="thread:", after=cursor, limit=limit + 1)
        rows = []
        for info in page[:limit]:
            stats = await store.stats(namespace, info.scope)
            rows.append(
                {
                    "thread": info.scope.removeprefix("thread:"),
                    "scope": info.scope,
                    "nodes": info.sequence,
                    "generation": info.generation,
                    "size_bytes": stats.payload_bytes,
                    "runs": stats.kinds.get("goal", 0),
                }
            )
        more = len(page) > limit and rows
        return json_response(
            {
                "namespace": namespace,
                "threads": rows,
                "next_after": rows[-1]["thread"] if more else None,
            }
        )

    @r.get(
        "/threads/{thread}",
        summary="Describe a thread: graph, conversation, variables, memory, executions",
        responses={**_RESULT, **_READ},
    )
    async def describe_thread(
        request: Request,
        token: Annotated[Token, need("state.describe")],
        namespace: NamespacePath,
        thread: ThreadPath,
        include_data: bool = False,
        llm: Annotated[str, Query(min_length=1, max_length=200)] = "agent",
        stores: Annotated[str | None, Query(max_length=200, description="comma-separated")] = None,
    ) -> Response:
        req = _request(
            namespace, thread=thread, include_data=include_data, llm=llm, stores=_stores(stores)
        )
        result = await control.describe(await server_of(request).store(), req)
        return json_response(result.to_dict())

    @r.delete(
        "/threads/{thread}",
        summary="Reset a thread (or only some stores, a variable or a run of it)",
        responses={**_RESULT, **_READ, **errors(409)},
    )
    async def reset_thread(
        request: Request,
        token: Annotated[Token, need("state.reset")],
        namespace: NamespacePath,
        thread: ThreadPath,
        stores: Annotated[str | None, Query(max_length=200, description="comma-separated")] = None,
        variable: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
        run: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
        llm: Annotated[str, Query(min_length=1, max_length=200)] = "agent",
    ) -> Response:
        req = _request(
            namespace, thread=thread, stores=_stores(stores), variable=variable, run=run, llm=llm
        )
        result = await control.reset(await server_of(request).store(), req)
        return json_response(result.to_dict())

    @r.get(
        "/threads/{thread}/history",
        summary="A page of a thread's nodes, in sequence order",
        responses={**_RESULT, **_READ},
    )
    async def thread_history(
        request: Request,
        token: Annotated[Token, need("state.history")],
        namespace: NamespacePath,
        thread: ThreadPath,
        after: Annotated[int, Query(ge=0)] = 0,
        before: Annotated[int | None, Query(ge=1)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        descending: bool = False,
    ) -> Response:
        req = _request(
            namespace,
            thread=thread,
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )
        result = await control.history(await server_of(request).store(), req)
        return json_response(result.to_dict())

    @r.get(
        "/threads/{thread}/export",
        summary="The thread's snapshot (SPEC §1), streamed",
        responses={**ok("Snapshot", "The snapshot, as `tether export` writes it."), **_READ},
    )
    async def export_thread(
        request: Request,
        token: Annotated[Token, need("state.export")],
        namespace: NamespacePath,
        thread: ThreadPath,
    ) -> Response:
        scope = _request(namespace, thread=thread).scope
        assert scope is not None
        chunks = control.export_chunks(await server_of(request).store(), namespace, scope)
        # The first chunk is produced after the head is read: errors before it get a
        # proper status; the rest streams a page of nodes at a time.
        first = await anext(chunks)

        async def body() -> AsyncIterator[bytes]:
            yield first
            async for c in chunks:
                yield c

        name = _FILENAME_UNSAFE.sub("_", thread)[:100] or "thread"
        return StreamingResponse(
            body(),
            media_type="application/json",
            headers={"Content-Disposition": f'attachment; filename="{name}.json"'},
        )

    @r.post(
        "/threads/{thread}/import",
        summary="Validate a snapshot and write it as this (empty) thread",
        openapi_extra=request_body("Snapshot"),
        responses={**_RESULT, **_READ, **errors(409, 422)},
    )
    async def import_thread(
        request: Request,
        token: Annotated[Token, need("state.import")],
        namespace: NamespacePath,
        thread: ThreadPath,
        replace: bool = False,
    ) -> Response:
        snapshot = json_object(await read_json(request), "a snapshot")
        req = _request(namespace, thread=thread, snapshot=snapshot, replace=replace)
        result = await control.import_(await server_of(request).store(), req)
        return json_response(result.to_dict())

    @r.post(
        "/threads/{thread}/fork",
        summary="A new thread from any node of this one",
        openapi_extra=request_body("ForkRequest"),
        responses={**_RESULT, **_READ, **errors(404, 409)},
    )
    async def fork_thread(
        request: Request,
        token: Annotated[Token, need("state.fork")],
        namespace: NamespacePath,
        thread: ThreadPath,
    ) -> Response:
        body = json_object(await read_json(request), "a fork request")
        unknown = set(body) - {"node", "new_thread"}
        if unknown:
            raise InvalidRequest(
                f"unknown field {sorted(unknown)[0]!r}; a fork request has node and new_thread",
                field=sorted(unknown)[0],
            )
        req = _request(
            namespace, thread=thread, node=body.get("node"), new_thread=body.get("new_thread")
        )
        result = await control.fork(await server_of(request).store(), req)
        return json_response(result.to_dict())

    @r.get(
        "/threads/{thread}/verify",
        summary="Recompute every identity and link of the thread",
        responses={**_RESULT, **_READ, **errors(409)},
    )
    async def verify_thread(
        request: Request,
        token: Annotated[Token, need("state.verify")],
        namespace: NamespacePath,
        thread: ThreadPath,
    ) -> Response:
        req = _request(namespace, thread=thread)
        result = await control.verify(await server_of(request).store(), req)
        return json_response(result.to_dict())

    @r.get(
        "/threads/{thread}/runs/{run}",
        summary="A run's execution state: seed 000's executor tree, derived from the graph",
        responses={**ok("Execution", "The run's executor tree."), **_READ, **errors(404)},
    )
    async def run_execution(
        request: Request,
        token: Annotated[Token, need("state.describe")],
        namespace: NamespacePath,
        thread: ThreadPath,
        run: Annotated[str, Path(min_length=1, max_length=200)],
    ) -> Response:
        _request(namespace, thread=thread, run=run)  # validates all three
        with erased_placeholders():  # other runs may be erased; this one's erasure is a 410
            view = await execution_view(await server_of(request).store(), namespace, thread, run)
        return json_response(view.to_dict())

    @r.get(
        "/resources",
        summary="The current node of every resource key of a scope (variables, memory)",
        responses={**ok("Resources", "Resource heads by key."), **_READ},
    )
    async def resources(
        request: Request,
        token: Annotated[Token, need("state.describe")],
        namespace: NamespacePath,
        scope: Annotated[str, Query(min_length=1, max_length=256, examples=["thread:t1"])],
        prefix: Annotated[str, Query(max_length=512, examples=["var:", "semantic:"])] = "",
    ) -> Response:
        check_name("namespace", namespace)
        store = await server_of(request).store()
        with erased_placeholders():  # an erased value is shown as {"$erased": true}
            heads = await store.resource_heads(namespace, _scope(scope), prefix)
        return json_response(
            {
                "namespace": namespace,
                "scope": scope,
                "prefix": prefix,
                "resources": {k: n.to_dict() for k, n in sorted(heads.items())},
            }
        )

    @r.get(
        "/versions",
        summary="Every version of one resource key of a scope, oldest first",
        responses={**ok("Versions", "The key's versions."), **_READ},
    )
    async def versions(
        request: Request,
        token: Annotated[Token, need("state.history")],
        namespace: NamespacePath,
        scope: Annotated[str, Query(min_length=1, max_length=256, examples=["thread:t1"])],
        key: Annotated[str, Query(min_length=1, max_length=512, examples=["var:city"])],
        limit: Annotated[int, Query(ge=1, le=_MAX_VERSIONS)] = 100,
    ) -> Response:
        check_name("namespace", namespace)
        store = await server_of(request).store()
        with erased_placeholders():  # an erased version is shown as {"$erased": true}
            nodes = await store.versions(namespace, _scope(scope), key, limit=limit)
        return json_response(
            {
                "namespace": namespace,
                "scope": scope,
                "key": key,
                "versions": [n.to_dict() for n in nodes],
            }
        )

    @r.post(
        "/users/{user}/erase",
        summary="Erase a user of an encrypted store: destroy their data key, for good",
        description=(
            "Every payload of user:{user} and of the threads bound to the user becomes "
            "unreadable at once (in every copy of the database); nodes and ids stay. Also "
            "takes the user's runs out of the run index. 409 (not_encrypted) on a store "
            "opened without a master key. Needs the grant `state.erase`."
        ),
        responses={
            **ok("ErasureResult", "What was destroyed."),
            **errors(400, 401, 403, 409, 413),
        },
    )
    async def erase_user(
        request: Request,
        token: Annotated[Token, need("state.erase")],
        namespace: NamespacePath,
        user: Annotated[str, Path(min_length=1, max_length=200)],
    ) -> Response:
        _request(namespace, user=user)  # validates both
        result = await control.erase_user(await server_of(request).store(), namespace, user)
        return json_response(result.to_dict())

    return r
