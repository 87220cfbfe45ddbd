"""The key table in a PostgreSQL store's database.

Tables ``tether_crypto_*`` beside the store's own, reached through the store's
connection pool (``PostgresStore.keystore()``: the same credentials, TLS and schema).
Migrations are versioned and serialised by an advisory lock.

Erasure sets the wrapped key to NULL; PostgreSQL keeps the old row version until
VACUUM reclaims its space and its bytes until the page is reused, and WAL and
backups keep theirs: rotate the master key after an erasure to make those copies
useless (docs/encryption.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from ..core.errors import StoreError
from ..core.graph import now_iso
from ._pools import DEFAULT_POOL_TIMEOUT, pg_connection, pg_error
from .keys import KeyStore, WrappedKey

# Append-only: never edit a shipped migration, add the next one.
MIGRATIONS: Final[tuple[tuple[int, tuple[str, ...]], ...]] = (
    (
        1,
        (
            "CREATE TABLE {checks} (master_id text PRIMARY KEY,"
            " value bytea NOT NULL, created_at text NOT NULL)",
            "CREATE TABLE {keys} (key_id bytea PRIMARY KEY, ns text NOT NULL,"
            " owner text NOT NULL, master_id text NOT NULL, wrapped bytea,"
            " created_at text NOT NULL, erased_at text)",
            "CREATE INDEX tether_crypto_keys_owner ON {keys} (ns, owner)",
            "CREATE UNIQUE INDEX tether_crypto_keys_live ON {keys} (ns, owner)"
            " WHERE wrapped IS NOT NULL",
            "CREATE TABLE {threads} (ns text NOT NULL, thread text NOT NULL,"
            " user_id text NOT NULL, PRIMARY KEY (ns, thread))",
            "CREATE INDEX tether_crypto_threads_user ON {threads} (ns, user_id)",
        ),
    ),
)
LATEST: Final = MIGRATIONS[-1][0]
_LOCK: Final = 0x7465746B  # advisory lock id for key-table migrations ("tetk")
_COLS: Final = "ns, owner, key_id, master_id, wrapped, created_at, erased_at"


def _row(r: Any) -> WrappedKey:
    return WrappedKey(
        namespace=r["ns"],
        owner=r["owner"],
        key_id=bytes(r["key_id"]),
        master_id=r["master_id"],
        wrapped=None if r["wrapped"] is None else bytes(r["wrapped"]),
        created_at=r["created_at"],
        erased_at=r["erased_at"],
    )


def _sql(template: str, schema: str) -> str:
    q = f'"{schema}".'
    return template.format(
        cols=_COLS,
        keys=q + "tether_crypto_keys",
        checks=q + "tether_crypto_checks",
        threads=q + "tether_crypto_threads",
        schema_t=q + "tether_crypto_schema",
    )


class PostgresKeyStore(KeyStore):
    def __init__(
        self,
        pool: Any,
        *,
        schema: str = "public",
        owned: bool,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
    ) -> None:
        self._pool = pool
        self.pool_timeout = pool_timeout
        self.schema = schema
        self._owned = owned
        self._ready = False

    async def has_checks(self) -> bool:
        """Whether any key-check value is registered (read-only: no table is created)."""
        return bool(await self.checks())

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        try:
            async with pg_connection(self._pool, self.pool_timeout) as c:
                return list(await c.fetch(_sql(sql, self.schema), *args))
        except Exception as e:
            raise pg_error(e, "key table") from e

    async def _write(self, sql: str, *args: Any, lock_checks: bool = False) -> list[Any]:
        try:
            async with pg_connection(self._pool, self.pool_timeout) as c, c.transaction():
                if not self._ready:
                    await self._migrate(c)
                if lock_checks:
                    await c.execute(
                        _sql("LOCK TABLE {checks} IN SHARE ROW EXCLUSIVE MODE", self.schema)
                    )
                return list(await c.fetch(_sql(sql, self.schema), *args))
        except Exception as e:
            raise pg_error(e, "key table") from e

    async def _migrate(self, c: Any) -> None:
        await c.execute("SELECT pg_advisory_xact_lock($1)", _LOCK)
        await c.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        await c.execute(
            _sql(
                "CREATE TABLE IF NOT EXISTS {schema_t} (version int PRIMARY KEY,"
                " applied_at text NOT NULL)",
                self.schema,
            )
        )
        version = await c.fetchval(
            _sql("SELECT coalesce(max(version), 0) FROM {schema_t}", self.schema)
        )
        if version > LATEST:
            raise StoreError(
                f"the key table has schema version {version}, newer than this tether knows; "
                "upgrade tether",
                code="schema_too_new",
            )
        for v, statements in MIGRATIONS:
            if v > version:
                for stmt in statements:
                    await c.execute(_sql(stmt, self.schema))
                await c.execute(
                    _sql(
                        "INSERT INTO {schema_t} (version, applied_at) VALUES ($1, $2)", self.schema
                    ),
                    v,
                    now_iso(),
                )
        self._ready = True

    # -- the contract ----------------------------------------------------------------

    async def checks(self) -> dict[str, bytes]:
        if not await self._fetch_exists():
            return {}
        rows = await self._fetch("SELECT master_id, value FROM {checks}")
        return {r["master_id"]: bytes(r["value"]) for r in rows}

    async def _fetch_exists(self) -> bool:
        rows = await self._fetch(
            "SELECT to_regclass($1) IS NOT NULL AS ok", _sql("{checks}", self.schema)
        )
        return bool(rows[0]["ok"])

    async def add_check(self, master_id: str, value: bytes, *, only_if_empty: bool) -> bool:
        rows = await self._write(
            "WITH existing AS (SELECT master_id FROM {checks}),"
            " ins AS (INSERT INTO {checks} (master_id, value, created_at)"
            "   SELECT $1, $2, $3 WHERE NOT $4 OR NOT EXISTS (SELECT 1 FROM existing)"
            "   ON CONFLICT (master_id) DO NOTHING RETURNING master_id)"
            " SELECT (EXISTS (SELECT 1 FROM ins) OR EXISTS"
            "   (SELECT 1 FROM existing WHERE master_id = $1)) AS ok",
            master_id,
            value,
            now_iso(),
            only_if_empty,
            lock_checks=True,
        )
        return bool(rows[0]["ok"])

    async def remove_checks(self, *, keep: str) -> list[str]:
        rows = await self._write(
            "DELETE FROM {checks} WHERE master_id <> $1 RETURNING master_id", keep
        )
        return [r["master_id"] for r in rows]

    async def load(
        self, namespace: str, owner: str, *, thread: str | None = None
    ) -> tuple[str | None, list[WrappedKey]]:
        rows = await self._fetch(
            "WITH b AS (SELECT user_id FROM {threads} WHERE ns = $1 AND thread = $3)"
            " SELECT (SELECT user_id FROM b) AS bound, {cols} FROM (SELECT 1) one"
            " LEFT JOIN {keys} k ON k.ns = $1 AND (k.owner = $2"
            "   OR k.owner = 'user:' || (SELECT user_id FROM b))",
            namespace,
            owner,
            thread,
        )
        bound = rows[0]["bound"] if rows else None
        return bound, [_row(r) for r in rows if r["key_id"] is not None]

    async def by_ids(self, namespace: str, key_ids: Sequence[bytes]) -> list[WrappedKey]:
        if not key_ids:
            return []
        rows = await self._fetch(
            "SELECT {cols} FROM {keys} WHERE ns = $1 AND key_id = ANY($2::bytea[])",
            namespace,
            list(key_ids),
        )
        return [_row(r) for r in rows]

    async def insert(self, key: WrappedKey) -> WrappedKey:
        rows = await self._write(
            "WITH ins AS (INSERT INTO {keys} ({cols})"
            "   VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING *)"
            " SELECT {cols} FROM ins",
            key.namespace,
            key.owner,
            key.key_id,
            key.master_id,
            key.wrapped,
            key.created_at,
            key.erased_at,
        )
        if rows:
            return _row(rows[0])
        # Another writer's key won (its insert committed first): read it, outside the
        # statement whose snapshot could not see it.
        won = await self._fetch(
            "SELECT {cols} FROM {keys} WHERE ns = $1 AND owner = $2 AND wrapped IS NOT NULL",
            key.namespace,
            key.owner,
        )
        if not won:
            raise StoreError("a data key insert lost to a key that then vanished; retry")
        return _row(won[0])

    async def erase(self, namespace: str, owner: str, *, erased_at: str) -> list[bytes]:
        rows = await self._write(
            "UPDATE {keys} SET wrapped = NULL, erased_at = $3"
            " WHERE ns = $1 AND owner = $2 AND wrapped IS NOT NULL RETURNING key_id",
            namespace,
            owner,
            erased_at,
        )
        return [bytes(r["key_id"]) for r in rows]

    async def rewrap(self, key: WrappedKey, *, wrapped: bytes, master_id: str) -> bool:
        rows = await self._write(
            "UPDATE {keys} SET wrapped = $1, master_id = $2"
            " WHERE key_id = $3 AND master_id = $4 AND wrapped IS NOT NULL RETURNING key_id",
            wrapped,
            master_id,
            key.key_id,
            key.master_id,
        )
        return bool(rows)

    async def wrapped_elsewhere(self, master_id: str) -> AsyncIterator[WrappedKey]:
        after = b""
        while True:
            rows = await self._fetch(
                "SELECT {cols} FROM {keys} WHERE key_id > $1"
                " AND wrapped IS NOT NULL AND master_id <> $2 ORDER BY key_id LIMIT 256",
                after,
                master_id,
            )
            if not rows:
                return
            for r in rows:
                yield _row(r)
            after = bytes(rows[-1]["key_id"])

    async def bind(self, namespace: str, thread: str, user: str) -> str:
        await self._write(
            "INSERT INTO {threads} (ns, thread, user_id) VALUES ($1, $2, $3)"
            " ON CONFLICT DO NOTHING",
            namespace,
            thread,
            user,
        )
        rows = await self._fetch(
            "SELECT user_id FROM {threads} WHERE ns = $1 AND thread = $2",
            namespace,
            thread,
        )
        return str(rows[0]["user_id"])

    async def count_threads(self, namespace: str, user: str) -> int:
        rows = await self._fetch(
            "SELECT count(*) AS n FROM {threads} WHERE ns = $1 AND user_id = $2",
            namespace,
            user,
        )
        return int(rows[0]["n"])

    async def close(self) -> None:
        if self._owned and self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
