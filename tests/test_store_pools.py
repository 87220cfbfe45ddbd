"""Pools at exhaustion (issue 17): PostgreSQL and Redis wait for a free connection,
so 1,000 concurrent calls on one store all succeed; past ``pool_timeout`` a call
raises ``StoreError(code="pool_timeout")``. Pool size and timeout are URL options."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tether.core.errors import InvalidRequest, StoreError
from tether.core.graph import make_node
from tether.store import ScopeWrite, Store, open_store


def _with(url: str, **opts: object) -> str:
    q = "&".join(f"{k}={v}" for k, v in opts.items())
    return f"{url}{'&' if '?' in url else '?'}{q}"


async def _thousand(store: Store, ns: str) -> None:
    async def one(i: int) -> int:
        scope = f"thread:c{i}"
        n = make_node("goal", {"i": i}, [], sequence=1)
        await store.commit(
            ns,
            [
                ScopeWrite(
                    scope=scope,
                    expected_generation=0,
                    expected_sequence=0,
                    nodes=(n,),
                    frontier=(n.id,),
                )
            ],
        )
        return (await store.head(ns, scope)).sequence

    got = await asyncio.gather(*(one(i) for i in range(1000)), return_exceptions=True)
    errors = [g for g in got if isinstance(g, BaseException)]
    assert errors == [], errors[:3]
    assert got == [1] * 1000


@pytest.mark.postgres
async def test_postgres_thousand_concurrent_calls(postgres_url: str) -> None:
    ns = "ns-" + uuid.uuid4().hex[:12]
    async with await open_store(_with(postgres_url, max_size=5, pool_timeout=60)) as store:
        await _thousand(store, ns)
        await store.delete_namespace(ns)


@pytest.mark.redis
async def test_redis_thousand_concurrent_calls(redis_url: str) -> None:
    ns = "ns-" + uuid.uuid4().hex[:12]
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    async with await open_store(
        _with(redis_url, max_connections=20, pool_timeout=60, prefix=prefix)
    ) as store:
        await _thousand(store, ns)
        await store.drop_prefix()  # type: ignore[attr-defined]


@pytest.mark.postgres
async def test_postgres_pool_timeout_is_typed(postgres_url: str) -> None:
    async with await open_store(_with(postgres_url, max_size=1, pool_timeout=0.2)) as store:
        pool = store._pool  # type: ignore[attr-defined]
        conn = await pool.acquire()  # the only connection, held
        try:
            with pytest.raises(StoreError) as err:
                await store.head("ns-x", "thread:t")
            assert err.value.code == "pool_timeout"
        finally:
            await pool.release(conn)
        assert (await store.head("ns-x", "thread:t")).sequence == 0


@pytest.mark.redis
async def test_redis_pool_timeout_is_typed(redis_url: str) -> None:
    async with await open_store(_with(redis_url, max_connections=1, pool_timeout=0.2)) as store:
        pool = store._r.connection_pool  # type: ignore[attr-defined]
        conn = await pool.get_connection()  # the only connection, held
        try:
            with pytest.raises(StoreError) as err:
                await store.head("ns-x", "thread:t")
            assert err.value.code == "pool_timeout"
        finally:
            await pool.release(conn)
        assert (await store.head("ns-x", "thread:t")).sequence == 0


@pytest.mark.postgres
@pytest.mark.redis
async def test_bad_pool_timeout_refused(postgres_url: str, redis_url: str) -> None:
    with pytest.raises(InvalidRequest):
        await open_store(_with(postgres_url, pool_timeout="soon"))
    with pytest.raises(InvalidRequest):
        await open_store(_with(redis_url, max_connections=0))
