"""The projections the executor reads, from ``tether.memory`` (fallback until it lands)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._txn import Transaction
from ..models._types import Message, Model
from ..store._base import Store
from . import _fallback
from .spec import VarNode

# Semantic types tether writes for itself; not shown to the model as memories.
_HIDDEN = frozenset({"summary", "agent_memory", "tool_state"})


async def conversation(
    store: Store,
    namespace: str,
    thread: str,
    *,
    llm: str,
    policy: Any,
    run: str,
    model: Model | None,
) -> list[Message]:
    return await _fallback.load_conversation(store, namespace, thread, llm=llm)


async def memories(store: Store, namespace: str, scopes: Sequence[str]) -> dict[str, Any]:
    """Current semantic memory over ``scopes`` (later scopes win): ``{"type:key": content}``."""
    out: dict[str, Any] = {}
    for scope in scopes:
        for k, v in (await _fallback.semantic_memory(store, namespace, scope)).items():
            if k.partition(":")[0] in _HIDDEN:
                continue
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
    return out


class Variables:
    """Declared variables of one call: get/all/set(txn)."""

    def __init__(
        self,
        store: Store,
        namespace: str,
        decls: Sequence[VarNode],
        *,
        thread: str,
        user: str | None,
        run: str,
    ) -> None:
        self._impl = _fallback.Variables(store, namespace, decls, thread=thread, user=user, run=run)

    async def get(self, name: str) -> Any:
        return await self._impl.get(name)

    async def all(self) -> dict[str, Any]:
        return await self._impl.all()

    async def set(self, name: str, value: Any, txn: Transaction) -> Any:
        """Write ``value`` in ``txn``; return the value as stored (coerced when possible)."""
        return await self._impl.set(name, value, txn)
