"""One database per backend that a test can open, close and open again (with or without
a cipher), and whose raw bytes it can read: for the encryption tests."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tether.store import Store, open_store, secure
from tether.store.in_memory import MemoryStore

BACKENDS = ("memory", "sqlite", "redis", "postgres")


def backend_params() -> list[Any]:
    return [
        pytest.param("memory", id="memory"),
        pytest.param("sqlite", id="sqlite"),
        pytest.param("redis", id="redis", marks=pytest.mark.redis),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]


class Database:
    """A database that outlives the stores opened on it."""

    def __init__(
        self, kind: str, url: str, options: dict[str, Any], *, pg: tuple[str, str] | None = None
    ) -> None:
        self.kind = kind
        self.pg = pg  # (server URL, schema) of a PostgreSQL database
        self.url = url
        self.options = options
        self._memory = MemoryStore() if kind == "memory" else None
        self._opened: list[Store] = []

    async def open(self, cipher: Any = None) -> Store:
        if self._memory is not None:
            store = await secure(self._memory, cipher)
        else:
            store = await open_store(self.url, cipher=cipher, **self.options)
        self._opened.append(store)
        return store

    async def raw_bytes(self) -> bytes:
        """Everything the database holds, as an attacker without keys would read it."""
        if self.kind == "sqlite":
            path = Path(self.url.removeprefix("sqlite:///"))
            return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())
        if self.kind == "redis":
            import redis.asyncio as aioredis

            r = aioredis.Redis.from_url(self.url, decode_responses=False)
            try:
                keys = sorted(
                    [k async for k in r.scan_iter(match=self.options["prefix"].encode() + b"*")]
                )
                # Values by type, not DUMP: RDB serialisation may LZF-compress a value.
                return b"\n".join([k + b"=" + await _value(r, k) for k in keys])
            finally:
                await r.aclose()
        if self.kind == "postgres":
            rows = await self._pg_fetch(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = $1"
                " ORDER BY table_name",
                self._schema,
            )
            out = []
            for r in rows:  # every column of every row, as PostgreSQL prints it (bytea in hex)
                q = f'SELECT t::text AS row FROM "{self._schema}"."{r["table_name"]}" t'
                out += [row["row"].encode() for row in await self._pg_fetch(q)]
            return b"\n".join(sorted(out))
        raise NotImplementedError(self.kind)

    @property
    def _schema(self) -> str:
        assert self.pg is not None
        return self.pg[1]

    async def _pg_fetch(self, sql: str, *args: Any) -> list[Any]:
        import asyncpg

        assert self.pg is not None
        conn = await asyncpg.connect(self.pg[0])
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def sealed_payloads(self) -> list[bytes]:
        """Every stored payload's bytes, in a stable order (where a test can read them)."""
        if self._memory is not None:
            return sorted(
                data
                for ns in self._memory._data.values()
                for sc in ns.values()
                for _, data in sc.nodes
            )
        if self.kind == "sqlite":
            c = sqlite3.connect(self.url.removeprefix("sqlite:///"))
            try:
                return sorted(bytes(r[0]) for r in c.execute("SELECT payload FROM tether_nodes"))
            finally:
                c.close()
        if self.kind == "redis":
            import redis.asyncio as aioredis

            r = aioredis.Redis.from_url(self.url, decode_responses=False)
            try:
                out = []
                async for k in r.scan_iter(match=self.options["prefix"].encode() + b"*:n:*"):
                    out += [v.partition(b"\n")[2] for v in await r.hvals(k)]
                return sorted(out)
            finally:
                await r.aclose()
        if self.kind == "postgres":
            q = f'SELECT payload FROM "{self._schema}".tether_nodes'
            return sorted(bytes(r["payload"]) for r in await self._pg_fetch(q))
        raise NotImplementedError(self.kind)

    async def cleanup(self) -> None:
        for s in self._opened:
            await s.close()
        if self.kind == "redis":
            import redis.asyncio as aioredis

            r = aioredis.Redis.from_url(self.url, decode_responses=False)
            try:
                keys = [k async for k in r.scan_iter(match=self.options["prefix"].encode() + b"*")]
                if keys:
                    await r.unlink(*keys)
            finally:
                await r.aclose()
        if self.kind == "postgres":
            await self._pg_fetch(f'DROP SCHEMA IF EXISTS "{self._schema}" CASCADE')


async def _value(r: Any, key: bytes) -> bytes:
    kind = (await r.type(key)).decode()
    if kind == "string":
        return bytes(await r.get(key))
    if kind == "hash":
        return b"|".join(k + b":" + v for k, v in sorted((await r.hgetall(key)).items()))
    if kind == "zset":
        return b"|".join(m for m, _ in await r.zrange(key, 0, -1, withscores=True))
    if kind == "set":
        return b"|".join(sorted(await r.smembers(key)))
    if kind == "list":
        return b"|".join(await r.lrange(key, 0, -1))
    raise AssertionError(f"unexpected Redis type {kind} of {key!r}")


def sqlite_tables(path: Path) -> list[str]:
    c = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'"))
    finally:
        c.close()


async def make_database(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    if kind == "memory":
        return Database("memory", "memory://", {})
    if kind == "sqlite":
        return Database("sqlite", f"sqlite:///{tmp_path / 'crypto.db'}", {})
    if kind == "redis":
        url = request.getfixturevalue("redis_url")
        return Database("redis", url, {"prefix": f"tc-{uuid.uuid4().hex[:12]}:"})
    if kind == "postgres":
        url = request.getfixturevalue("postgres_url")
        schema = f"tether_crypto_{uuid.uuid4().hex[:12]}"
        sep = "&" if "?" in url else "?"
        return Database("postgres", f"{url}{sep}schema={schema}", {}, pg=(url, schema))
    raise AssertionError(kind)


async def database_fixture(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Database]:
    db = await make_database(request.param, request, tmp_path)
    try:
        yield db
    finally:
        await db.cleanup()
