"""Usage and retention over HTTP, under ``/v1/ns/{namespace}`` (issue 43).

* ``GET /stats``: the namespace's totals (``control.usage``); ``GET /stats/scopes``: a
  page of its scopes with their usage; ``GET /threads/{thread}/stats``: one thread's.
  Grant ``state.describe`` (the same counts and sizes ``describe`` gives).
* ``GET /retention`` (``state.describe``) and ``PUT /retention`` (``state.gc``): the
  namespace's retention policy.
* ``POST /gc`` (``state.gc``): apply it (``control.gc``), or with ``dry_run`` say what
  it would delete and forget. Each deletion is conditional (a turn written meanwhile
  keeps its thread), so several callers and cron jobs may run it at once.

A token bound to a user reads its own threads' stats only: every namespace-wide route
here refuses it (403) before anything is read.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from .. import control
from ..control import retention as ret
from ..control.stats import scope_usage
from ..core import scopes
from ..core.errors import InvalidRequest
from ..store.base import check_name
from ._deps import NamespaceAt, ThreadAt, need
from ._http import json_object, json_response, read_json
from .openapi import errors, ok, request_body

__all__ = ["router"]

_MAX_PAGE: Final = 500
_READ = errors(400, 401, 403, 413)


def _fields(body: dict[str, Any], allowed: set[str], what: str) -> dict[str, Any]:
    unknown = set(body) - allowed
    if unknown:
        name = sorted(unknown)[0]
        raise InvalidRequest(
            f"unknown field {name!r}; {what} has " + ", ".join(sorted(allowed)), field=name
        )
    return body


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise InvalidRequest(f"{name} is true or false, got {value!r}", field=name)
    return value


def router() -> APIRouter:
    r = APIRouter(prefix="/v1/ns/{namespace}", tags=["lifecycle"])
    describe, gc_grant = [need("state.describe")], [need("state.gc")]

    @r.get(
        "/stats",
        summary="A namespace's usage: scopes, nodes, stored payload bytes, last activity",
        description=(
            "Costs one stats read and one newest-node read per scope. Needs the grant "
            "`state.describe`; a token bound to a user is refused (it sees its threads' "
            "stats only)."
        ),
        dependencies=describe,
        responses={**ok("NamespaceUsage", "The namespace's totals."), **_READ},
    )
    async def namespace_stats(at: NamespaceAt) -> Response:
        await at.allow(None)
        report = await control.usage(await at.store(), at.namespace, scopes=False)
        return json_response(report.namespaces[0].to_dict())

    @r.get(
        "/stats/scopes",
        summary="A page of a namespace's scopes with their usage, by scope name",
        dependencies=describe,
        responses={**ok("ScopeUsagePage", "One page of scopes."), **_READ},
    )
    async def scope_stats(
        at: NamespaceAt,
        prefix: Annotated[str, Query(max_length=256, examples=["thread:", "user:"])] = "",
        after: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
        limit: Annotated[int, Query(ge=1, le=_MAX_PAGE)] = 100,
    ) -> Response:
        await at.allow(None)
        if after is not None:
            check_name("scope", after)
        store = await at.store()
        page = await store.list_scopes(at.namespace, prefix=prefix, after=after, limit=limit + 1)
        rows = [
            (await scope_usage(store, at.namespace, info.scope)).to_dict() for info in page[:limit]
        ]
        more = len(page) > limit
        return json_response(
            {
                "namespace": at.namespace,
                "scopes": rows,
                "next_after": page[limit - 1].scope if more else None,
            }
        )

    @r.get(
        "/threads/{thread}/stats",
        summary="A thread's usage: nodes, stored payload bytes, generation, last activity",
        dependencies=describe,
        responses={**ok("ScopeUsage", "The thread's usage."), **_READ},
    )
    async def thread_stats(at: ThreadAt) -> Response:
        assert at.thread is not None
        at.request()  # validates the thread id
        found = await scope_usage(await at.store(), at.namespace, scopes.thread(at.thread))
        return json_response(found.to_dict())

    @r.get(
        "/retention",
        summary="The namespace's retention policy (null: everything is kept)",
        dependencies=describe,
        responses={**ok("Retention", "The policy."), **_READ},
    )
    async def get_retention(at: NamespaceAt) -> Response:
        await at.allow(None)
        policy = await ret.retention(await at.store(), at.namespace)
        return json_response(
            {"namespace": at.namespace, "policy": None if policy is None else policy.to_dict()}
        )

    @r.put(
        "/retention",
        summary="Set the namespace's retention policy (applied by POST /gc)",
        description=(
            "The body is the whole policy: an absent or null field keeps that kind forever. "
            "Needs the grant `state.gc`."
        ),
        dependencies=gc_grant,
        openapi_extra=request_body("RetentionPolicy"),
        responses={**ok("Retention", "The policy set."), **_READ},
    )
    async def put_retention(request: Request, at: NamespaceAt) -> Response:
        await at.allow(None)
        body = json_object(await read_json(request), "a retention policy")
        wanted = ret.RetentionPolicy.from_dict(body)
        policy = await ret.set_retention(
            await at.store(),
            at.namespace,
            idle_thread_days=wanted.idle_thread_days,
            memory_ttl_days=wanted.memory_ttl_days,
            memory_ttl_refresh_on_read=wanted.memory_ttl_refresh_on_read,
            export_idle_threads=wanted.export_idle_threads,
        )
        return json_response({"namespace": at.namespace, "policy": policy.to_dict()})

    @r.post(
        "/gc",
        summary="Apply the namespace's retention policy, or say what it would do",
        description=(
            "Deletes the threads idle longer than the policy's idle_thread_days (each only "
            "if no turn came since it was read: those are listed as moved) and forgets the "
            "memories past memory_ttl_days. dry_run: what would go, nothing changed. "
            "Without a policy nothing is done (policy fields null). On a server started with "
            "`tether serve --gc-export-dir DIR`, each idle thread's snapshot is written to "
            "DIR/<namespace>/ (fsynced, read back and checked) before the thread is deleted "
            "(the files are listed as exported; a thread whose payloads were erased is "
            "skipped and listed as erased). A policy that exports idle threads on a server "
            "without one is a 400 (field export_dir), nothing deleted. Needs the grant "
            "`state.gc`; safe to call from several places at once."
        ),
        dependencies=gc_grant,
        openapi_extra=request_body("GcRequest", required=False),
        responses={**ok("GcResult", "What was (or, dry_run, would be) done."), **_READ},
    )
    async def gc(request: Request, at: NamespaceAt) -> Response:
        await at.allow(None)
        raw = await read_json(request, required=False)
        body = _fields(
            {} if raw is None else json_object(raw, "a gc request"),
            {"dry_run", "now"},
            "a gc request",
        )
        now = body.get("now")
        if now is not None and not isinstance(now, str):
            raise InvalidRequest(f"now is an ISO 8601 time, got {now!r}", field="now")
        try:
            results = await control.gc(
                await at.store(),
                at.namespace,
                now=now,
                dry_run=_flag(body, "dry_run"),
                export_dir=at.server.gc_export_dir,
            )
        except InvalidRequest as e:
            if e.details.get("field") != "export_dir":
                raise
            raise InvalidRequest(
                f"namespace {at.namespace!r} exports idle threads before deleting them, and "
                "this server has no export directory: start it with `tether serve "
                "--gc-export-dir DIR` (or run `tether gc --export-dir DIR` where the store "
                "is); nothing was deleted",
                field="export_dir",
                namespace=at.namespace,
            ) from None
        if results:
            return json_response(results[0].to_dict())
        none = ret.GcResult(
            namespace=at.namespace,
            now=ret.iso_time(ret.utc_time(now)),
            policy=ret.RetentionPolicy(),
            dry_run=_flag(body, "dry_run"),
        )
        return json_response(none.to_dict())

    return r
