"""The in-memory backend (``memory://``): for tests and single-process use.

Payloads go through the codec like every other backend, so a caller mutating a
payload it read cannot change stored state, and encryption applies here too.

Safe to share across OS threads, each running its own event loop: every method
does its work under one ``threading.Lock`` without awaiting while holding it, so a
commit is all-or-nothing and a read sees a state between commits.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.graph import CausalNode
from .base import (
    DuplicateNodes,
    Head,
    PayloadCodec,
    ScopeInfo,
    ScopeStats,
    ScopeWrite,
    Store,
    conflict,
)
from .keys import KeyStore, MemoryKeyStore


@dataclass
class _Scope:
    generation: int = 0
    frontier: tuple[str, ...] = ()
    # (node with payload=None, payload bytes) at index sequence-1; None: pruned
    nodes: list[tuple[CausalNode, bytes] | None] = field(default_factory=list)
    holes: int = 0  # how many of them were pruned
    by_id: dict[str, int] = field(default_factory=dict)  # id -> index
    heads: dict[str, int] = field(default_factory=dict)  # resource key -> index
    versions: dict[str, list[int]] = field(default_factory=dict)


class MemoryStore(Store):
    def __init__(self, url: str = "memory://", *, codec: PayloadCodec | None = None) -> None:
        super().__init__(codec=codec)
        self.url = url
        self._data: dict[str, dict[str, _Scope]] = {}
        self._keys: MemoryKeyStore | None = None  # the key table, once encrypted
        self._lock = threading.Lock()  # held, never across an await

    def _scope(self, namespace: str, scope: str) -> _Scope | None:
        return self._data.get(namespace, {}).get(scope)

    @staticmethod
    def _at(sc: _Scope, index: int) -> tuple[CausalNode, bytes]:
        entry = sc.nodes[index]
        assert entry is not None, "an index of a pruned node"  # the indexes drop them
        return entry

    def _out(self, namespace: str, scope: str, entry: tuple[CausalNode, bytes]) -> CausalNode:
        node, data = entry
        return dataclasses.replace(node, payload=self.codec.decode(namespace, scope, data))

    async def _do_commit(self, namespace: str, writes: Sequence[ScopeWrite]) -> None:
        with self._lock:
            ns = self._data.get(namespace, {})
            # Check everything first so that a failure writes nothing.
            for w in writes:
                sc = ns.get(w.scope) or _Scope()
                actual = (sc.generation, len(sc.nodes))
                if actual != (w.expected_generation, w.expected_sequence):
                    raise conflict(
                        namespace, w.scope, (w.expected_generation, w.expected_sequence), actual
                    )
                dup = [n.id for n in w.nodes if n.id in sc.by_id]
                if dup:
                    raise DuplicateNodes(
                        f"scope {w.scope!r} already holds {len(dup)} of these nodes",
                        namespace=namespace,
                        scope=w.scope,
                        ids=dup,
                    )
            encoded = [
                [
                    (
                        dataclasses.replace(n, payload=None),
                        self.codec.encode(namespace, w.scope, n.payload),
                    )
                    for n in w.nodes
                ]
                for w in writes
            ]
            ns = self._data.setdefault(namespace, {})
            for w, enc in zip(writes, encoded, strict=True):
                if not enc:  # a head assertion only
                    continue
                sc = ns.setdefault(w.scope, _Scope())
                for entry in enc:
                    while len(sc.nodes) < entry[0].sequence - 1:  # a sparse write's holes
                        sc.nodes.append(None)
                        sc.holes += 1
                    idx = len(sc.nodes)
                    sc.nodes.append(entry)
                    node = entry[0]
                    sc.by_id[node.id] = idx
                    if node.resource_key is not None:
                        sc.heads[node.resource_key] = idx
                        sc.versions.setdefault(node.resource_key, []).append(idx)
                sc.frontier = tuple(w.frontier)

    async def _do_reset_if(self, namespace: str, scope: str, expected: Head) -> Head:
        with self._lock:
            sc = self._scope(namespace, scope) or _Scope()
            actual = (sc.generation, len(sc.nodes))
            if actual != (expected.generation, expected.sequence):
                raise conflict(namespace, scope, (expected.generation, expected.sequence), actual)
            self._data.setdefault(namespace, {})[scope] = _Scope(generation=sc.generation + 1)
            return Head(generation=sc.generation + 1)

    async def _do_reset_scope(self, namespace: str, scope: str) -> Head:
        with self._lock:
            ns = self._data.setdefault(namespace, {})
            old = ns.get(scope)
            gen = (old.generation if old else 0) + 1
            ns[scope] = _Scope(generation=gen)
            return Head(generation=gen)

    async def _do_prune(
        self, namespace: str, scope: str, expected: Head, cut: tuple[int, ...], write: ScopeWrite
    ) -> Head:
        with self._lock:
            sc = self._scope(namespace, scope) or _Scope()
            actual = (sc.generation, len(sc.nodes))
            if actual != (expected.generation, expected.sequence):
                raise conflict(namespace, scope, (expected.generation, expected.sequence), actual)
            (record,) = write.nodes
            if record.id in sc.by_id:
                raise DuplicateNodes(
                    f"scope {scope!r} already holds node {record.id}",
                    namespace=namespace,
                    scope=scope,
                    ids=[record.id],
                )
            gone = {s - 1 for s in cut}
            # Sequences are kept (a removed node leaves a hole, never a renumbering).
            for i in gone:
                entry = sc.nodes[i]
                if entry is not None:
                    sc.by_id.pop(entry[0].id, None)
                    sc.nodes[i] = None
                    sc.holes += 1
            for key, idxs in list(sc.versions.items()):
                left = [i for i in idxs if i not in gone]
                if len(left) == len(idxs):
                    continue
                # A key's head cut: its newest version left is its head, none: no key.
                if left:
                    sc.versions[key] = left
                    sc.heads[key] = left[-1]
                else:
                    del sc.versions[key]
                    sc.heads.pop(key, None)
            sc.generation += 1
            idx = len(sc.nodes)
            sc.nodes.append(
                (
                    dataclasses.replace(record, payload=None),
                    self.codec.encode(namespace, scope, record.payload),
                )
            )
            sc.by_id[record.id] = idx
            assert record.resource_key is not None
            sc.heads[record.resource_key] = idx
            sc.versions.setdefault(record.resource_key, []).append(idx)
            sc.frontier = write.frontier
            return Head(generation=sc.generation, sequence=idx + 1, frontier=sc.frontier)

    async def _do_delete_namespace(self, namespace: str) -> int:
        with self._lock:
            ns = self._data.get(namespace, {})
            count = 0
            for name, sc in list(ns.items()):
                count += bool(sc.nodes)
                ns[name] = _Scope(generation=sc.generation + 1)
            return count

    async def head(self, namespace: str, scope: str) -> Head:
        with self._lock:
            sc = self._scope(namespace, scope)
            if sc is None:
                return Head()
            return Head(generation=sc.generation, sequence=len(sc.nodes), frontier=sc.frontier)

    async def nodes(
        self,
        namespace: str,
        scope: str,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 1000,
        descending: bool = False,
    ) -> list[CausalNode]:
        with self._lock:
            sc = self._scope(namespace, scope)
            if sc is None or limit <= 0:
                return []
            lo = max(after, 0)  # index of sequence after+1
            hi = len(sc.nodes) if before is None else min(max(before - 1, 0), len(sc.nodes))
            if lo >= hi:
                return []
            picked: list[tuple[CausalNode, bytes]] = []
            if sc.holes:  # a pruned scope: skip the holes, ``limit`` counts nodes
                for i in range(hi - 1, lo - 1, -1) if descending else range(lo, hi):
                    e = sc.nodes[i]
                    if e is not None:
                        picked.append(e)
                        if len(picked) == limit:
                            break
            elif descending:
                picked = sc.nodes[max(lo, hi - limit) : hi][::-1]  # type: ignore[assignment]
            else:
                picked = sc.nodes[lo : min(hi, lo + limit)]  # type: ignore[assignment]
            return [self._out(namespace, scope, e) for e in picked]

    async def get_nodes(
        self, namespace: str, scope: str, ids: Sequence[str]
    ) -> dict[str, CausalNode]:
        with self._lock:
            sc = self._scope(namespace, scope)
            if sc is None:
                return {}
            return {
                i: self._out(namespace, scope, self._at(sc, sc.by_id[i]))
                for i in ids
                if i in sc.by_id
            }

    async def resource_head(self, namespace: str, scope: str, key: str) -> CausalNode | None:
        with self._lock:
            sc = self._scope(namespace, scope)
            if sc is None or key not in sc.heads:
                return None
            return self._out(namespace, scope, self._at(sc, sc.heads[key]))

    async def resource_heads(
        self, namespace: str, scope: str, prefix: str = ""
    ) -> dict[str, CausalNode]:
        with self._lock:
            sc = self._scope(namespace, scope)
            if sc is None:
                return {}
            return {
                k: self._out(namespace, scope, self._at(sc, i))
                for k, i in sorted(sc.heads.items())
                if k.startswith(prefix)
            }

    async def versions(
        self, namespace: str, scope: str, key: str, *, limit: int = 1000
    ) -> list[CausalNode]:
        with self._lock:
            sc = self._scope(namespace, scope)
            if sc is None:
                return []
            return [
                self._out(namespace, scope, self._at(sc, i))
                for i in sc.versions.get(key, [])[:limit]
            ]

    async def list_namespaces(self, *, after: str | None = None, limit: int = 100) -> list[str]:
        with self._lock:
            names = sorted(n for n, ns in self._data.items() if any(sc.nodes for sc in ns.values()))
            start = 0 if after is None else bisect.bisect_right(names, after)
            return names[start : start + limit]

    async def list_scopes(
        self, namespace: str, *, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[ScopeInfo]:
        with self._lock:
            ns = self._data.get(namespace, {})
            names = sorted(k for k, sc in ns.items() if sc.nodes and k.startswith(prefix))
            start = 0 if after is None else bisect.bisect_right(names, after)
            return [
                ScopeInfo(scope=k, generation=ns[k].generation, sequence=len(ns[k].nodes))
                for k in names[start : start + limit]
            ]

    async def keystore(self) -> KeyStore:
        # The keys live on the store object, exactly as long as the data they open.
        if self._keys is None:
            self._keys = MemoryKeyStore()
        return self._keys

    async def holds_keys(self) -> bool:
        return self._keys is not None and bool(await self._keys.checks())

    async def stats(self, namespace: str, scope: str) -> ScopeStats:
        with self._lock:
            sc = self._scope(namespace, scope)
            if sc is None:
                return ScopeStats(nodes=0, payload_bytes=0, kinds={})
            kinds: dict[str, int] = {}
            held = [e for e in sc.nodes if e is not None]
            for n, _ in held:
                kinds[n.kind] = kinds.get(n.kind, 0) + 1
            return ScopeStats(
                nodes=len(held), payload_bytes=sum(len(b) for _, b in held), kinds=kinds
            )
