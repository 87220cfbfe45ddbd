"""Recall by meaning: search a scope's long-term memory with an embedder.

    hits = await recall(store, "acme", "user:alice", "what am I allergic to?",
                        embedder=WordLlamaEmbedder(), k=5)
    hits[0].key, hits[0].content, hits[0].score     # "allergy", "peanuts", 0.61

What is searched: the current semantic memory of the scope (every type but the
reserved ``summary`` and ``tool_state``), agent memory included (type
``agent_memory``, key ``<memory>/<key>``). What is embedded is a memory's content
(text as is, anything else as canonical JSON), as LangGraph's store and mem0 do: keys
are often opaque ids; agent memory is embedded as ``"<key>: <content>"``, since the
model names its own keys. Filters: ``types``
(names) and ``key_prefix`` (of the key); ``min_score``. Scores are cosine
similarities, highest first.

The index is a projection (``tether.store.vectors``): per scope and embedder it holds
one vector per current memory and the scope head it was computed at. ``recall``
first brings it up to the scope's head (reading only the nodes after its mark,
or rebuilding after a reset), so it is never stale and never the source of truth:
``reindex`` drops and rebuilds it, ``verify_index`` recomputes it and compares.
Erased memories (``tether.crypto.erase_user``) are never embedded;
``drop_erased`` removes the vectors of scopes whose data was erased
(``control.erase_user`` calls it).

The index lives where the backend keeps it (``Store.vector_table()``: tables in a
plaintext SQLite file), else in this process (``MemoryVectorTable``), always so on
an encrypted store; ``use_vector_table(store, table)`` gives a store another table.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core import scopes
from ..core.canonical import canonical_json
from ..core.erased import erased_placeholders, is_erased
from ..core.errors import InvalidRequest
from ..core.graph import CausalNode
from ..core.messages import Embedder
from ..store.base import Store
from ..store.vectors import Mark, MemoryVectorTable, VectorEntry, VectorTable

__all__ = [
    "Recollection",
    "drop_erased",
    "recall",
    "reindex",
    "use_vector_table",
    "vector_table",
    "verify_index",
]

SKIPPED_TYPES = frozenset({"summary", "tool_state"})
_PREFIX = "semantic:"
_BATCH = 512
_PAGE = 1000
_tables: weakref.WeakKeyDictionary[Store, VectorTable] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, kw_only=True, slots=True)
class Recollection:
    """One memory found by meaning."""

    scope: str
    type: str
    key: str
    content: Any
    score: float
    node: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "type": self.type,
            "key": self.key,
            "content": self.content,
            "score": self.score,
            "node": self.node,
        }


def vector_table(store: Store) -> VectorTable:
    """The store's vector table: one set with ``use_vector_table``, else the backend's own
    (``Store.vector_table()``: a plaintext SQLite file), else an in-process
    ``MemoryVectorTable``."""
    table = _tables.get(store)
    if table is None:
        table = _tables[store] = store.vector_table() or MemoryVectorTable()
    return table


def use_vector_table(store: Store, table: VectorTable) -> None:
    """Keep the recall index of ``store`` in ``table``."""
    _tables[store] = table


def memory_text(payload: dict[str, Any]) -> str:
    """What is embedded for a memory: its content (text as is, anything else as canonical
    JSON); for agent memory ``"<key>: <content>"``, since the model names its keys; for a
    LangGraph item (``lg_store``) its value; for an MCP knowledge graph entity
    ``"<name> (<entityType>): <observations>"``, for a relation ``"<from> <type> <to>"``."""
    content = payload.get("content")
    if payload.get("type") == "lg_store" and isinstance(content, dict) and "value" in content:
        # a LangGraph item: its value, not its timestamps (they would make the vector
        # depend on when the item was written)
        content = content["value"]
    if payload.get("type") == "kg_entity" and isinstance(content, dict):
        # an MCP knowledge graph entity (tether.mcp): its name, type and observations
        # as a sentence, not its JSON (whose keys and order numbers mean nothing)
        observations = content.get("observations")
        said = "; ".join(map(str, observations)) if isinstance(observations, list) else ""
        return f"{content.get('name')} ({content.get('entityType')}): {said}"
    if payload.get("type") == "kg_relation" and isinstance(content, dict):
        return f"{content.get('from')} {content.get('relationType')} {content.get('to')}"
    text = content if isinstance(content, str) else canonical_json(content).decode()
    if payload.get("type") == "agent_memory":
        key = str(payload.get("key"))
        return f"{key.partition('/')[2] or key}: {text}"
    return text


def _indexable(node: CausalNode) -> bool:
    p = node.payload
    return (
        node.kind == "semantic"
        and isinstance(p, dict)
        and not is_erased(p)
        and p.get("content") is not None
        and p.get("type") not in SKIPPED_TYPES
    )


def _pack(vector: Sequence[float]) -> bytes:
    norm = sum(x * x for x in vector) ** 0.5
    if norm == 0.0:
        return struct.pack(f"<{len(vector)}f", *vector)
    return struct.pack(f"<{len(vector)}f", *(x / norm for x in vector))


async def _embed(embedder: Embedder, nodes: Sequence[CausalNode]) -> list[VectorEntry]:
    out: list[VectorEntry] = []
    for i in range(0, len(nodes), _BATCH):
        batch = nodes[i : i + _BATCH]
        vectors = await embedder.embed([memory_text(n.payload) for n in batch])
        if len(vectors) != len(batch) or any(len(v) != embedder.dim for v in vectors):
            raise InvalidRequest(
                f"embedder {embedder.name!r} returned vectors of the wrong count or size",
                field="embedder",
            )
        out.extend(
            VectorEntry(key=str(n.resource_key), node=n.id, vector=_pack(v))
            for n, v in zip(batch, vectors, strict=True)
        )
    return out


async def sync_index(store: Store, namespace: str, scope: str, embedder: Embedder) -> Mark:
    """Bring the index of ``scope`` up to its head; return the mark it now has."""
    table = vector_table(store)
    space = embedder.name
    while True:
        head = await store.head(namespace, scope)
        mark = await table.mark(namespace, scope, space)
        now = Mark(generation=head.generation, sequence=head.sequence)
        if mark == now:
            return now
        rebuild = mark is None or mark.generation != head.generation or mark.sequence > now.sequence
        latest: dict[str, CausalNode] = {}
        with erased_placeholders():
            if rebuild:
                latest = await store.resource_heads(namespace, scope, _PREFIX)
            else:
                assert mark is not None
                after = mark.sequence
                while after < now.sequence:
                    page = await store.nodes(
                        namespace, scope, after=after, before=now.sequence + 1, limit=_PAGE
                    )
                    if not page:
                        break
                    for n in page:
                        if n.resource_key and n.resource_key.startswith(_PREFIX):
                            latest[n.resource_key] = n
                    after = page[-1].sequence
        if (await store.head(namespace, scope)).generation != head.generation:
            continue  # reset while we read: start over
        keep = [n for n in latest.values() if _indexable(n)]
        deletes = [k for k, n in latest.items() if not _indexable(n)]
        upserts = await _embed(embedder, keep)
        await table.apply(
            namespace, scope, space, upserts=upserts, deletes=deletes, mark=now, replace=rebuild
        )
        return now


def _where(types: Sequence[str] | None, key_prefix: str | None) -> Any:
    if types is None and not key_prefix:
        return None
    allowed = None if types is None else {f"{_PREFIX}{t}:" for t in types}
    prefix = key_prefix or ""

    def where(rk: str) -> bool:
        t, _, key = rk.removeprefix(_PREFIX).partition(":")
        if allowed is not None and f"{_PREFIX}{t}:" not in allowed:
            return False
        if t == "agent_memory" and prefix:
            return key.startswith(prefix) or key.partition("/")[2].startswith(prefix)
        return key.startswith(prefix)

    return where


async def recall(
    store: Store,
    namespace: str,
    scope: str | Sequence[str],
    query: str,
    *,
    embedder: Embedder,
    k: int = 5,
    types: Sequence[str] | str | None = None,
    key_prefix: str | None = None,
    min_score: float | None = None,
) -> list[Recollection]:
    """The ``k`` memories of ``scope`` (one scope or several) closest in meaning to ``query``."""
    names = [scope] if isinstance(scope, str) else list(scope)
    for s in names:
        scopes.parse(s)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        raise InvalidRequest("k: an integer from 1 to 1000", field="k")
    if not isinstance(query, str) or not query.strip():
        raise InvalidRequest("query: a non-empty text", field="query")
    type_list = [types] if isinstance(types, str) else types
    where = _where(type_list, key_prefix)
    (qv,) = await embedder.embed([query])
    if len(qv) != embedder.dim:
        raise InvalidRequest(f"embedder {embedder.name!r} returned a wrong-size vector")
    q = _pack(qv)
    table = vector_table(store)
    found: list[tuple[float, str, str, str]] = []
    for s in names:
        await sync_index(store, namespace, s, embedder)
        hits = await table.search(namespace, s, embedder.name, q, k=k, where=where)
        found.extend((h.score, s, h.key, h.node) for h in hits)
    found.sort(key=lambda f: (-f[0], f[1], f[2]))
    found = [f for f in found if min_score is None or f[0] >= min_score][:k]
    out: list[Recollection] = []
    for s in names:
        ids = [f[3] for f in found if f[1] == s]
        if not ids:
            continue
        nodes = await store.get_nodes(namespace, s, ids)
        for score, _, _, nid in (f for f in found if f[1] == s):
            p = nodes[nid].payload
            out.append(
                Recollection(
                    scope=s,
                    type=str(p["type"]),
                    key=str(p["key"]),
                    content=p["content"],
                    score=score,
                    node=nid,
                )
            )
    out.sort(key=lambda r: (-r.score, r.scope, r.type, r.key))
    return out


async def reindex(store: Store, namespace: str, scope: str, *, embedder: Embedder) -> int:
    """Drop the index of ``scope`` and rebuild it from the graph; return how many entries."""
    scopes.parse(scope)
    table = vector_table(store)
    await table.drop(namespace, scope)
    await sync_index(store, namespace, scope, embedder)
    return len(await table.entries(namespace, scope, embedder.name))


async def verify_index(
    store: Store, namespace: str, scope: str, *, embedder: Embedder
) -> list[str]:
    """Recompute the index of ``scope`` from the graph and compare: the problems found
    (``[]``: the index matches the graph at its mark). Reads the index as it stands."""
    scopes.parse(scope)
    table = vector_table(store)
    mark = await table.mark(namespace, scope, embedder.name)
    if mark is None:
        return []
    head = await store.head(namespace, scope)
    if head.generation != mark.generation:
        return [
            f"index of {scope} is from generation {mark.generation}, scope is at {head.generation}"
        ]
    with erased_placeholders():
        heads = await store.resource_heads(namespace, scope, _PREFIX)
    want = {
        e.key: e
        for e in await _embed(
            embedder, [n for n in heads.values() if _indexable(n) and n.sequence <= mark.sequence]
        )
    }
    have = await table.entries(namespace, scope, embedder.name)
    problems: list[str] = []
    for key in sorted(set(want) | set(have)):
        w, h = want.get(key), have.get(key)
        if h is None:
            problems.append(f"{key}: missing from the index")
        elif w is None:
            if heads.get(key) is None or heads[key].sequence <= mark.sequence:
                problems.append(f"{key}: in the index but not a current memory")
        elif w.node != h.node:
            problems.append(f"{key}: indexed node {h.node}, current {w.node}")
        elif w.vector != h.vector:
            problems.append(f"{key}: vector differs from a fresh embedding")
    return problems


async def drop_erased(store: Store, namespace: str, user: str) -> int:
    """After erasing ``user``: remove the vectors of ``user:<id>`` and of every indexed
    scope whose memories now read as erased. Returns the entries removed."""
    table = vector_table(store)
    removed = await table.drop(namespace, scopes.user(user))
    for scope, space in await table.indexed(namespace):
        entries = await table.entries(namespace, scope, space)
        if not entries:
            continue
        probe = next(iter(entries.values()))
        with erased_placeholders():
            nodes = await store.get_nodes(namespace, scope, [probe.node])
        node = nodes.get(probe.node)
        if node is None or is_erased(node.payload):
            removed += await table.drop(namespace, scope)
    return removed
