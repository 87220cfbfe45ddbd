"""Module enablement (seed 002's ``State(storage, enabled=[...])``, ``Agent(state=[...])``).

An agent (or a server's agent) may name the stores it enables. Then ``describe``,
``reset`` and ``compact`` act on those only, as the seed's ``State`` does: a describe
reports one entry per enabled store (and the scope's ``graph``), a store that is
asked for but not enabled is reported with ``enabled=False`` and listed in
``missing``, and a reset or compact never touches it. A reset of a thread without
``stores`` clears the enabled stores of it (not the whole thread).

An agent without ``conversation`` sends the model no earlier run's messages (each
turn starts cold, as the seed's agent without that module: ``tether.Agent``). The
graph itself is not filtered: it is the one source of truth every store is a
projection of (and a run's record, which resume and approvals stand on), so what a
disabled store would show stays in the graph (export, history, verify) and reappears
if the store is enabled again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, cast

from ..core.errors import InvalidRequest
from ..store.base import Store
from .types import (
    OPERATIONS,
    STORES,
    Operation,
    StateOperationRequest,
    StateOperationResult,
    StateStoreReport,
)

__all__ = ["check_modules", "with_modules"]

_STORE_OPS = frozenset({"describe", "reset", "compact"})


def check_modules(enabled: Iterable[str] | None) -> tuple[str, ...] | None:
    """The enabled stores in registry order (None: every store), or ``InvalidRequest``
    (also a ``ValueError``, as the seed raises) for a name no store has."""
    if enabled is None:
        return None
    if isinstance(enabled, str):
        raise InvalidRequest("state is a list of store names, not a string", field="state")
    names = list(enabled)
    for n in names:
        if n not in STORES:
            raise InvalidRequest(
                f"unknown state module {n!r}; use any of {', '.join(STORES)}", field="state"
            )
    return tuple(s for s in STORES if s in names)


async def with_modules(
    store: Store,
    operation: str,
    request: StateOperationRequest,
    enabled: tuple[str, ...] | None,
    **options: Any,
) -> StateOperationResult:
    """``control.execute`` with only the ``enabled`` stores (None: every store)."""
    from .ops import execute

    if (
        enabled is None
        or operation not in _STORE_OPS
        or request.whole_namespace  # the seed's full reset deletes the namespace whole
        or request.run is not None
        or request.variable is not None
    ):
        return await execute(store, operation, request, **options)
    asked = request.stores or (("conversation",) if operation == "compact" else enabled)
    off = tuple(s for s in asked if s not in enabled)
    on = tuple(s for s in asked if s in enabled)
    if on:
        result = await execute(store, operation, dataclasses.replace(request, stores=on), **options)
    else:
        result = StateOperationResult(
            operation=request_operation(operation),
            namespace=request.namespace,
            scope=request.scope,
            metadata=dict(request.metadata),
        )
    reports = [r for r in result.stores if r.name not in STORES or r.name in on]
    reports += [StateStoreReport(name=s, scope=result.scope, enabled=False) for s in off]
    missing = [m for m in result.missing if m not in off] + list(off)
    return dataclasses.replace(result, stores=tuple(reports), missing=tuple(missing))


def request_operation(operation: str) -> Operation:
    if operation not in OPERATIONS:
        raise InvalidRequest(f"unknown operation {operation!r}", field="operation")
    return cast(Operation, operation)
