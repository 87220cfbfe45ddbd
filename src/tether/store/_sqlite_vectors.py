"""The recall index's vectors in a SQLite store's file, on a connection of their own.

Same file, separate tables (``tether_recall_*``), so a restart (or ``tether recall``
from a shell) finds the index where it left it instead of embedding every memory
again. Only for plaintext stores: ``EncryptedStore`` keeps the index out of the file
(``Store.vector_table`` is None there). Searching is an exact scan: the rows of one
scope and embedder are loaded once into a numpy matrix, kept while the scope's mark
does not move. (sqlite-vec would do the scan in SQLite, but the Python this was built
on has an ``sqlite3`` without ``enable_load_extension``.)
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from .sqlite import retry_busy
from .vectors import Mark, VectorEntry, VectorHit, VectorTable, scan

T = TypeVar("T")

SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS tether_recall_marks (ns TEXT NOT NULL, scope TEXT NOT NULL,"
    " space TEXT NOT NULL, generation INTEGER NOT NULL, sequence INTEGER NOT NULL,"
    " PRIMARY KEY (ns, scope, space))",
    "CREATE TABLE IF NOT EXISTS tether_recall_vectors (ns TEXT NOT NULL, scope TEXT NOT NULL,"
    " space TEXT NOT NULL, key TEXT NOT NULL, node TEXT NOT NULL, vector BLOB NOT NULL,"
    " PRIMARY KEY (ns, scope, space, key))",
)


class SQLiteVectorTable(VectorTable):
    def __init__(self, path: str, *, busy_timeout: float = 30.0) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        # (ns, scope, space) -> (mark, keys in order, nodes, matrix)
        self._cache: dict[tuple[str, str, str], tuple[Mark, list[str], list[str], Any]] = {}

    def _c(self) -> sqlite3.Connection:
        if self._conn is None:
            c = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=0.0
            )
            c.execute("PRAGMA synchronous=NORMAL")  # a projection: losing it costs a rebuild
            for stmt in SCHEMA:
                c.execute(stmt)
            self._conn = c
        return self._conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        async def attempt() -> T:
            c = self._c()
            try:
                return fn(c)
            except BaseException:
                if c.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        c.execute("ROLLBACK")
                raise

        return await retry_busy(
            attempt, path=self.path, busy_timeout=self.busy_timeout, what="SQLite recall index"
        )

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        self._cache.clear()
        if conn is not None:
            conn.close()

    async def mark(self, namespace: str, scope: str, space: str) -> Mark | None:
        row = await self._run(
            lambda c: c.execute(
                "SELECT generation, sequence FROM tether_recall_marks"
                " WHERE ns = ? AND scope = ? AND space = ?",
                (namespace, scope, space),
            ).fetchone()
        )
        return None if row is None else Mark(generation=row[0], sequence=row[1])

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
        where = (namespace, scope, space)

        def tx(c: sqlite3.Connection) -> None:
            c.execute("BEGIN IMMEDIATE")
            if replace:
                c.execute(
                    "DELETE FROM tether_recall_vectors WHERE ns = ? AND scope = ? AND space = ?",
                    where,
                )
            c.executemany(
                "DELETE FROM tether_recall_vectors"
                " WHERE ns = ? AND scope = ? AND space = ? AND key = ?",
                [(*where, k) for k in deletes],
            )
            c.executemany(
                "INSERT OR REPLACE INTO tether_recall_vectors VALUES (?, ?, ?, ?, ?, ?)",
                [(*where, e.key, e.node, e.vector) for e in upserts],
            )
            c.execute(
                "INSERT OR REPLACE INTO tether_recall_marks VALUES (?, ?, ?, ?, ?)",
                (*where, mark.generation, mark.sequence),
            )
            c.execute("COMMIT")

        await self._run(tx)
        self._cache.pop(where, None)

    async def _rows(self, namespace: str, scope: str, space: str) -> list[tuple[str, str, bytes]]:
        return await self._run(
            lambda c: [
                (r[0], r[1], bytes(r[2]))
                for r in c.execute(
                    "SELECT key, node, vector FROM tether_recall_vectors"
                    " WHERE ns = ? AND scope = ? AND space = ? ORDER BY key",
                    (namespace, scope, space),
                )
            ]
        )

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

        key = (namespace, scope, space)
        mark = await self.mark(namespace, scope, space)
        if mark is None:
            return []
        cached = self._cache.get(key)
        if cached is None or cached[0] != mark:
            rows = await self._rows(namespace, scope, space)
            matrix = (
                np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(len(rows), -1)
                if rows
                else None
            )
            cached = (mark, [r[0] for r in rows], [r[1] for r in rows], matrix)
            self._cache[key] = cached
        _, order, nodes, matrix = cached
        return scan(order, nodes, matrix, query, k=k, where=where)

    async def entries(self, namespace: str, scope: str, space: str) -> dict[str, VectorEntry]:
        return {
            k: VectorEntry(key=k, node=n, vector=v)
            for k, n, v in await self._rows(namespace, scope, space)
        }

    async def drop(self, namespace: str, scope: str | None = None) -> int:
        def tx(c: sqlite3.Connection) -> int:
            c.execute("BEGIN IMMEDIATE")
            if scope is None:
                n = c.execute("DELETE FROM tether_recall_vectors WHERE ns = ?", (namespace,))
                c.execute("DELETE FROM tether_recall_marks WHERE ns = ?", (namespace,))
            else:
                n = c.execute(
                    "DELETE FROM tether_recall_vectors WHERE ns = ? AND scope = ?",
                    (namespace, scope),
                )
                c.execute(
                    "DELETE FROM tether_recall_marks WHERE ns = ? AND scope = ?",
                    (namespace, scope),
                )
            c.execute("COMMIT")
            return int(n.rowcount)

        removed = await self._run(tx)
        for k in [k for k in self._cache if k[0] == namespace and scope in (None, k[1])]:
            del self._cache[k]
        return removed

    async def indexed(self, namespace: str) -> list[tuple[str, str]]:
        rows = await self._run(
            lambda c: c.execute(
                "SELECT scope, space FROM tether_recall_marks WHERE ns = ? ORDER BY scope, space",
                (namespace,),
            ).fetchall()
        )
        return [(r[0], r[1]) for r in rows]
