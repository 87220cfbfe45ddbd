"""The Redis backend in the conformance suite (``redis_url``: db 15 in CI), and the same
backend on a local Redis Cluster (``redis-cluster``: the session's 3-master cluster,
reached by a plain URL to one node, as a user would).

Each test gets its own key prefix (kept in ``ctx.state``, so reopening within a test
reaches the same data), so listings see only that test's namespaces. Its keys are
deleted when the test ends, with SCAN + UNLINK: the server is shared.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tether.store import Store, open_store
from tether.store.redis import RedisStore

from .backends import Backend, Context, register


def _drop_prefix(url: str, prefix: str, cluster: bool = False) -> None:
    import redis
    from redis.cluster import RedisCluster

    r = RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    try:
        batch = list(r.scan_iter(match=prefix + "*", count=1000))
        for i in range(0, len(batch), 500):
            r.unlink(*batch[i : i + 500])
    finally:
        r.close()


def _opener(fixture: str) -> Any:
    @asynccontextmanager
    async def _redis(ctx: Context, **options: Any) -> AsyncIterator[Store]:
        url: str = ctx.request.getfixturevalue(fixture)
        cluster = fixture == "redis_cluster_url"
        prefix = ctx.state.get("redis_prefix")
        if prefix is None:
            prefix = ctx.state["redis_prefix"] = f"tt-conf-{uuid.uuid4().hex[:12]}:"
            ctx.request.addfinalizer(lambda: _drop_prefix(url, prefix, cluster))
        store = await open_store(url, prefix=prefix, **options)
        if isinstance(store, RedisStore):
            assert store.cluster is cluster  # found out from the plain URL
        try:
            yield store
        finally:
            await store.close()

    return _redis


register(Backend(name="redis", open=_opener("redis_url"), marks=(pytest.mark.redis,)))
register(
    Backend(name="redis-cluster", open=_opener("redis_cluster_url"), marks=(pytest.mark.redis,))
)
