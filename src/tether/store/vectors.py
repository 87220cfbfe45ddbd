"""Where the recall index keeps its vectors: a table that is never the source of truth.

The recall index (``tether.projections.recall``) is a projection of the graph: per
namespace, scope and embedding *space* (an embedder's name) it holds one unit-length
float32 vector per current semantic memory (by resource key, with the id of the node
it was computed from) and a *mark*, the scope head (generation, sequence) it is
up to date with. Everything in it can be dropped and recomputed from the graph.

``VectorTable`` is the contract; ``MemoryVectorTable`` keeps it in this process
(an exact scan with numpy), which is what a store uses unless its backend offers a
table of its own (``Store.vector_table()``: a plaintext SQLite file keeps it in
``tether_recall_*`` tables) or it is given one; an encrypted store never offers
one, so nothing about meaning is written to its database, and a new process
rebuilds what it searches, lazily. Scores are cosine similarities (dot products of
unit vectors), higher is closer; ties break by resource key.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Mark", "MemoryVectorTable", "VectorEntry", "VectorHit", "VectorTable", "scan"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Mark:
    """The scope head an index is up to date with."""

    generation: int
    sequence: int


@dataclass(frozen=True, kw_only=True, slots=True)
class VectorEntry:
    """One indexed memory: its resource key, the node the vector was computed from, the vector."""

    key: str
    node: str
    vector: bytes  # float32, little-endian, unit length


@dataclass(frozen=True, kw_only=True, slots=True)
class VectorHit:
    key: str
    node: str
    score: float


class VectorTable(ABC):
    """Vectors per (namespace, scope, space). Every method is one short step of its own."""

    @abstractmethod
    async def mark(self, namespace: str, scope: str, space: str) -> Mark | None:
        """How far the index of this scope and space is (None: never built or dropped)."""

    @abstractmethod
    async def apply(
        self,
        namespace: str,
        scope: str,
        space: str,
        *,
        upserts: Sequence[VectorEntry],
        deletes: Sequence[str],
        mark: Mark,
        replace: bool = False,
    ) -> None:
        """Write entries, remove keys and move the mark at once (``replace``: drop all first)."""

    @abstractmethod
    async def search(
        self,
        namespace: str,
        scope: str,
        space: str,
        query: bytes,
        *,
        k: int,
        where: Callable[[str], bool] | None = None,
    ) -> list[VectorHit]:
        """The ``k`` entries closest to ``query`` among keys that pass ``where``."""

    @abstractmethod
    async def entries(self, namespace: str, scope: str, space: str) -> dict[str, VectorEntry]:
        """Every entry of the scope and space (to verify or compare)."""

    @abstractmethod
    async def drop(self, namespace: str, scope: str | None = None) -> int:
        """Forget a scope (every space), or the whole namespace; return entries removed."""

    @abstractmethod
    async def indexed(self, namespace: str) -> list[tuple[str, str]]:
        """(scope, space) pairs that have an index in the namespace."""

    async def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release connections."""


def scan(
    keys: Sequence[str],
    nodes: Sequence[str],
    matrix: Any,
    query: bytes,
    *,
    k: int,
    where: Callable[[str], bool] | None = None,
) -> list[VectorHit]:
    """The exact top ``k`` of ``matrix`` (rows of unit float32 vectors, one per key) by dot
    product with ``query``, among keys that pass ``where``; ties by key."""
    import numpy as np

    if matrix is None or not len(keys) or k < 1:
        return []
    q = np.frombuffer(query, dtype="<f4")
    scores = matrix @ q
    if where is not None:
        mask = np.fromiter((where(r) for r in keys), dtype=bool, count=len(keys))
        scores = np.where(mask, scores, -np.inf)
    n = min(k, int(np.isfinite(scores).sum()))
    if n == 0:
        return []
    top = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
    best = sorted(top.tolist(), key=lambda i: (-float(scores[i]), keys[i]))
    return [VectorHit(key=keys[i], node=nodes[i], score=float(scores[i])) for i in best]


@dataclass
class _Part:
    mark: Mark
    rows: dict[str, VectorEntry] = field(default_factory=dict)
    matrix: Any = None  # numpy array of rows in ``order``, built on the first search
    order: list[str] = field(default_factory=list)


class MemoryVectorTable(VectorTable):
    """The table in this process: dicts and an exact numpy scan."""

    def __init__(self) -> None:
        self._parts: dict[tuple[str, str, str], _Part] = {}

    async def mark(self, namespace: str, scope: str, space: str) -> Mark | None:
        part = self._parts.get((namespace, scope, space))
        return None if part is None else part.mark

    async def apply(
        self,
        namespace: str,
        scope: str,
        space: str,
        *,
        upserts: Sequence[VectorEntry],
        deletes: Sequence[str],
        mark: Mark,
        replace: bool = False,
    ) -> None:
        key = (namespace, scope, space)
        part = self._parts.get(key)
        rows = {} if part is None or replace else dict(part.rows)
        for d in deletes:
            rows.pop(d, None)
        for e in upserts:
            rows[e.key] = e
        self._parts[key] = _Part(mark=mark, rows=rows)

    async def search(
        self,
        namespace: str,
        scope: str,
        space: str,
        query: bytes,
        *,
        k: int,
        where: Callable[[str], bool] | None = None,
    ) -> list[VectorHit]:
        import numpy as np

        part = self._parts.get((namespace, scope, space))
        if part is None or not part.rows:
            return []
        if part.matrix is None:
            part.order = sorted(part.rows)
            part.matrix = np.frombuffer(
                b"".join(part.rows[r].vector for r in part.order), dtype="<f4"
            ).reshape(len(part.order), -1)
        nodes = [part.rows[r].node for r in part.order]
        return scan(part.order, nodes, part.matrix, query, k=k, where=where)

    async def entries(self, namespace: str, scope: str, space: str) -> dict[str, VectorEntry]:
        part = self._parts.get((namespace, scope, space))
        return {} if part is None else dict(part.rows)

    async def drop(self, namespace: str, scope: str | None = None) -> int:
        gone = [k for k in self._parts if k[0] == namespace and (scope is None or k[1] == scope)]
        n = 0
        for k in gone:
            n += len(self._parts.pop(k).rows)
        return n

    async def indexed(self, namespace: str) -> list[tuple[str, str]]:
        return sorted((k[1], k[2]) for k in self._parts if k[0] == namespace)
