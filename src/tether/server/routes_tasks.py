"""Task state over HTTP (seed 002's ``task`` module): runs, one run's history, what waits.

* ``GET /v1/ns/{namespace}/runs?status=&thread=&user=&after=&limit=``: the namespace's
  runs from its run index (``control.runs``: one indexed read of the app scope, no
  thread read), e.g. ``?status=suspended`` for every run waiting for a human;
* ``GET /v1/ns/{namespace}/threads/{thread}/task?run=``: one run's metadata and status
  history (``control.task``; the thread's latest run without ``run``);
* ``GET /v1/ns/{namespace}/threads/{thread}/approvals``: the tool calls the thread's
  latest run waits on (``control.pending_approvals``), with their arguments: what a
  person approves or rejects (``POST .../approve``, ``.../reject``).

All three are reads under the grant ``state.describe`` and need no agent. On an
encrypted store, a task or approvals read of an erased thread is a 410 (``key_erased``);
erased users' runs are not in the index (``control.erase_user`` takes them out).
"""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Query
from starlette.responses import Response

from .. import control
from ..control.tasks import MAX_RUNS, RUN_STATUSES
from ..core import scopes
from ..store.base import check_name
from ._access import Owners
from ._deps import NamespaceAt, ThreadAt, need
from ._http import json_response
from .openapi import errors, ok

__all__ = ["router"]

_READ: Final = errors(400, 401, 403, 410, 413)
_STATUS_HELP: Final = f"comma-separated, of: {', '.join(RUN_STATUSES)}"


def _statuses(value: str | None) -> tuple[str, ...] | None:
    found = tuple(s.strip() for s in value.split(",") if s.strip()) if value else ()
    return found or None


def router() -> APIRouter:
    # All three are reads of what exists: the grant state.describe.
    r = APIRouter(
        prefix="/v1/ns/{namespace}", tags=["tasks"], dependencies=[need("state.describe")]
    )

    @r.get(
        "/runs",
        summary="The namespace's runs from its run index, filtered by status, thread and user",
        description=(
            "Oldest run first. `counts` has the matching runs per status before paging "
            "(the status filter aside); `next_after` continues the listing (`after=`), null "
            "on the last page. `status=suspended` lists every run waiting for a human."
        ),
        responses={**ok("RunList", "One page of runs."), **_READ},
    )
    async def list_runs(
        at: NamespaceAt,
        status: Annotated[str | None, Query(max_length=100, description=_STATUS_HELP)] = None,
        thread: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
        user: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
        after: Annotated[str | None, Query(min_length=1, max_length=1000)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_RUNS)] = 100,
    ) -> Response:
        store = await at.store()
        if at.user is not None and thread is not None:
            await at.allow(scopes.thread(thread))
        page = await control.runs(
            store,
            namespace=at.namespace,
            status=_statuses(status),
            thread=thread,
            user=user,
            after=after,
            limit=limit,
        )
        body = page.to_dict()
        if at.user is not None:
            # A token bound to a user lists the runs of that user's threads only (the
            # counts would tell of other users' runs: they are left out too).
            owners = Owners(store, at.namespace)
            body["runs"] = [r for r in body["runs"] if await owners.of(r["thread"]) == at.user]
            body["counts"] = {}
            for r in body["runs"]:
                body["counts"][r["status"]] = body["counts"].get(r["status"], 0) + 1
        return json_response(body)

    @r.get(
        "/threads/{thread}/task",
        summary="A run's metadata and status history (the thread's latest run by default)",
        responses={**ok("TaskState", "The run's task state."), **_READ, **errors(404)},
    )
    async def thread_task(
        at: ThreadAt, run: Annotated[str | None, Query(min_length=1, max_length=200)] = None
    ) -> Response:
        assert at.thread is not None
        state = await control.task(await at.store(), at.namespace, at.thread, run)
        return json_response(state.to_dict())

    @r.get(
        "/threads/{thread}/approvals",
        summary="The tool calls the thread's latest run waits on (to approve or reject)",
        responses={**ok("PendingApprovals", "What waits for a person."), **_READ},
    )
    async def thread_approvals(at: ThreadAt) -> Response:
        ns, thread = check_name("namespace", at.namespace), at.thread
        assert thread is not None
        scopes.thread(thread)
        calls = await control.pending_approvals(await at.store(), ns, thread)
        waiting = [c.to_dict() for c in calls]
        return json_response({"namespace": ns, "thread": thread, "pending_approvals": waiting})

    return r
