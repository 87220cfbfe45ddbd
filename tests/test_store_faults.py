"""The database fails under the writers: terminated connections and server restarts.

Each fault test runs on a private server the test starts on a loopback port (nothing
else uses it, so it may be killed): 8 writers commit turns to 4 threads (2 writers per
thread, so they also conflict) for about 10 s while the test breaks the server in
rounds. It asserts no acked turn lost, none duplicated, and only typed errors
(tests/_fault_helpers.py), and prints the figures (``-s`` shows them).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from _fault_helpers import NS, Tally, check, writer
from _private_servers import (
    PostgresServer,
    RedisServer,
    postgres_missing,
    redis_missing,
)
from tether import StoreError, Transaction, transact
from tether.store import Store, open_store

WRITERS, THREADS, SECONDS = 8, 4, 10.0


# -- PostgreSQL: one connection terminated under a store (the shared server) ----------


@pytest.mark.postgres
async def test_a_commit_whose_backend_is_terminated_is_proven_not_applied(
    postgres_url: str,
) -> None:
    """The backend running a commit is terminated mid-statement (the commit waits on a
    row lock the test holds): the connection is discarded, and since its backend is
    gone and its nodes are not stored, the commit is ``store_unavailable`` with
    ``committed=False``, which ``transact`` retries; the store goes on on a new
    connection. Was: a raw asyncpg error, then "another operation is in progress"."""
    import asyncpg

    schema = f"tether_faults_{uuid.uuid4().hex[:10]}"
    url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
    admin = await asyncpg.connect(postgres_url)
    # Polls on a connection of its own: inside the admin's lock transaction
    # pg_stat_activity would stay the snapshot its first read took.
    watch = await asyncpg.connect(postgres_url)
    s = await open_store(url, max_size=1)
    try:
        first = Transaction(s, NS)
        await first.append("thread:t", "goal", {"i": 0})
        await first.commit()

        async def commit_under_kill(fn: Any) -> Any:
            lock = admin.transaction()
            await lock.start()
            await admin.execute(f'SELECT 1 FROM "{schema}".tether_scopes FOR UPDATE')
            task = asyncio.create_task(fn())
            pid = None
            deadline = time.monotonic() + 20
            while pid is None:  # the commit, waiting on the lock
                assert time.monotonic() < deadline, (
                    await watch.fetch(
                        "SELECT pid, wait_event_type, state, query FROM pg_stat_activity"
                        " WHERE query LIKE $1",
                        f"%{schema}%",
                    ),
                    task,
                )
                await asyncio.sleep(0.01)
                pid = await watch.fetchval(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE $1",
                    f'%"{schema}".tether_commit%',
                )
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
            await lock.rollback()
            return await asyncio.gather(task, return_exceptions=True)

        txn = Transaction(s, NS)
        await txn.append("thread:t", "goal", {"i": 1})
        [err] = await commit_under_kill(txn.commit)
        assert isinstance(err, StoreError), repr(err)
        assert (err.code, err.details["committed"]) == ("store_unavailable", False)
        assert [n.payload for n in await s.nodes(NS, "thread:t")] == [{"i": 0}]

        async def turn(t: Transaction) -> None:
            await t.append("thread:t", "goal", {"i": 2})

        # transact under the same fault: its first commit is proven not applied, and run
        # again on a new connection.
        await commit_under_kill(lambda: transact(s, NS, turn))
        assert [n.payload for n in await s.nodes(NS, "thread:t")] == [{"i": 0}, {"i": 2}]
    finally:
        await s.close()
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.close()
        await watch.close()


# -- PostgreSQL: terminated backends and restarts (a private server) ------------------


@pytest.fixture
def private_postgres() -> Iterator[PostgresServer]:
    why = postgres_missing()
    if why:
        pytest.skip(why)
    server = PostgresServer()
    try:
        server.start()
    except Exception as e:
        server.stop()
        pytest.fail(f"initdb/pg_ctl are installed but a private server did not start: {e}")
    try:
        yield server
    finally:
        server.stop()


async def _run(store: Store, fault: Any, every: float) -> Tally:
    """The writers for SECONDS, and ``fault(round)`` every ``every`` seconds."""
    tally, stop = Tally(), asyncio.Event()
    tasks = [asyncio.create_task(writer(store, w, THREADS, stop, tally)) for w in range(WRITERS)]
    try:
        end = time.monotonic() + SECONDS
        r = 0
        while time.monotonic() < end:
            await asyncio.sleep(every)
            await fault(r)
            tally.faults.append(time.monotonic())
            r += 1
        await asyncio.sleep(1.0)  # the last fault's recovery
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    return tally


def _report(name: str, tally: Tally, lost: int, duplicated: int) -> dict[str, Any]:
    figures = tally.figures(lost, duplicated)
    print(f"\n{name}: {figures}")
    assert tally.untyped == [], tally.untyped[:5]
    assert (lost, duplicated) == (0, 0), figures
    assert len(tally.acked) > 0 and len(tally.recovery()) == len(tally.faults), figures
    return figures


@pytest.mark.slow
async def test_postgres_terminated_backends_and_restarts(
    private_postgres: PostgresServer,
) -> None:
    import asyncpg

    store = await open_store(private_postgres.url, max_size=WRITERS)
    terminated = [0]

    async def fault(r: int) -> None:
        if r % 3 == 2:
            await asyncio.to_thread(private_postgres.restart)
            return
        admin = await asyncpg.connect(private_postgres.url)
        try:
            terminated[0] += await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
        finally:
            await admin.close()

    try:
        tally = await _run(store, fault, 0.8)
        lost, duplicated = await check(store, THREADS, tally)
    finally:
        await store.close()
    figures = _report("postgres faults", tally, lost, duplicated)
    print(f"backends terminated: {terminated[0]}")
    assert figures["faults"] >= 6 and terminated[0] >= WRITERS


# -- Redis: CLIENT KILL and restarts (a private server) -------------------------------


@pytest.fixture
async def private_redis() -> AsyncIterator[RedisServer]:
    why = redis_missing()
    if why:
        pytest.skip(why)
    server = RedisServer()
    try:
        server.start()
    except Exception as e:
        server.remove()
        pytest.fail(f"redis-server is installed but a private server did not start: {e}")
    try:
        yield server
    finally:
        server.remove()


@pytest.mark.slow
@pytest.mark.redis
async def test_redis_killed_clients_and_restarts(private_redis: RedisServer) -> None:
    store = await open_store(private_redis.url, max_connections=WRITERS * 2)

    async def fault(r: int) -> None:
        if r % 3 == 2:
            await asyncio.to_thread(private_redis.restart)
        else:
            await asyncio.to_thread(private_redis.cli, "CLIENT", "KILL", "TYPE", "normal")

    try:
        tally = await _run(store, fault, 0.8)
        lost, duplicated = await check(store, THREADS, tally)
    finally:
        await store.close()
    figures = _report("redis faults", tally, lost, duplicated)
    assert figures["faults"] >= 6
