"""Seed 002's own callers on ``POST /state/<operation>``: what they send, what they read.

Protolink's ``AgentClient`` (and anything written against seed 002) talks to these
routes unmodified, so here, and only here, tether follows the seed where tether's
own API is stricter or more precise (the ``/v1`` routes, the Python API and the CLI
keep tether's rules):

* **requests** are read as the seed's ``StateOperationRequest.from_dict`` reads them:
  unknown keys are ignored (named in ``metadata["ignored_fields"]``), ``null`` is the
  default, a whole float (``20.0``) is an integer. A fractional one (``2.5``) is
  still refused, where the seed would truncate it: exact or a loud error. Unknown
  store names are reported as not enabled (``enabled=False``, in ``missing``), as
  the seed's ``State`` reports them, instead of refused.
* **a session reset** (``session_id`` with no ``stores``, ``run`` or ``variable``)
  clears that session's conversation, as the seed's ``reset(session)`` does, and
  keeps its tool, task and flow state unless ``stores`` names them; ``cleared`` holds
  ``"conversation"``. (A body naming ``thread``, tether's own field, resets the whole
  thread, as everywhere else in tether.)
* **no session** in a reset (no ``session_id``/``thread``, ``user``, ``app``, ``run``
  or ``variable``) resets every session of the namespace, as the seed's full reset
  does: with no ``stores`` (or all of them) the whole namespace (tether's
  ``whole_namespace``); with some of them it is refused and reported, as the seed
  does (``errors`` holds ``partial_reset``, nothing is cleared): deleting the
  namespace would clear more than was asked. The ``state.reset`` grant on the
  namespace guards it, as every reset.
* **results** name stores in the seed's terms first: ``cleared`` and ``compacted``
  list store names (``conversation``, ``tools``, ``task``, ``flow``, then tether's
  ``variables``, ``memory``, ``executions``) before tether's precise labels
  (``thread:t1``); a describe lists the store reports in that order, tether's
  ``graph`` report after them; a describe without a session reports one entry per
  store over the whole namespace (``conversation``'s ``item_count`` is its number of
  sessions, as the seed's session mapping), the graph's totals in ``metadata``.
* a body without ``namespace`` acts in the token's namespace when the token names
  exactly one (a JWT's ``namespaces`` claim, a tokens-file entry), else ``default``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Final

from .. import control
from ..control.modules import with_modules
from ..control.types import GRAPH, STORES, StateOperationRequest, StateOperationResult
from ..control.types import StateStoreReport as Report
from ..core import scopes
from ..store import Store

__all__ = ["parse", "run"]

_FIELDS: Final = frozenset(f.name for f in fields(StateOperationRequest))
_INTS: Final = frozenset(
    {
        "max_messages",
        "max_tokens",
        "preserve_recent",
        "summary_max_tokens",
        "after",
        "before",
        "limit",
    }
)
_STORE_OPS: Final = frozenset({"describe", "reset", "compact"})
# How many scopes a namespace-wide describe or store reset visits (the rest is counted).
MAX_SCOPES: Final = 1000


@dataclasses.dataclass(frozen=True, kw_only=True)
class Parsed:
    """A request as tether reads it, and what the seed's reading set aside."""

    request: StateOperationRequest
    ignored: tuple[str, ...] = ()
    unknown_stores: tuple[str, ...] = ()
    session: bool = False  # the body named its thread as the seed does, session_id


def parse(operation: str, body: Mapping[str, Any] | None, *, namespace: str | None) -> Parsed:
    """A body read as seed 002's ``from_dict`` reads it (see the module docstring).

    ``namespace``: the namespace for a body that names none (the token's only one).
    """
    data = {k: v for k, v in (body or {}).items() if v is not None}
    ignored = tuple(sorted(k for k in data if k not in _FIELDS and k != "session_id"))
    d: dict[str, Any] = {k: v for k, v in data.items() if k not in ignored}
    for k in _INTS & d.keys():
        v = d[k]
        if isinstance(v, float) and v.is_integer():
            d[k] = int(v)
    unknown: tuple[str, ...] = ()
    if operation in _STORE_OPS and "stores" in d:
        stores = d["stores"]
        if isinstance(stores, str):
            stores = [stores]
        if isinstance(stores, list | tuple):
            unknown = tuple(s for s in stores if isinstance(s, str) and s not in STORES)
            d["stores"] = [s for s in stores if s not in unknown]
    if "namespace" not in d and namespace is not None:
        d["namespace"] = namespace
    meta = d.get("metadata", {})
    if ignored and isinstance(meta, Mapping):  # (a bad metadata is refused by from_dict)
        d["metadata"] = {**meta, "ignored_fields": list(ignored)}
    return Parsed(
        request=StateOperationRequest.from_dict(d),
        ignored=ignored,
        unknown_stores=unknown,
        session="session_id" in d,
    )


def _untargeted(req: StateOperationRequest) -> bool:
    return (
        req.scope is None and req.run is None and req.variable is None and not req.whole_namespace
    )


async def run(
    store: Store,
    operation: str,
    parsed: Parsed,
    *,
    enabled: tuple[str, ...] | None = None,
    **options: Any,
) -> StateOperationResult:
    """The operation, with seed 002's reset scope and its terms in the result; ``enabled``:
    the stores the serving agent enables (``Agent(state=[...])``; None: all)."""
    req = parsed.request
    if (
        operation == "reset"
        and parsed.session
        and req.thread is not None
        and not req.stores
        and req.run is None
        and req.variable is None
    ):
        # The seed's reset(session): the session's conversation only.
        req = dataclasses.replace(req, stores=("conversation",))
        result = await with_modules(store, "reset", req, enabled)
    elif operation == "reset" and _untargeted(req):
        if req.stores and set(req.stores) != set(STORES):
            result = _partial_reset(req)
        else:
            req = dataclasses.replace(req, whole_namespace=True, stores=())
            result = await control.reset(store, req)
    elif operation == "describe" and req.scope is None:
        result = await _describe_namespace(store, req, enabled)
    else:
        result = await with_modules(store, operation, req, enabled, **options)
    return _in_seed_terms(operation, result, req, parsed.unknown_stores)


def _partial_reset(req: StateOperationRequest) -> StateOperationResult:
    """The seed's answer to a partial reset without a session: refused, and reported."""
    message = (
        f"a reset of some stores ({', '.join(req.stores)}) without a session would clear "
        "the whole namespace; name a session_id, or reset every store"
    )
    return StateOperationResult(
        operation="reset",
        namespace=req.namespace,
        stores=tuple(Report(name=n, error=message) for n in req.stores),
        missing=req.stores,
        errors=({"code": "partial_reset", "message": message},),
        metadata=dict(req.metadata),
    )


def _request_for(req: StateOperationRequest, scope: str) -> StateOperationRequest:
    kind, ident = scopes.parse(scope)
    if kind == "thread":
        return dataclasses.replace(req, thread=ident)
    if kind == "user":
        return dataclasses.replace(req, user=ident)
    return dataclasses.replace(req, app=True)


async def _scopes(store: Store, namespace: str) -> tuple[list[str], int]:
    """Up to ``MAX_SCOPES`` scopes of the namespace, and how many there are."""
    out: list[str] = []
    after: str | None = None
    total = 0
    while True:
        page = await store.list_scopes(namespace, after=after, limit=500)
        total += len(page)
        out.extend(s.scope for s in page if len(out) < MAX_SCOPES)
        if len(page) < 500:
            return out, total
        after = page[-1].scope


async def _describe_namespace(
    store: Store, req: StateOperationRequest, enabled: tuple[str, ...] | None = None
) -> StateOperationResult:
    """One entry per (enabled) store over every scope of the namespace."""
    names, total = await _scopes(store, req.namespace)
    asked = req.stores or enabled or STORES
    off = tuple(s for s in asked if enabled is not None and s not in enabled)
    wanted = tuple(s for s in asked if s not in off)
    per_store: dict[str, list[Report]] = {n: [] for n in wanted}
    graphs: list[Report] = []
    for scope in names if wanted else ():
        r = await control.describe(
            store, dataclasses.replace(_request_for(req, scope), stores=wanted)
        )
        for rep in r.stores:
            if rep.name == GRAPH:
                graphs.append(rep)
            elif rep.enabled and rep.exists:
                per_store[rep.name].append(rep)
    reports = []
    for name, reps in per_store.items():
        data = {r.scope: r.data for r in reps if r.scope} if req.include_data else None
        if name == "conversation":
            # The seed's conversation store is a mapping session -> messages.
            items = len(reps)
            messages: int | None = sum(r.message_count or r.item_count or 0 for r in reps)
        else:
            items = sum(r.item_count or 0 for r in reps)
            messages = None
        reports.append(
            Report(
                name=name,
                exists=bool(reps),
                item_count=items,
                message_count=messages,
                size_bytes=sum(r.size_bytes or 0 for r in reps),
                data=data,
                metadata={"scopes": [r.scope for r in reps if r.scope]},
            )
        )
    reports += [Report(name=s, enabled=False) for s in off]
    return StateOperationResult(
        operation="describe",
        namespace=req.namespace,
        stores=tuple(reports),
        missing=tuple(r.name for r in reports if not r.exists),
        metadata={
            **req.metadata,
            "scopes": total,
            "nodes": sum(g.node_count or 0 for g in graphs),
            "size_bytes": sum(g.size_bytes or 0 for g in graphs),
            "truncated": total > len(names),
        },
    )


def _store_of(label: str) -> str | None:
    """``conversation`` from ``thread:t1/conversation``; None for other labels."""
    _, _, tail = label.rpartition("/")
    return tail if tail in STORES else None


def _in_seed_terms(
    operation: str,
    result: StateOperationResult,
    req: StateOperationRequest,
    unknown: tuple[str, ...],
) -> StateOperationResult:
    reports = list(result.stores)
    cleared = list(result.cleared)
    if operation == "reset":
        whole = req.variable is None and req.run is None and not req.stores
        if whole and (req.whole_namespace or req.scope is not None):
            # A whole scope (or namespace) was reset: every store of it is now empty.
            names = list(STORES)
            reports = [Report(name=n, scope=result.scope, cleared=True) for n in names] + [
                r for r in reports if r.name == GRAPH
            ]
        else:
            cleared_stores = [s for s in map(_store_of, cleared) if s]
            names = [*dict.fromkeys(cleared_stores + [r.name for r in reports if r.cleared])]
        cleared = [*sorted(names, key=_order), *(c for c in cleared if c not in names)]
    if operation in _STORE_OPS and unknown:
        reports = [
            *reports,
            *(Report(name=n, enabled=False, error="no such store") for n in unknown),
        ]
    return dataclasses.replace(
        result,
        stores=tuple(reports),
        cleared=tuple(cleared),
        missing=(*result.missing, *unknown),
    )


def _order(name: str) -> int:
    return STORES.index(name) if name in STORES else len(STORES)
