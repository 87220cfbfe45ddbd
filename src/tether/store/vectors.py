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
from dataclasses import dataclass
from typing import Any

__all__ = [
    "HeldVectors",
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


class MemoryVectorTable(VectorTable):
    """The table in this process: ``HeldVectors`` per part, an exact numpy scan."""

    def __init__(self) -> None:
        self._parts: dict[tuple[str, str, str], HeldVectors] = {}

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
        if part is None or replace:
            part = self._parts[key] = HeldVectors(mark, [])
        part.apply(upserts, deletes, mark)

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
        part = self._parts.get((namespace, scope, space))
        if part is None or k < 1:
            return []
        return part.search(query, k=k, where=where)

    async def entries(self, namespace: str, scope: str, space: str) -> dict[str, VectorEntry]:
        part = self._parts.get((namespace, scope, space))
        return {} if part is None else part.entries()

    async def drop(self, namespace: str, scope: str | None = None) -> int:
        gone = [k for k in self._parts if k[0] == namespace and (scope is None or k[1] == scope)]
        n = 0
        for k in gone:
            n += self._parts.pop(k).n
        return n

    async def indexed(self, namespace: str) -> list[tuple[str, str]]:
        return sorted((k[1], k[2]) for k in self._parts if k[0] == namespace)


class HeldVectors:
    """One part's vectors (a scope and space) held in this process at a mark, for the scan.

    A write moves it in place (``apply``): an upserted key overwrites its row or takes a
    new one at the end (the buffer grows by doubling), a deleted key's row takes the last
    row's place, so a write costs what it changes, not a reload of the part. Row order is
    not key order; ``scan`` does not need it (``rescore`` breaks ties by key)."""

    __slots__ = ("_index", "_matrix", "keys", "mark", "n", "nodes")

    def __init__(self, mark: Mark, rows: Sequence[tuple[str, str, bytes]]) -> None:
        import numpy as np

        self.mark = mark
        rows = list({r[0]: r for r in rows}.values())  # one row per key, the last
        self.keys: list[str] = [r[0] for r in rows]
        self.nodes: list[str] = [r[1] for r in rows]
        self._index: dict[str, int] = {k: i for i, k in enumerate(self.keys)}
        self._matrix: Any = None
        self.n = len(rows)
        if rows:
            self._matrix = (
                np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4")
                .reshape(len(rows), -1)
                .copy()
            )

    @property
    def nbytes(self) -> int:
        return 0 if self._matrix is None else int(self._matrix.nbytes)

    def apply(self, upserts: Sequence[VectorEntry], deletes: Sequence[str], mark: Mark) -> None:
        import numpy as np

        for d in deletes:
            i = self._index.pop(d, None)
            if i is None:
                continue
            last = self.n - 1
            if i != last:
                moved = self.keys[last]
                self.keys[i], self.nodes[i] = moved, self.nodes[last]
                self._matrix[i] = self._matrix[last]
                self._index[moved] = i
            self.keys.pop()
            self.nodes.pop()
            self.n = last
        for e in upserts:
            row = np.frombuffer(e.vector, dtype="<f4")
            if self._matrix is None:
                self._matrix = np.empty((max(16, len(upserts)), len(row)), dtype="<f4")
            i = self._index.get(e.key)
            if i is None:
                if self.n == len(self._matrix):
                    grown = np.empty((2 * len(self._matrix), self._matrix.shape[1]), dtype="<f4")
                    grown[: self.n] = self._matrix[: self.n]
                    self._matrix = grown
                i = self.n
                self.n += 1
                self._index[e.key] = i
                self.keys.append(e.key)
                self.nodes.append(e.node)
            else:
                self.nodes[i] = e.node
            self._matrix[i] = row
        self.mark = mark

    def search(
        self, query: bytes, *, k: int, where: Callable[[str], bool] | None = None
    ) -> list[VectorHit]:
        if not self.n:
            return []
        return scan(self.keys, self.nodes, self._matrix[: self.n], query, k=k, where=where)

    def entries(self) -> dict[str, VectorEntry]:
        return {
            k: VectorEntry(key=k, node=self.nodes[i], vector=self._matrix[i].tobytes())
            for k, i in sorted(self._index.items())
        }
