"""The Redis backend on a local Redis Cluster: finding the cluster, where keys live, failover.

The cluster is the session's (tests/conftest.py ``redis_cluster``: 3 masters with a
replica each, on loopback ports). The store contract, races and crashes on it are run
by tests/conformance, tests/test_store_redis*.py and tests/test_store_processes.py.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.crc import key_slot

from _fault_helpers import NS, Tally, check, writer
from tether import InvalidRequest, StoreError, Transaction
from tether.store import open_store
from tether.store.redis import RedisStore

pytestmark = pytest.mark.redis


async def _replica_of(cluster: Any, port: int) -> int:
    """The port of a replica of the master on ``port``, once the cluster's view (gossip,
    seen from one node) agrees that it is one."""
    deadline = time.monotonic() + 20
    while True:
        roles = await asyncio.to_thread(cluster.roles)
        if roles.get(port, ("", ""))[1] == "master":
            master_id = roles[port][0]
            for p, r in roles.items():
                if r[1] == "slave" and r[2] == master_id:
                    return p
        assert time.monotonic() < deadline, f"no replica of :{port} in {roles}"
        await asyncio.sleep(0.1)


@pytest.fixture
async def store(redis_cluster_url: str) -> AsyncIterator[RedisStore]:
    s = await open_store(redis_cluster_url, prefix=f"tt-cl-{uuid.uuid4().hex[:12]}:")
    assert isinstance(s, RedisStore)
    try:
        yield s
    finally:
        await s.drop_prefix()
        await s.close()


async def test_a_plain_url_to_any_node_finds_the_cluster(redis_cluster: Any) -> None:
    prefix = f"tt-cl-{uuid.uuid4().hex[:12]}:"
    stores = [await open_store(n.url, prefix=prefix) for n in redis_cluster.nodes]
    try:
        assert all(isinstance(s, RedisStore) and s.cluster for s in stores)
        # Namespaces on every master, written through one node, read through each.
        txn_ns = [f"ns-{i}" for i in range(12)]
        for ns in txn_ns:
            txn = Transaction(stores[0], ns)
            await txn.append("thread:a", "goal", {"ns": ns})
            await txn.commit()
        for s in stores:
            for ns in txn_ns:
                assert [n.payload for n in await s.nodes(ns, "thread:a")] == [{"ns": ns}]
        assert await stores[-1].list_namespaces() == sorted(txn_ns)
    finally:
        await stores[0].drop_prefix()
        for s in stores:
            await s.close()


async def test_the_url_option_forces_the_mode(redis_cluster_url: str, redis_url: str) -> None:
    forced = await open_store(f"{redis_cluster_url}?cluster=yes", prefix="tt-cl-forced:")
    try:
        assert isinstance(forced, RedisStore) and forced.cluster
        assert await forced.list_namespaces() == []
    finally:
        await forced.close()
    # cluster=no: a single-node client, even on a cluster node; what it cannot reach
    # from that node (a key of another node's slot) is a typed error, not a wrong answer.
    # (The backend's own open: open_store's look for an encryption key table could
    # already meet another node's slot.)
    single = await RedisStore.open(f"{redis_cluster_url}?cluster=no", prefix="tt-cl-single:")
    try:
        assert isinstance(single, RedisStore) and not single.cluster
        codes = set()
        for i in range(12):  # 12 namespaces: some live on the other masters
            try:
                await single.head(f"ns-{i}", "thread:a")
            except StoreError as e:
                codes.add(e.code)
        assert codes == {"store"}  # "a Redis Cluster node ... open with cluster=auto"
    finally:
        await single.close()
    # cluster=yes against a server that is not a cluster: refused at open.
    plain = redis_url.rsplit("/", 1)[0] + "/0"
    with pytest.raises(StoreError, match=r"[Cc]luster"):
        await open_store(f"{plain}?cluster=yes")
    with pytest.raises(InvalidRequest) as e:
        await open_store(f"{redis_cluster_url}?cluster=maybe")
    assert e.value.code == "invalid_request"
    # A cluster has database 0 only: a URL naming another one is refused at once.
    with pytest.raises(InvalidRequest, match="database 0"):
        await open_store(f"{redis_cluster_url}/15")


async def test_a_namespace_lives_in_one_slot_and_namespaces_spread(
    store: RedisStore, redis_cluster: Any
) -> None:
    names = [f"tenant-{i}" for i in range(24)] + ["we{ird}ns"]
    for ns in names:
        txn = Transaction(store, ns)
        await txn.append("thread:a", "goal", {"x": 1})
        await txn.append("thread:b", "goal", {"x": 2})
        await txn.semantic("user:u", "memory", "k", "v")
        await txn.commit()
        await store.reset_scope(ns, "thread:b")
    keys = [k async for k in store._r.scan_iter(match=store.prefix.encode() + b"*")]
    slots: dict[bytes, set[int]] = {}
    for k in keys:
        if b"{" in k:
            slots.setdefault(k[k.index(b"{") + 1 : k.index(b"}")], set()).add(key_slot(k))
    assert len(slots) == len(names)
    assert all(len(s) == 1 for s in slots.values())  # every key of a namespace: one slot
    # ...and the namespaces' slots are served by every master of the cluster.
    masters = {store._r.get_node_from_key(store._stem(ns) + b":scopes").name for ns in names}
    assert masters == {n.name for n in store._r.get_primaries()}
    assert len(masters) == redis_cluster.masters


async def test_failover_of_a_master_loses_no_acked_turn(
    store: RedisStore, redis_cluster: Any
) -> None:
    """CLUSTER FAILOVER on the replica of the namespace's master while 8 writers commit:
    the writers see typed errors while the slot moves, and every acked turn is there."""
    slot_node = store._r.get_node_from_key(store._stem(NS) + b":scopes")
    replica_port = await _replica_of(redis_cluster, slot_node.port)
    tally, stop, threads = Tally(), asyncio.Event(), 4
    tasks = [asyncio.create_task(writer(store, w, threads, stop, tally)) for w in range(8)]
    try:
        await asyncio.sleep(0.5)
        before = len(tally.acked)
        await asyncio.to_thread(redis_cluster.node(replica_port).cli, "CLUSTER", "FAILOVER")
        deadline = time.monotonic() + 20
        while redis_cluster.roles()[replica_port][1] != "master":
            assert time.monotonic() < deadline, "the failover did not happen"
            await asyncio.sleep(0.05)
        tally.faults.append(time.monotonic())
        await asyncio.sleep(1.0)
        assert len(tally.acked) > before  # the writers went on, on the new master
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    lost, duplicated = await check(store, threads, tally)
    figures = tally.figures(lost, duplicated)
    print("failover:", figures)
    assert tally.untyped == []
    assert (lost, duplicated) == (0, 0), figures
    assert store._r.get_node_from_key(store._stem(NS) + b":scopes").port == replica_port
    # Back as it was, for the rest of the session's tests.
    await asyncio.to_thread(redis_cluster.node(slot_node.port).cli, "CLUSTER", "FAILOVER")
    deadline = time.monotonic() + 20
    while redis_cluster.roles()[slot_node.port][1] != "master":
        assert time.monotonic() < deadline, "the failback did not happen"
        await asyncio.sleep(0.05)


async def test_a_killed_master_loses_no_acked_turn(store: RedisStore, redis_cluster: Any) -> None:
    """SIGKILL of the namespace's master under 8 writers: its replica takes over (after
    the cluster's node timeout, 1.5 s here); meanwhile the writers meet only typed errors
    (commits that provably did not run are retried by transact; a commit_unknown is
    resolved by reading), nothing is applied twice, and every acked turn is on the new
    master. Redis replicates asynchronously, so a write acknowledged in the very instant
    of the kill could in principle be missing on the replica; on loopback the
    replication stream leaves with the reply, and none has been (docs/redis.md)."""
    victim = store._r.get_node_from_key(store._stem(NS) + b":scopes")
    replica_port = await _replica_of(redis_cluster, victim.port)
    replica = redis_cluster.node(replica_port)
    tally, stop, threads = Tally(), asyncio.Event(), 4
    tasks = [asyncio.create_task(writer(store, w, threads, stop, tally)) for w in range(8)]
    try:
        await asyncio.sleep(0.5)
        killed = time.monotonic()
        redis_cluster.node(victim.port).stop(kill=True)
        while (await asyncio.to_thread(replica.cli, "ROLE")).split()[0] != "master":
            assert time.monotonic() < killed + 30, "the replica was not promoted"
            await asyncio.sleep(0.05)
        promoted = time.monotonic()
        tally.faults.append(promoted)
        await asyncio.sleep(1.5)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    lost, duplicated = await check(store, threads, tally)
    figures = tally.figures(lost, duplicated)
    print(f"killed master: promoted after {promoted - killed:.2f} s, {figures}")
    assert tally.untyped == []
    assert (lost, duplicated) == (0, 0), figures
    assert len(tally.recovery()) == 1, figures
    # The killed node comes back as a replica of the new master, for the rest of the session.
    await asyncio.to_thread(redis_cluster.node(victim.port).start)
    deadline = time.monotonic() + 30
    while True:
        info = await asyncio.to_thread(redis_cluster.node(victim.port).cli, "INFO", "replication")
        if "role:slave" in info and "master_link_status:up" in info:
            break
        assert time.monotonic() < deadline, "the killed node did not rejoin as a replica"
        await asyncio.sleep(0.1)
