"""Resource-style endpoints under ``/v1/ns/{namespace}``: threads and what they hold.

The namespace is the path's ``{namespace}``; each route needs one grant on it
(``need``, in the route's ``dependencies``), checked before anything is read.
Operations go through ``tether.control`` exactly as ``/state/<operation>`` does
(``At.operation``); the few plain reads the inspector needs (thread listing,
resource heads, versions, a run's executor tree) are one store or memory call each.

On an encrypted store, erased data reads as erased (``tether.crypto``): resource
heads and versions hold ``{"$erased": true}`` payloads, describe and history
show what remains (``tether.control``); what cannot be shown without lying
(export, fork, a run's executor tree) answers 410 with code ``key_erased``;
verify checks what remains and counts the erased nodes. ``POST /users/{user}/erase`` erases a user (grant ``state.erase``).

Thread ids containing ``/`` cannot be named in a path: use ``/state/<operation>``
with ``thread`` in the body for those.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Annotated, Final

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response, StreamingResponse

from .. import control
from ..control.prune import pruned_run
from ..control.types import MAX_PAGE, StateOperationRequest
from ..core import scopes
from ..core.errors import InvalidRequest, NotFound
from ..crypto import erased_placeholders
from ..projections.execution import execution_view
from ..store.base import check_name
from ._access import Owners, refuse_thread_import
from ._deps import NamespaceAt, NamespacePath, ThreadAt, ThreadPath, need
from ._http import json_object, json_response, read_json
from .openapi import errors, ok, request_body

__all__ = ["NamespacePath", "ThreadPath", "router"]

_MAX_THREADS: Final = 500
_MAX_VERSIONS: Final = 1000
_FILENAME_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")

_READ = errors(400, 401, 403, 410, 413)
_RESULT = ok("StateOperationResult", "The operation's result.")
Stores = Annotated[str | None, Query(max_length=200, description="comma-separated")]
Llm = Annotated[str, Query(min_length=1, max_length=200)]
ScopeQuery = Annotated[str, Query(min_length=1, max_length=256, examples=["thread:t1"])]


def _stores(value: str | None) -> tuple[str, ...]:
    return tuple(s.strip() for s in value.split(",") if s.strip()) if value else ()


def _scope(value: str) -> str:
    """A scope name from a query parameter: ``app``, ``user:<id>`` or ``thread:<id>``."""
    check_name("scope", value)
    kind, ident = scopes.parse(value)
    if ident is not None:
        # The same rules as a request's thread/user fields.
        StateOperationRequest(user=ident) if kind == "user" else StateOperationRequest(thread=ident)
    return value


def router() -> APIRouter:
    r = APIRouter(prefix="/v1/ns/{namespace}", tags=["namespace"])
    describe, history = [need("state.describe")], [need("state.history")]

    @r.get(
        "/threads",
        summary="The threads of a namespace, paged by thread id",
        dependencies=describe,
        responses={**ok("Threads", "One page of threads."), **_READ},
    )
    async def list_threads(
        at: NamespaceAt,
        after: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
        limit: Annotated[int, Query(ge=1, le=_MAX_THREADS)] = 100,
    ) -> Response:
        ns = check_name("namespace", at.namespace)
        store = await at.store()
        cursor = None if after is None else "thread:" + after
        page = await store.list_scopes(ns, prefix="thread:", after=cursor, limit=limit + 1)
        rows = []
        owners = Owners(store, ns) if at.user is not None else None
        for info in page[:limit]:
            thread = info.scope.removeprefix("thread:")
            if owners is not None and await owners.of(thread) != at.user:
                continue  # a token bound to a user lists that user's threads only
            stats = await store.stats(ns, info.scope)
            with erased_placeholders(True):  # only its createdAt is read
                newest = await store.nodes(ns, info.scope, limit=1, descending=True)
            rows.append(
                {
                    "thread": info.scope.removeprefix("thread:"),
                    "scope": info.scope,
                    # The nodes held (after a prune, fewer than the sequence).
                    "nodes": stats.nodes,
                    "sequence": info.sequence,
                    "generation": info.generation,
                    "size_bytes": stats.payload_bytes,
                    "runs": stats.kinds.get("goal", 0),
                    "last_activity": newest[0].created_at if newest else None,
                }
            )
        more = len(page) > limit
        next_after = page[limit - 1].scope.removeprefix("thread:") if more else None
        return json_response({"namespace": ns, "threads": rows, "next_after": next_after})

    @r.get(
        "/threads/{thread}",
        summary="Describe a thread: graph, conversation, variables, memory, executions",
        dependencies=describe,
        responses={**_RESULT, **_READ},
    )
    async def describe_thread(
        at: ThreadAt, include_data: bool = False, llm: Llm = "agent", stores: Stores = None
    ) -> Response:
        return await at.operation(
            "describe", include_data=include_data, llm=llm, stores=_stores(stores)
        )

    @r.delete(
        "/threads/{thread}",
        summary="Reset a thread (or only some stores, a variable or a run of it)",
        dependencies=[need("state.reset")],
        responses={**_RESULT, **_READ, **errors(409)},
    )
    async def reset_thread(
        at: ThreadAt,
        stores: Stores = None,
        variable: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
        run: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
        llm: Llm = "agent",
    ) -> Response:
        return await at.operation(
            "reset", stores=_stores(stores), variable=variable, run=run, llm=llm
        )

    @r.get(
        "/threads/{thread}/history",
        summary="A page of a thread's nodes, in sequence order",
        dependencies=history,
        responses={**_RESULT, **_READ},
    )
    async def thread_history(
        at: ThreadAt,
        after: Annotated[int, Query(ge=0)] = 0,
        before: Annotated[int | None, Query(ge=1)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        descending: bool = False,
    ) -> Response:
        return await at.operation(
            "history", after=after, before=before, limit=limit, descending=descending
        )

    @r.get(
        "/threads/{thread}/export",
        summary="The thread's snapshot (SPEC §1), streamed",
        dependencies=[need("state.export")],
        responses={**ok("Snapshot", "The snapshot, as `tether export` writes it."), **_READ},
    )
    async def export_thread(at: ThreadAt) -> Response:
        scope = at.request().scope
        assert scope is not None and at.thread is not None
        chunks = control.export_chunks(await at.store(), at.namespace, scope)
        # The first chunk is produced after the head is read: errors before it get a
        # proper status; the rest streams a page of nodes at a time.
        first = await anext(chunks)

        async def body() -> AsyncIterator[bytes]:
            yield first
            async for c in chunks:
                yield c

        name = _FILENAME_UNSAFE.sub("_", at.thread)[:100] or "thread"
        return StreamingResponse(
            body(),
            media_type="application/json",
            headers={"Content-Disposition": f'attachment; filename="{name}.json"'},
        )

    @r.post(
        "/threads/{thread}/import",
        summary="Validate a snapshot and write it as this (empty) thread",
        dependencies=[need("state.import")],
        openapi_extra=request_body("Snapshot"),
        responses={**_RESULT, **_READ, **errors(409, 422)},
    )
    async def import_thread(request: Request, at: ThreadAt, replace: bool = False) -> Response:
        refuse_thread_import(at)
        snapshot = json_object(await read_json(request, snapshot=True), "a snapshot")
        return await at.operation("import", snapshot=snapshot, replace=replace)

    @r.post(
        "/threads/{thread}/fork",
        summary="A new thread from any node of this one",
        dependencies=[need("state.fork")],
        openapi_extra=request_body("ForkRequest"),
        responses={**_RESULT, **_READ, **errors(404, 409)},
    )
    async def fork_thread(request: Request, at: ThreadAt) -> Response:
        body = json_object(await read_json(request), "a fork request")
        unknown = set(body) - {"node", "new_thread"}
        if unknown:
            raise InvalidRequest(
                f"unknown field {sorted(unknown)[0]!r}; a fork request has node and new_thread",
                field=sorted(unknown)[0],
            )
        return await at.operation("fork", node=body.get("node"), new_thread=body.get("new_thread"))

    @r.post(
        "/threads/{thread}/prune",
        summary="Remove what nothing current needs from the thread, or say what would go",
        description=(
            "What a compaction summary stands for, versions of variables and memories "
            "past keep_versions, and of runs finished before finished_before what no view "
            "shows. The current version of everything, unfinished runs and the latest run "
            "stay; the remaining nodes keep their ids and a record of the cut lets verify "
            "prove them. dry_run: what would be freed, nothing changed. A writer that "
            "computed against the head before gets 409. Needs the grant `state.prune`."
        ),
        dependencies=[need("state.prune")],
        openapi_extra=request_body("PruneRequest", required=False),
        responses={
            **ok("PruneResult", "What was (or, dry_run, would be) removed."),
            **errors(400, 401, 403, 409, 413),
        },
    )
    async def prune_thread(request: Request, at: ThreadAt) -> Response:
        raw = await read_json(request, required=False)
        body = {} if raw is None else json_object(raw, "a prune request")
        allowed = {"keep_versions", "finished_before", "compacted", "forget_runs", "dry_run"}
        unknown = set(body) - allowed
        if unknown:
            raise InvalidRequest(
                f"unknown field {sorted(unknown)[0]!r}; a prune request has "
                + ", ".join(sorted(allowed)),
                field=sorted(unknown)[0],
            )
        result = await control.prune(
            await at.store(),
            at.namespace,
            thread=at.thread,
            compacted=body.get("compacted", True),
            keep_versions=body.get("keep_versions"),
            finished_before=body.get("finished_before"),
            forget_runs=body.get("forget_runs", False),
            dry_run=body.get("dry_run", False),
        )
        return json_response(result.to_dict())

    @r.get(
        "/threads/{thread}/verify",
        summary="Recompute every identity and link of the thread",
        dependencies=[need("state.verify")],
        responses={**_RESULT, **_READ, **errors(409)},
    )
    async def verify_thread(at: ThreadAt) -> Response:
        return await at.operation("verify")

    @r.get(
        "/threads/{thread}/runs/{run}",
        summary="A run's execution state: seed 000's executor tree, derived from the graph",
        dependencies=describe,
        responses={**ok("Execution", "The run's executor tree."), **_READ, **errors(404)},
    )
    async def run_execution(
        at: ThreadAt, run: Annotated[str, Path(min_length=1, max_length=200)]
    ) -> Response:
        at.request(run=run)  # validates all three
        assert at.thread is not None
        store = await at.store()
        try:
            with erased_placeholders():  # other runs may be erased; this one's erasure is a 410
                view = await execution_view(store, at.namespace, at.thread, run)
        except NotFound:
            if (gone := await pruned_run(store, at.namespace, at.thread, run)) is not None:
                raise gone from None
            raise
        return json_response(view.to_dict())

    @r.get(
        "/resources",
        summary="The current node of every resource key of a scope (variables, memory)",
        dependencies=describe,
        responses={**ok("Resources", "Resource heads by key."), **_READ},
    )
    async def resources(
        at: NamespaceAt,
        scope: ScopeQuery,
        prefix: Annotated[str, Query(max_length=512, examples=["var:", "semantic:"])] = "",
    ) -> Response:
        ns = check_name("namespace", at.namespace)
        store = await at.store()
        await at.allow(_scope(scope))
        with erased_placeholders():  # an erased value is shown as {"$erased": true}
            heads = await store.resource_heads(ns, _scope(scope), prefix)
        resources = {k: n.to_dict() for k, n in sorted(heads.items())}
        return json_response(
            {"namespace": ns, "scope": scope, "prefix": prefix, "resources": resources}
        )

    @r.get(
        "/versions",
        summary="Every version of one resource key of a scope, oldest first",
        dependencies=history,
        responses={**ok("Versions", "The key's versions."), **_READ},
    )
    async def versions(
        at: NamespaceAt,
        scope: ScopeQuery,
        key: Annotated[str, Query(min_length=1, max_length=512, examples=["var:city"])],
        limit: Annotated[int, Query(ge=1, le=_MAX_VERSIONS)] = 100,
    ) -> Response:
        ns = check_name("namespace", at.namespace)
        store = await at.store()
        await at.allow(_scope(scope))
        with erased_placeholders():  # an erased version is shown as {"$erased": true}
            nodes = await store.versions(ns, _scope(scope), key, limit=limit)
        found = [n.to_dict() for n in nodes]
        return json_response({"namespace": ns, "scope": scope, "key": key, "versions": found})

    @r.post(
        "/users/{user}/erase",
        summary="Erase a user of an encrypted store: destroy their data key, for good",
        description=(
            "Every payload of user:{user} and of the threads bound to the user becomes "
            "unreadable at once (in every copy of the database); nodes and ids stay. Also "
            "takes the user's runs out of the run index. 409 (not_encrypted) on a store "
            "opened without a master key. Needs the grant `state.erase`."
        ),
        dependencies=[need("state.erase")],
        responses={
            **ok("ErasureResult", "What was destroyed."),
            **errors(400, 401, 403, 409, 413),
        },
    )
    async def erase_user(
        at: NamespaceAt, user: Annotated[str, Path(min_length=1, max_length=200)]
    ) -> Response:
        at.request(user=user)  # validates both
        await at.allow(scopes.user(user))
        result = await control.erase_user(await at.store(), at.namespace, user)
        return json_response(result.to_dict())

    return r
