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
unit vectors), higher is closer, computed exactly (``exact_scores``) so that every
backend and fast path returns the same hits with the same scores; ties break by
resource key.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Mark",
    "MemoryVectorTable",
    "VectorEntry",
    "VectorHit",
    "VectorTable",
    "exact_scores",
    "margin",
    "rescore",
    "scan",
]


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


def margin(dim: int) -> float:
    """How far a float32 score of unit vectors of ``dim`` components (a BLAS dot product
    in any summation order, or sqlite-vec's cosine distance) can be from their exact dot
    product: float32 summation errs by at most about ``dim * 2**-24`` (``|x||y| <= 1``),
    the cosine's two magnitudes and the final subtraction add as much again and a few
    roundings; this bound is over twice that."""
    return (dim + 8) * 2.0**-22


def exact_scores(vectors: Any, query: bytes) -> list[float]:
    """The exact dot products of ``vectors`` (rows of float32) with ``query``, correctly
    rounded to float64: float32 products are exact in float64 and ``math.fsum`` rounds
    their sum once. The same numbers whatever BLAS, CPU or SQL extension found the rows."""
    import math

    import numpy as np

    q = np.frombuffer(query, dtype="<f4").astype(np.float64)
    prods = np.asarray(vectors, dtype="<f4").astype(np.float64) * q
    return [math.fsum(row) for row in prods.tolist()]


def rescore(
    candidates: Sequence[tuple[str, str, bytes]], query: bytes, *, k: int
) -> list[VectorHit]:
    """The top ``k`` of ``candidates`` (key, node, vector) by exact score, ties by key.

    Every fast path (numpy's float32 scan, sqlite-vec, pgvector) picks candidates whose
    approximate score is within ``2 * margin(dim)`` of its ``k``-th best, a set that holds
    the exact top ``k``; this orders them exactly, so every path returns the same hits
    with the same scores."""
    import numpy as np

    if not candidates or k < 1:
        return []
    rows = np.frombuffer(b"".join(c[2] for c in candidates), dtype="<f4").reshape(
        len(candidates), -1
    )
    scores = exact_scores(rows, query)
    best = sorted(range(len(candidates)), key=lambda i: (-scores[i], candidates[i][0]))[:k]
    return [VectorHit(key=candidates[i][0], node=candidates[i][1], score=scores[i]) for i in best]


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
    product with ``query``, among keys that pass ``where``; ties by key. numpy's float32
    scores pick the candidates, ``rescore`` orders them exactly."""
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
    kth = float(np.partition(scores, len(scores) - n)[len(scores) - n])
    chosen = np.flatnonzero(scores >= kth - 2 * margin(matrix.shape[1])).tolist()
    return rescore([(keys[i], nodes[i], matrix[i].tobytes()) for i in chosen], query, k=k)


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
