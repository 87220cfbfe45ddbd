"""The recall index's vectors in a PostgreSQL store's database, on the store's pool.

Tables ``tether_recall_marks`` and ``tether_recall_vectors`` in the store's schema, so
every process on the database shares one index and a restart embeds only what
changed. Only for plaintext stores (``EncryptedStore`` keeps the index out of the
database). Searching is an exact scan: the rows of one scope and embedder are loaded
once into a numpy matrix, kept while the scope's mark does not move.

pgvector: where the server has the ``vector`` extension installed (``CREATE EXTENSION
vector`` by an administrator), each row also gets a ``vector`` column and an
unfiltered search is one query, ``ORDER BY vec <=> $1::vector LIMIT k`` (pgvector's
cosine distance, its documented SQL). UNTESTED: pgvector's server extension cannot be
installed on the machines this was built on; the exact scan is what the tests run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from ..core.errors import StoreError
from ._pools import DEFAULT_POOL_TIMEOUT, pg_connection, pg_error
from .vectors import Mark, VectorEntry, VectorHit, VectorTable, scan

_LOCK: Final = 0x7465_7468_7265_6331  # "tethrec1": serializes creating the tables


class PostgresVectorTable(VectorTable):
    def __init__(
        self, pool: Any, *, schema: str = "public", pool_timeout: float = DEFAULT_POOL_TIMEOUT
    ) -> None:
        self._pool = pool
        self.pool_timeout = pool_timeout
        self.schema = schema
        self._ready = False
        self._pgvector = False
        self._cache: dict[tuple[str, str, str], tuple[Mark, list[str], list[str], Any]] = {}

    def _t(self, name: str) -> str:
        return f'"{self.schema}".tether_recall_{name}'

    async def _setup(self, c: Any) -> None:
        if self._ready:
            return
        async with c.transaction():
            await c.execute("SELECT pg_advisory_xact_lock($1)", _LOCK)
            await c.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            await c.execute(
                f"CREATE TABLE IF NOT EXISTS {self._t('marks')} (ns text NOT NULL,"
                " scope text NOT NULL, space text NOT NULL, generation bigint NOT NULL,"
                " sequence bigint NOT NULL, PRIMARY KEY (ns, scope, space))"
            )
            await c.execute(
                f"CREATE TABLE IF NOT EXISTS {self._t('vectors')} (ns text NOT NULL,"
                " scope text NOT NULL, space text NOT NULL, key text NOT NULL,"
                " node text NOT NULL, vector bytea NOT NULL,"
                " PRIMARY KEY (ns, scope, space, key))"
            )
            self._pgvector = bool(
                await c.fetchval("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
            )
            if self._pgvector:  # UNTESTED (see the module docstring)
                await c.execute(
                    f"ALTER TABLE {self._t('vectors')} ADD COLUMN IF NOT EXISTS vec vector"
                )
        self._ready = True

    async def _do(self, fn: Callable[[Any], Any]) -> Any:
        if self._pool is None:
            raise StoreError("this store is closed; open a new one with tether.open_store")
        try:
            async with pg_connection(self._pool, self.pool_timeout) as c:
                await self._setup(c)
                return await fn(c)
        except Exception as e:
            raise pg_error(e, "recall index") from e

    async def close(self) -> None:
        self._pool = None
        self._cache.clear()

    async def mark(self, namespace: str, scope: str, space: str) -> Mark | None:
        async def q(c: Any) -> Any:
            return await c.fetchrow(
                f"SELECT generation, sequence FROM {self._t('marks')}"
                " WHERE ns = $1 AND scope = $2 AND space = $3",
                namespace,
                scope,
                space,
            )

        row = await self._do(q)
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
        vt = self._t("vectors")

        async def tx(c: Any) -> None:
            async with c.transaction():
                if replace:
                    await c.execute(
                        f"DELETE FROM {vt} WHERE ns = $1 AND scope = $2 AND space = $3", *where
                    )
                if deletes:
                    await c.execute(
                        f"DELETE FROM {vt} WHERE ns = $1 AND scope = $2 AND space = $3"
                        " AND key = ANY($4::text[])",
                        *where,
                        list(deletes),
                    )
                if upserts:
                    await c.executemany(
                        f"INSERT INTO {vt} (ns, scope, space, key, node, vector)"
                        " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (ns, scope, space, key)"
                        " DO UPDATE SET node = EXCLUDED.node, vector = EXCLUDED.vector",
                        [(*where, e.key, e.node, e.vector) for e in upserts],
                    )
                    if self._pgvector:  # UNTESTED: the same vector as pgvector text
                        await c.executemany(
                            f"UPDATE {vt} SET vec = $5::vector WHERE ns = $1 AND scope = $2"
                            " AND space = $3 AND key = $4",
                            [(*where, e.key, _as_text(e.vector)) for e in upserts],
                        )
                await c.execute(
                    f"INSERT INTO {self._t('marks')} VALUES ($1, $2, $3, $4, $5)"
                    " ON CONFLICT (ns, scope, space) DO UPDATE SET"
                    " generation = EXCLUDED.generation, sequence = EXCLUDED.sequence",
                    *where,
                    mark.generation,
                    mark.sequence,
                )

        await self._do(tx)
        self._cache.pop(where, None)

    async def _rows(self, namespace: str, scope: str, space: str) -> list[tuple[str, str, bytes]]:
        async def q(c: Any) -> Any:
            return await c.fetch(
                f"SELECT key, node, vector FROM {self._t('vectors')}"
                ' WHERE ns = $1 AND scope = $2 AND space = $3 ORDER BY key COLLATE "C"',
                namespace,
                scope,
                space,
            )

        return [(r[0], r[1], bytes(r[2])) for r in await self._do(q)]

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
        if self._pgvector and where is None:  # UNTESTED (see the module docstring)

            async def q(c: Any) -> Any:
                return await c.fetch(
                    f"SELECT key, node, 1 - (vec <=> $4::vector) FROM {self._t('vectors')}"
                    " WHERE ns = $1 AND scope = $2 AND space = $3"
                    " ORDER BY vec <=> $4::vector, key LIMIT $5",
                    namespace,
                    scope,
                    space,
                    _as_text(query),
                    k,
                )

            return [VectorHit(key=r[0], node=r[1], score=float(r[2])) for r in await self._do(q)]
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
        async def tx(c: Any) -> int:
            async with c.transaction():
                if scope is None:
                    n = await c.fetchval(
                        f"WITH d AS (DELETE FROM {self._t('vectors')} WHERE ns = $1"
                        " RETURNING 1) SELECT count(*) FROM d",
                        namespace,
                    )
                    await c.execute(f"DELETE FROM {self._t('marks')} WHERE ns = $1", namespace)
                else:
                    n = await c.fetchval(
                        f"WITH d AS (DELETE FROM {self._t('vectors')} WHERE ns = $1"
                        " AND scope = $2 RETURNING 1) SELECT count(*) FROM d",
                        namespace,
                        scope,
                    )
                    await c.execute(
                        f"DELETE FROM {self._t('marks')} WHERE ns = $1 AND scope = $2",
                        namespace,
                        scope,
                    )
                return int(n)

        removed: int = await self._do(tx)
        for k in [k for k in self._cache if k[0] == namespace and scope in (None, k[1])]:
            del self._cache[k]
        return removed

    async def indexed(self, namespace: str) -> list[tuple[str, str]]:
        async def q(c: Any) -> Any:
            return await c.fetch(
                f"SELECT scope, space FROM {self._t('marks')} WHERE ns = $1"
                ' ORDER BY scope COLLATE "C", space COLLATE "C"',
                namespace,
            )

        return [(r[0], r[1]) for r in await self._do(q)]


def _as_text(vector: bytes) -> str:
    """A float32 vector as pgvector's text form, ``[0.1,0.2,...]``."""
    import struct

    n = len(vector) // 4
    return "[" + ",".join(repr(x) for x in struct.unpack(f"<{n}f", vector)) + "]"
