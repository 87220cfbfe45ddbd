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

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

from ..core import scopes
from ..core.erased import erased_placeholders, is_erased, placeholder
from ..core.errors import InvalidRequest
from ..core.graph import CausalNode
from ..core.vocab import DEFAULT_VOCABULARY, RESERVED_NODE_TYPES, Vocabulary
from ..store.base import Store, check_name
from ..store.txn import Transaction, transact

__all__ = [
    "RESERVED_TYPES",
    "forget",
    "refresh_memories",
    "refresh_on_read",
    "remember",
    "semantic_memory",
]

RESERVED_TYPES = frozenset(t.name for t in RESERVED_NODE_TYPES)
# The resource key of a namespace's retention policy, in its app scope
# (``tether.control.retention``).
RETENTION_KEY: Final = "retention"
# A memory's last read, where reads refresh its TTL: resource key "ttl:" + the memory's
# ("ttl:semantic:<type>:<key>"), payload {"version": <the id of the version read>}.
TOUCH_PREFIX: Final = "ttl:"
# A read within this many seconds of the version's write or last recorded read is not
# recorded again (TTLs are days): one small node a minute at most, per memory read.
REFRESH_EVERY_S: Final = 60.0


async def semantic_memory(
    store: Store,
    namespace: str,
    scope: str,
    type: str | None = None,
    *,
    include_reserved: bool = False,
    refresh_ttl: bool | None = None,
) -> dict[str, Any]:
    """Current memory of a scope: ``{"<type>:<key>": content}``, tombstones excluded.

    ``type`` keeps one type. Reserved types (summaries, agent memory, tool state) are
    included only when named as ``type`` or with ``include_reserved=True``. One
    indexed read of the scope's resource heads.

    ``refresh_ttl``: record this read, so the namespace's memory TTL (retention's
    ``memory_ttl_days``) counts from now for the memories returned
    (``control.retention.refresh_memories``: never one forgotten meanwhile). None (the
    default): as the namespace's policy says (``memory_ttl_refresh_on_read``, one more
    indexed read); False: a plain read.
    """
    scopes.parse(scope)
    prefix = f"semantic:{type}:" if type is not None else "semantic:"
    heads = await store.resource_heads(namespace, scope, prefix)
    out: dict[str, Any] = {}
    read: dict[str, str] = {}
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
        if t not in RESERVED_TYPES:  # the TTL forgets no reserved type
            read[rk] = node.id
    if read and refresh_ttl is not False:
        if refresh_ttl is None:
            refresh_ttl = await refresh_on_read(store, namespace)
        if refresh_ttl:
            await refresh_memories(store, namespace, scope, read)
    return out


async def refresh_on_read(store: Store, namespace: str) -> bool:
    """Whether the namespace's retention policy (``tether.control.retention``) has a
    memory TTL refreshed on read."""
    node = await store.resource_head(namespace, scopes.APP, RETENTION_KEY)
    p = None if node is None else node.payload
    return (
        isinstance(p, dict)
        and p.get("memory_ttl_days") is not None
        and p.get("memory_ttl_refresh_on_read") is True
    )


def last_use(version: CausalNode, touch: CausalNode | None) -> str:
    """When a memory's current ``version`` was last written or (``touch``) read."""
    if touch is None or not isinstance(touch.payload, dict):
        return version.created_at
    if touch.payload.get("version") != version.id:
        return version.created_at  # a read of an older version: written since
    return max(version.created_at, touch.created_at)


async def refresh_memories(
    store: Store, namespace: str, scope: str, read: Mapping[str, str]
) -> tuple[str, ...]:
    """Restart the TTL of the memories of ``scope`` that a caller read: ``read`` maps each
    one's resource key (``semantic:<type>:<key>``) to the id of the version it got.

    One transaction records, for each, that this version was read now (a ``ttl:`` node),
    only if that version is still the current one and not a tombstone: a memory written
    since has a newer time anyway, and one forgotten since (by ``forget`` or ``gc``) is
    never brought back, since a refresh writes no content. A read within
    ``REFRESH_EVERY_S`` of the last recorded time is not recorded. Returns the keys
    refreshed. ``gc`` tombstones a memory only if its touch is the one it judged, so a
    refresh that commits first keeps the memory, and one that comes after finds the
    tombstone and records nothing."""
    check_name("namespace", namespace)
    if not read:
        return ()
    t = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=REFRESH_EVERY_S)
    cutoff = t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"

    async def run(txn: Transaction) -> tuple[str, ...]:
        done: list[str] = []
        for key, version in sorted(read.items()):
            if not key.startswith("semantic:"):
                raise InvalidRequest(f"{key!r} is not a memory's resource key", field="read")
            head = await txn.resource_head(scope, key)
            p = None if head is None else head.payload
            if head is None or head.id != version or not isinstance(p, dict):
                continue  # written or forgotten since it was read
            if p.get("content") is None:
                continue  # a tombstone: nothing to keep alive
            touch = await txn.resource_head(scope, TOUCH_PREFIX + key)
            if last_use(head, touch) >= cutoff:
                continue  # written or refreshed a moment ago
            await txn.append(
                scope, "resource", {"version": version}, resource_key=TOUCH_PREFIX + key
            )
            done.append(key)
        return tuple(done)

    with erased_placeholders(True):  # an erased memory reads as erased: its content is gone
        return await transact(store, namespace, run)


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
