"""Semantic memory (SPEC §1): typed, keyed facts in the graph of a scope.

A semantic node has payload ``{"type", "key", "content"}`` and resource key
``semantic:<type>:<key>``; writing the same type and key creates a successor, and
``content: null`` is a tombstone (forgotten). Which types may be written is the
product's ``Vocabulary`` (built-ins ``memory preference wisdom artifact``, or its
own list, optionally with dynamic bounded lowercase names); the reserved types
tether writes itself (``summary``, ``agent_memory``, ``tool_state``) are always
accepted and are left out of ``semantic_memory`` unless asked for.

An erased memory raises ``KeyErased``; inside ``erased_placeholders()`` it is
listed under its type and key (both in its resource key, which is not encrypted)
with the content ``{"$erased": true}``.
"""

from __future__ import annotations

from typing import Any

from ..core import scopes
from ..core.erased import is_erased, placeholder
from ..core.graph import CausalNode
from ..core.vocab import DEFAULT_VOCABULARY, RESERVED_NODE_TYPES, Vocabulary
from ..store.base import Store
from ..store.txn import Transaction, transact

__all__ = ["RESERVED_TYPES", "forget", "remember", "semantic_memory"]

RESERVED_TYPES = frozenset(t.name for t in RESERVED_NODE_TYPES)


async def semantic_memory(
    store: Store,
    namespace: str,
    scope: str,
    type: str | None = None,
    *,
    include_reserved: bool = False,
) -> dict[str, Any]:
    """Current memory of a scope: ``{"<type>:<key>": content}``, tombstones excluded.

    ``type`` keeps one type. Reserved types (summaries, agent memory, tool state) are
    included only when named as ``type`` or with ``include_reserved=True``. One
    indexed read of the scope's resource heads.
    """
    scopes.parse(scope)
    prefix = f"semantic:{type}:" if type is not None else "semantic:"
    heads = await store.resource_heads(namespace, scope, prefix)
    out: dict[str, Any] = {}
    for rk, node in heads.items():
        p = node.payload
        if is_erased(p):
            et, _, ek = rk.removeprefix("semantic:").partition(":")
            if type is None and not include_reserved and et in RESERVED_TYPES:
                continue
            out[f"{et}:{ek}"] = placeholder()
            continue
        if not isinstance(p, dict) or p.get("content") is None:
            continue
        t = p.get("type")
        if type is None and not include_reserved and t in RESERVED_TYPES:
            continue
        out[f"{t}:{p.get('key')}"] = p["content"]
    return out


async def remember(
    store: Store,
    namespace: str,
    scope: str,
    type: str,
    key: str,
    content: Any,
    *,
    vocabulary: Vocabulary = DEFAULT_VOCABULARY,
    txn: Transaction | None = None,
) -> CausalNode:
    """Write one semantic memory (a successor of any earlier one with this type and key).

    The type is checked against ``vocabulary`` (or the transaction's): an unknown type
    raises ``InvalidNode`` (code ``semantic_type``) and nothing is written.
    """
    scopes.parse(scope)
    if txn is not None:
        return await txn.semantic(scope, type, key, content)
    return await transact(
        store,
        namespace,
        lambda t: t.semantic(scope, type, key, content),
        vocabulary=vocabulary,
    )


async def forget(
    store: Store,
    namespace: str,
    scope: str,
    type: str,
    key: str,
    *,
    vocabulary: Vocabulary = DEFAULT_VOCABULARY,
    txn: Transaction | None = None,
) -> CausalNode | None:
    """Tombstone a memory (``content: null``); None when there was nothing to forget."""
    scopes.parse(scope)
    rk = f"semantic:{type}:{key}"

    async def run(t: Transaction) -> CausalNode | None:
        head = await t.resource_head(scope, rk)
        if (
            head is None
            or not isinstance(head.payload, dict)
            or head.payload.get("content") is None
        ):
            return None
        return await t.semantic(scope, type, key, None)

    if txn is not None:
        return await run(txn)
    return await transact(store, namespace, run, vocabulary=vocabulary)
