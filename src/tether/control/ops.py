"""The control-plane operations over a store (SPEC §6): the same for Python, CLI and HTTP.

Each operation takes a store and a ``StateOperationRequest`` (or the request's
fields as keywords) and returns a ``StateOperationResult``::

    result = await control.describe(store, namespace="acme", thread="t1", include_data=True)
    await control.reset(store, namespace="acme", thread="t1", variable="cart")
    await control.reset(store, namespace="acme", thread="t1", run="run_ab12")

``execute(store, operation, request)`` dispatches by name (the HTTP server and
the CLI use it). Problems with the request raise ``InvalidRequest`` before
anything is written; problems with the state raise the matching ``TetherError``
(``NotFound``, ``Conflict``, ``InvalidSnapshot``); per-store problems that do
not stop the operation are reported in ``result.errors``.

Stores (projections of a scope's graph): ``conversation`` (thread messages),
``tools`` (tools' own state: ``semantic`` nodes of type ``tool_state``), ``task``
(each run's metadata and status history; in ``app``, the namespace's run index),
``flow`` (each run's progress through the spec and its run variables),
``variables`` (``resource`` nodes ``var:<name>``, and ``run:<run>:var:<name>`` in
a thread), ``memory`` (``semantic`` nodes, compaction summaries and tool state
excepted) and ``executions`` (seed 000's executor view of the runs).

Resets are exact, because every scope is its own graph and every projection is
a set of keys in it:

* a scope (``thread``/``user``/``app`` with no ``stores``): the scope's nodes are
  deleted and its generation bumped, so a late writer fails instead of
  resurrecting it;
* some ``stores`` of a scope: ``variables`` get delete tombstones, ``memory`` and
  ``tools`` keys null successors, unfinished runs (``task``, ``executions``) a
  ``reset`` error, ``flow`` both (its run variables deleted, its unfinished runs
  ended, so the next step starts the spec afresh), the app's ``task`` (the run
  index) a tombstone per entry, and the ``conversation`` a cut (a summary node
  with no text that the conversation view starts after); all in one commit,
  history kept;
* a ``variable``: one delete tombstone (a ``resource`` node ``{"deleted": true}``);
* a ``run``: the graph is append-only, so a run's nodes are not deleted; a
  ``protocol_error`` node with code ``reset`` ends the run, and like any failed
  run its inferences leave the conversation view (completed tool calls stay,
  with their results: the side effects happened);
* ``whole_namespace``: every scope of the namespace.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final, ParamSpec

import orjson

from ..core import scopes as scope_names
from ..core.erased import erased_placeholders, is_erased
from ..core.errors import InvalidRequest
from ..core.graph import CausalNode
from ..core.telemetry import telemetry
from ..projections.recall_index import vector_table
from ..store.base import ScopeStats, Store
from ..store.txn import Transaction, transact
from . import reports as _views
from . import tasks
from .snapshot import (
    export_snapshot,
    fork_thread,
    history_page,
    import_snapshot,
    verify_scope,
    verify_snapshot,
)
from .types import (
    GRAPH,
    MAX_PAGE,
    STORES,
    ScopeCheck,
    StateOperationRequest,
    StateOperationResult,
    StateStoreReport,
)

RESET_CODE: Final = "reset"
_P = ParamSpec("_P")


def _traced(
    name: str,
) -> Callable[
    [Callable[_P, Awaitable[StateOperationResult]]], Callable[_P, Awaitable[StateOperationResult]]
]:
    """The operation in a ``tether.<name>`` span (when tracing is on) with what it touched."""

    def wrap(
        fn: Callable[_P, Awaitable[StateOperationResult]],
    ) -> Callable[_P, Awaitable[StateOperationResult]]:
        @functools.wraps(fn)
        async def run(*args: _P.args, **kwargs: _P.kwargs) -> StateOperationResult:
            if not telemetry.tracing:
                return await fn(*args, **kwargs)
            with telemetry.span(f"tether.{name}", "internal", {"tether.operation": name}) as span:
                result = await fn(*args, **kwargs)
                span.set_attribute("tether.namespace", result.namespace)
                if result.scope is not None:
                    span.set_attribute("tether.scope", result.scope)
                    if result.scope.startswith("thread:"):
                        span.set_attribute("tether.thread", result.scope[7:])
                if result.created is not None:  # a fork's new thread
                    span.set_attribute("tether.created", result.created)
                nodes = result.metadata.get("nodes")
                if isinstance(nodes, int) and not isinstance(nodes, bool):
                    span.set_attribute("tether.nodes", nodes)
                return result

        return run

    return wrap


def _request(
    request: StateOperationRequest | None, fields: dict[str, Any]
) -> StateOperationRequest:
    if request is None:
        return StateOperationRequest.from_dict(fields)
    if fields:
        return StateOperationRequest.from_dict({**request.to_dict(), **fields})
    return request


def _need_scope(req: StateOperationRequest, operation: str) -> str:
    scope = req.scope
    if scope is None:
        raise InvalidRequest(f"{operation} needs a scope: give thread, user or app", field="thread")
    return scope


def _need_thread(req: StateOperationRequest, operation: str) -> str:
    if req.thread is None:
        raise InvalidRequest(f"{operation} works on a thread: give thread", field="thread")
    return "thread:" + req.thread


async def _all_scopes(store: Store, namespace: str) -> list[str]:
    out: list[str] = []
    after: str | None = None
    while True:
        page = await store.list_scopes(namespace, after=after, limit=500)
        out.extend(s.scope for s in page)
        if len(page) < 500:
            return out
        after = page[-1].scope


# --------------------------------------------------------------------------- describe


@_traced("describe")
async def describe(
    store: Store, request: StateOperationRequest | None = None, **fields: Any
) -> StateOperationResult:
    """What exists: per store counts and sizes for one scope, or per scope for a namespace."""
    req = _request(request, fields)
    scope = req.scope
    if scope is None:
        return await _describe_namespace(store, req)
    wanted = req.stores or STORES
    stats = await store.stats(req.namespace, scope)
    head = await store.head(req.namespace, scope)
    reports = []
    with erased_placeholders():  # erased data is shown as such (see _views), never fails it
        for name in wanted:
            reports.append(await _views.report(store, req, scope, name, stats.kinds))
    missing = tuple(r.name for r in reports if r.enabled and not r.exists)
    # The stores first, in seed 002's order (its callers read stores[0] as the
    # conversation), then the scope's whole graph.
    reports.append(
        _graph_report(
            scope,
            stats,
            generation=head.generation,
            sequence=head.sequence,
            frontier=list(head.frontier),
        )
    )
    return StateOperationResult(
        operation="describe",
        namespace=req.namespace,
        scope=scope,
        stores=tuple(reports),
        missing=missing if stats.nodes else (scope,),
        metadata=dict(req.metadata),
    )


def _graph_report(scope: str, stats: ScopeStats, **metadata: Any) -> StateStoreReport:
    """The ``graph`` report of a scope: its nodes by kind and their payload bytes."""
    return StateStoreReport(
        name=GRAPH,
        scope=scope,
        exists=stats.nodes > 0,
        item_count=stats.nodes,
        node_count=stats.nodes,
        size_bytes=stats.payload_bytes,
        metadata={"kinds": dict(sorted(stats.kinds.items())), **metadata},
    )


async def _describe_namespace(store: Store, req: StateOperationRequest) -> StateOperationResult:
    scopes = await _all_scopes(store, req.namespace)
    reports = []
    for scope in scopes[:MAX_PAGE]:
        reports.append(_graph_report(scope, await store.stats(req.namespace, scope)))
    return StateOperationResult(
        operation="describe",
        namespace=req.namespace,
        stores=tuple(reports),
        metadata={
            **req.metadata,
            "scopes": len(scopes),
            "nodes": sum(r.node_count or 0 for r in reports),
            "size_bytes": sum(r.size_bytes or 0 for r in reports),
            "truncated": len(scopes) > MAX_PAGE,
        },
    )


# --------------------------------------------------------------------------- reset


@_traced("reset")
async def reset(
    store: Store, request: StateOperationRequest | None = None, **fields: Any
) -> StateOperationResult:
    """Clear exactly what the request names (see the module docstring)."""
    req = _request(request, fields)
    ns = req.namespace
    result = StateOperationResult(operation="reset", namespace=ns, metadata=dict(req.metadata))
    if req.whole_namespace:
        count = await store.delete_namespace(ns)
        await vector_table(store).drop(ns)  # the recall index's vectors go with it
        return dataclasses.replace(
            result,
            cleared=(f"namespace:{ns}",) if count else (),
            missing=() if count else (f"namespace:{ns}",),
            metadata={**result.metadata, "scopes": count},
        )
    if req.scope is None and req.variable is not None:
        raise InvalidRequest(
            "a variable lives in a scope: give thread, user or app with it", field="variable"
        )
    scope = _need_scope(req, "reset")
    result = dataclasses.replace(result, scope=scope)
    if req.variable is not None:
        key = f"run:{req.run}:var:{req.variable}" if req.run is not None else f"var:{req.variable}"
        label = f"{scope}/{key}"
        cleared = await transact(store, ns, lambda txn: _tombstone_variables(txn, scope, [key]))
        return dataclasses.replace(
            result, cleared=(label,) if cleared else (), missing=() if cleared else (label,)
        )
    if req.run is not None:
        run = req.run
        label = f"{scope}/run:{run}"
        ended = await transact(store, ns, lambda txn: _end_runs(txn, store, scope, [run]))
        return dataclasses.replace(
            result, cleared=(label,) if ended else (), missing=() if ended else (label,)
        )
    if not req.stores:
        head = await store.head(ns, scope)
        await store.reset_scope(ns, scope)
        await vector_table(store).drop(ns, scope)
        if req.thread is not None:
            # Its runs' index entries went with its nodes; entries of the layout before (in
            # app) go too (a second commit: the reset is not one).
            await tasks.unindex_thread(store, ns, req.thread)
        had = head.sequence > 0
        return dataclasses.replace(
            result,
            cleared=(scope,) if had else (),
            missing=() if had else (scope,),
            stores=(
                StateStoreReport(
                    name=GRAPH, scope=scope, exists=had, cleared=had, node_count=head.sequence
                ),
            ),
        )
    reports = await transact(store, ns, lambda txn: _reset_stores(txn, store, scope, req))
    return dataclasses.replace(
        result,
        stores=tuple(reports),
        cleared=tuple(f"{scope}/{r.name}" for r in reports if r.cleared),
        missing=tuple(f"{scope}/{r.name}" for r in reports if not r.cleared and r.enabled),
        errors=tuple(
            {"code": "not_applicable", "store": r.name, "message": r.error}
            for r in reports
            if r.error
        ),
    )


async def _tombstone_variables(txn: Transaction, scope: str, keys: list[str]) -> list[str]:
    await txn.head(scope)  # pin the head before reading, so a concurrent write conflicts
    cleared = []
    for key in keys:
        node = await txn.resource_head(scope, key)
        if node is None or node.kind != "resource" or _views.is_deleted_variable(node):
            continue
        p = node.payload if isinstance(node.payload, dict) else {}
        name = p.get("name", key.rsplit(":", 1)[-1])
        await txn.append(
            scope,
            "resource",
            {"name": name, "type": p.get("type", "json"), "deleted": True},
            resource_key=key,
        )
        cleared.append(key)
    return cleared


async def _end_runs(
    txn: Transaction, store: Store, scope: str, runs: list[str], done: set[str] | None = None
) -> list[str]:
    """End ``runs`` with a reset error; ``done`` (runs this transaction already ended)
    keeps two stores of one reset (task and flow) from ending a run twice."""
    await txn.head(scope)  # pin the head first: a run that moves meanwhile conflicts
    status = await _views.run_status(store, txn.namespace, scope)
    ended = []
    for run in runs:
        st = status.get(run)
        if st is None or st.get("reset"):
            continue
        if done is not None:
            if run in done:
                ended.append(run)
                continue
            done.add(run)
        err = await txn.append(
            scope,
            "protocol_error",
            {
                "run": run,
                "error": {"code": RESET_CODE, "message": "run reset through the control plane"},
            },
        )
        ended.append(run)
        # The run index learns it in the same commit, in the thread's own scope (an entry
        # of the layout before, in app, moves into the thread; a run never indexed is
        # left to reindex).
        key = tasks.entry_key(run)
        entry = await txn.resource_head(scope, key)
        payload = entry.payload if entry is not None else None
        if not (isinstance(payload, dict) and "status" in payload):
            old = await txn.resource_head(scope_names.APP, tasks.index_key(scope[7:], run))
            payload = old.payload if old is not None else None
            if isinstance(payload, dict) and "status" in payload:
                payload = {k: v for k, v in payload.items() if k not in ("thread", "run")}
        if isinstance(payload, dict) and "status" in payload:
            await txn.append(
                scope,
                "resource",
                {**payload, "status": "failed", "pending": [], "updated_at": err.created_at},
                resource_key=key,
            )
    return ended


async def _end_open_runs(
    txn: Transaction, store: Store, scope: str, ended_here: set[str]
) -> list[str]:
    """End every run of the thread that is still running or suspended."""
    status = await _views.run_status(store, txn.namespace, scope)
    open_runs = [r for r, s in status.items() if s["status"] in _views.UNFINISHED]
    return await _end_runs(txn, store, scope, open_runs, ended_here)


def _cleared(name: str, scope: str, count: int, metadata: dict[str, Any]) -> StateStoreReport:
    """The report of a reset that cleared ``count`` items of store ``name``."""
    return StateStoreReport(
        name=name,
        scope=scope,
        exists=bool(count),
        cleared=bool(count),
        item_count=count,
        metadata=metadata,
    )


async def _reset_stores(
    txn: Transaction, store: Store, scope: str, req: StateOperationRequest
) -> list[StateStoreReport]:
    head = await txn.head(scope)
    ns = txn.namespace
    out: list[StateStoreReport] = []
    is_thread = scope.startswith("thread:")
    ended_here: set[str] = set()
    for name in req.stores:
        if name == "variables":
            heads = await store.resource_heads(ns, scope, "var:")
            keys = list(heads)
            if is_thread:
                runs = await store.resource_heads(ns, scope, "run:")
                keys += [k for k in runs if ":var:" in k]
            cleared = await _tombstone_variables(txn, scope, keys)
            out.append(_cleared(name, scope, len(cleared), {"keys": cleared}))
        elif name in ("memory", "tools"):
            prefix = "semantic:" if name == "memory" else _views.TOOL_STATE_PREFIX
            heads = await store.resource_heads(ns, scope, prefix)
            cleared = []
            for key, node in heads.items():
                p = node.payload
                if name == "memory" and not _views.is_memory(node):
                    continue
                if p.get("content") is None:
                    continue
                await txn.append(
                    scope, "semantic", {"type": p["type"], "key": p["key"], "content": None}
                )
                cleared.append(key)
            out.append(_cleared(name, scope, len(cleared), {"keys": cleared}))
        elif name == "task" and scope == scope_names.APP:
            # The index lives in the threads; what app holds is the layout before.
            index = await store.resource_heads(ns, scope, tasks.INDEX_PREFIX)
            cleared = await tasks.drop_entries(txn, scope, index)
            out.append(
                _cleared(name, scope, len(cleared), {"index": True, "entries": len(cleared)})
            )
        elif not is_thread:
            out.append(
                StateStoreReport(
                    name=name,
                    scope=scope,
                    enabled=False,
                    error=f"{name} lives in threads; {scope} has none",
                )
            )
        elif name == "flow":
            runs_heads = await store.resource_heads(ns, scope, "run:")
            keys = [k for k in runs_heads if ":var:" in k]
            deleted = await _tombstone_variables(txn, scope, keys)
            ended = await _end_open_runs(txn, store, scope, ended_here)
            out.append(
                _cleared(
                    name,
                    scope,
                    len(deleted) + len(ended),
                    {"runs": ended, "variables": deleted},
                )
            )
        elif name in ("executions", "task"):
            ended = await _end_open_runs(txn, store, scope, ended_here)
            out.append(_cleared(name, scope, len(ended), {"runs": ended}))
        else:  # conversation
            cut = await _views.cut_conversation(txn, store, scope, req.llm, head.sequence)
            out.append(
                StateStoreReport(
                    name=name,
                    scope=scope,
                    exists=cut > 0,
                    cleared=cut > 0,
                    message_count=cut,
                    metadata={"llm": req.llm, "through": head.sequence},
                )
            )
    return out


# --------------------------------------------------------------------------- compact


@_traced("compact")
async def compact(
    store: Store,
    request: StateOperationRequest | None = None,
    *,
    model: Any = None,
    **fields: Any,
) -> StateOperationResult:
    """Compact a thread's conversation (strategy recent, tokens or summary), non-destructively.

    ``model`` writes the summary for ``strategy="summary"``. The compaction is
    one optimistic commit: if a turn moved the thread meanwhile it is recomputed,
    never written over the turn.
    """
    req = _request(request, fields)
    scope = _need_thread(req, "compact")
    reports = []
    for name in req.stores or ("conversation",):
        if name == "conversation":
            reports.append(await _views.compact(store, req, scope, model))
        else:
            # The other stores hold current values, not a growing history to fold: their
            # older versions stay in the graph until an explicit prune.
            reports.append(
                StateStoreReport(
                    name=name,
                    scope=scope,
                    metadata={
                        "reason": f"{name} holds current values only; only the conversation "
                        "is compacted"
                    },
                )
            )
    return StateOperationResult(
        operation="compact",
        namespace=req.namespace,
        scope=scope,
        stores=tuple(reports),
        compacted=tuple(r.name for r in reports if r.compacted),
        missing=tuple(r.name for r in reports if r.name == "conversation" and not r.exists),
        metadata=dict(req.metadata),
    )


# --------------------------------------------------------------------------- snapshots


@_traced("export")
async def export(
    store: Store, request: StateOperationRequest | None = None, **fields: Any
) -> StateOperationResult:
    """The scope's snapshot (SPEC §1) in ``result.snapshot``."""
    req = _request(request, fields)
    scope = _need_scope(req, "export")
    data = await export_snapshot(store, req.namespace, scope)
    snap = orjson.loads(data)
    return StateOperationResult(
        operation="export",
        namespace=req.namespace,
        scope=scope,
        snapshot=snap,
        missing=() if snap["nodes"] else (scope,),
        metadata={**req.metadata, "nodes": len(snap["nodes"]), "bytes": len(data)},
    )


@_traced("import")
async def import_(
    store: Store, request: StateOperationRequest | None = None, **fields: Any
) -> StateOperationResult:
    """Validate ``request.snapshot`` and write it into the (empty) target scope in one commit."""
    req = _request(request, fields)
    scope = "thread:" + req.new_thread if req.new_thread and req.scope is None else req.scope
    if scope is None:
        raise InvalidRequest("import needs a target: give thread, user or app", field="thread")
    if req.snapshot is None:
        raise InvalidRequest("import needs the snapshot to write", field="snapshot")
    # Nothing is added to what was imported (export after import gives the same bytes):
    # a thread's run index entries travel in its graph, so its runs are listed at once;
    # a snapshot without them (written outside the runtime) is listed after reindex.
    state = await import_snapshot(store, req.namespace, scope, req.snapshot, replace=req.replace)
    return StateOperationResult(
        operation="import",
        namespace=req.namespace,
        scope=scope,
        created=scope,
        metadata={
            **req.metadata,
            "nodes": len(state),
            "frontier": state.frontier,
            "replaced": req.replace,
        },
    )


@_traced("history")
async def history(
    store: Store, request: StateOperationRequest | None = None, **fields: Any
) -> StateOperationResult:
    """One page of a scope's nodes, oldest first (or newest first with ``descending``).

    ``next_after`` continues an ascending read (pass it as ``after``); for a
    descending one ``metadata["next_before"]`` is passed as ``before``.
    """
    req = _request(request, fields)
    scope = _need_scope(req, "history")
    with erased_placeholders():  # an erased payload is {"$erased": true}; the node stays
        nodes, cursor = await history_page(
            store,
            req.namespace,
            scope,
            after=req.after,
            before=req.before,
            limit=req.limit,
            descending=req.descending,
        )
    meta: dict[str, Any] = dict(req.metadata)
    if erased := sum(1 for n in nodes if is_erased(n.payload)):
        meta["erased"] = erased
    if req.descending:
        meta["next_before"] = cursor
    return StateOperationResult(
        operation="history",
        namespace=req.namespace,
        scope=scope,
        nodes=tuple(n.to_dict() for n in nodes),
        next_after=None if req.descending else cursor,
        metadata=meta,
    )


@_traced("fork")
async def fork(
    store: Store, request: StateOperationRequest | None = None, **fields: Any
) -> StateOperationResult:
    """A new thread whose graph is everything ``node`` depends on, with ``node`` as its head."""
    req = _request(request, fields)
    source = _need_scope(req, "fork")
    if req.node is None:
        raise InvalidRequest("fork needs the node to fork from", field="node")
    new = req.new_thread or f"{req.thread or 'fork'}-{uuid.uuid4().hex[:8]}"
    target = "thread:" + new
    nodes = await fork_thread(store, req.namespace, source, req.node, target)
    await tasks.index_thread(store, req.namespace, new)
    return StateOperationResult(
        operation="fork",
        namespace=req.namespace,
        scope=source,
        created=target,
        metadata={**req.metadata, "thread": new, "node": req.node, "nodes": len(nodes)},
    )


@_traced("verify")
async def verify(
    store: Store, request: StateOperationRequest | None = None, **fields: Any
) -> StateOperationResult:
    """Recompute identities and links: of ``request.snapshot`` if given, else of the
    target scope, else of every scope of the namespace. ``result.ok`` says if all passed.
    """
    req = _request(request, fields)
    checks: list[ScopeCheck]
    if req.snapshot is not None:
        checks = [verify_snapshot(req.snapshot)]
    elif req.scope is not None:
        checks = [await verify_scope(store, req.namespace, req.scope)]
    else:
        checks = [
            await verify_scope(store, req.namespace, s)
            for s in await _all_scopes(store, req.namespace)
        ]
    erased = any(c.erased for c in checks)
    return StateOperationResult(
        operation="verify",
        namespace=req.namespace,
        scope=req.scope,
        checks=tuple(checks),
        # An empty scope verifies trivially; say so, since it is usually a typo.
        missing=tuple(c.scope for c in checks if c.ok and not c.checked and req.snapshot is None),
        metadata={
            **req.metadata,
            "nodes": sum(c.checked for c in checks),
            # Scopes holding erased payloads (checked in all but those payloads' identity).
            **({"erased": {c.scope: c.erased for c in checks if c.erased}} if erased else {}),
        },
    )


Operation = Callable[..., Awaitable[StateOperationResult]]

OPERATIONS: Final[dict[str, Operation]] = {
    "describe": describe,
    "reset": reset,
    "compact": compact,
    "export": export,
    "import": import_,
    "history": history,
    "fork": fork,
    "verify": verify,
}


async def execute(
    store: Store,
    operation: str,
    request: StateOperationRequest | dict[str, Any] | None = None,
    **options: Any,
) -> StateOperationResult:
    """Run an operation by name; ``request`` may be decoded JSON (``from_dict`` validates it)."""
    fn = OPERATIONS.get(operation)
    if fn is None:
        raise InvalidRequest(
            f"unknown operation {operation!r}; use one of {', '.join(OPERATIONS)}",
            field="operation",
        )
    if not isinstance(request, StateOperationRequest):
        request = StateOperationRequest.from_dict(request)
    return await fn(store, request, **options)


def nodes_of(result: StateOperationResult) -> list[CausalNode]:
    """The history page of a result as nodes again."""
    return [
        CausalNode(
            id=n["id"],
            kind=n["kind"],
            parents=tuple(n["parents"]),
            payload=n["payload"],
            created_at=n["createdAt"],
            sequence=n["sequence"],
            resource_key=n.get("resourceKey"),
        )
        for n in result.nodes
    ]
