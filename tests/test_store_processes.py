"""Real processes on one SQLite file and one PostgreSQL database: races and SIGKILL.

The SIGKILL test also runs on Redis and on the session's local Redis Cluster (the
races of processes on Redis are tests/test_store_redis_race.py).

The writers are tests/store_worker.py, started with the interpreter running the
tests; each waits on stdin so the racing writers start at the same instant.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import tether
from tether.store import Store

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("store_worker.py")


@asynccontextmanager
async def _target(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> AsyncIterator[str]:
    """A store URL that several processes can open: a file, a fresh PG schema, or a
    fresh key prefix on Redis (a server, or the local cluster)."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'race.db'}"
        return
    if kind in ("redis", "redis-cluster"):
        base = request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
        url = f"{base}{'&' if '?' in base else '?'}prefix=tt-proc-{uuid.uuid4().hex[:12]}:"
        try:
            yield url
        finally:
            async with await tether.open_store(url) as store:
                await store.drop_prefix()  # type: ignore[attr-defined]
        return
    import asyncpg

    base = request.getfixturevalue("postgres_url")
    schema = f"tether_race_{uuid.uuid4().hex[:12]}"
    url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    store = await tether.open_store(url)  # migrate once, before the racers start
    await store.close()
    try:
        yield url
    finally:
        conn = await asyncpg.connect(base)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    async with _target(request, request.param, tmp_path) as url:
        yield url


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-cluster", marks=pytest.mark.redis),
    ]
)
async def crash_target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    async with _target(request, request.param, tmp_path) as url:
        yield url


def start(*args: object) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, str(WORKER), *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    line = p.stdout.readline()
    if line.strip() != "ready":
        _, err = p.communicate(timeout=10)
        raise AssertionError(f"worker did not start: {line!r}\n{err}")
    return p


def go(*procs: subprocess.Popen[str]) -> None:
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()


def finish(p: subprocess.Popen[str], timeout: float = 90) -> str:
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, f"worker failed ({p.returncode}):\n{err}"
    assert "locked" not in err and "busy" not in err, err
    return out


def relaxed(url: str) -> str:
    """The same target with durability=normal: a process race is about locking, not fsync,
    and 8,000 fsyncs would make the test's time the disk's (both modes survive a crash
    of the process; only power loss tells them apart)."""
    return f"{url}{'&' if '?' in url else '?'}durability=normal"


async def test_two_processes_writing_400_threads_lose_nothing(target: str) -> None:
    ns = f"race-{uuid.uuid4().hex}"
    procs = [start("threads", relaxed(target), ns, tag, 200, 20) for tag in ("a", "b")]
    go(*procs)
    for p in procs:
        assert finish(p).split() == ["done"]

    async with await tether.open_store(target) as store:
        infos = await store.list_scopes(ns, prefix="thread:", limit=1000)
        assert len(infos) == 400
        assert all(i.sequence == 40 and i.generation == 0 for i in infos)
        turns = 0
        for info in infos:
            nodes = await store.nodes(ns, info.scope, limit=100)
            prefix, t = info.scope.removeprefix("thread:").split("-")
            assert [(n.kind, n.payload["i"]) for n in nodes] == [
                (k, i) for i in range(20) for k in ("goal", "answer")
            ]
            assert all(n.payload["p"] == prefix and n.payload["t"] == int(t) for n in nodes)
            turns += len(nodes) // 2
        assert turns == 8000


async def test_processes_appending_to_one_thread_land_every_turn_once(target: str) -> None:
    ns = f"same-{uuid.uuid4().hex}"
    tags = ("p", "q", "r")
    procs = [start("same", target, ns, "thread:shared", 40, tag) for tag in tags]
    go(*procs)
    for p in procs:
        assert finish(p).split()[0] == "done"

    async with await tether.open_store(target) as store:
        nodes = await store.nodes(ns, "thread:shared", limit=10_000)
        head = await store.head(ns, "thread:shared")
    assert head.sequence == len(nodes) == 2 * 40 * len(tags)
    assert [n.sequence for n in nodes] == list(range(1, len(nodes) + 1))
    goals = [(n.payload["tag"], n.payload["i"]) for n in nodes if n.kind == "goal"]
    assert sorted(goals) == sorted((t, i) for t in tags for i in range(40))
    # A turn is committed whole: each answer directly follows its goal and hangs off it.
    for goal, answer in zip(nodes[::2], nodes[1::2], strict=True):
        assert (goal.kind, answer.kind) == ("goal", "answer")
        assert answer.payload == goal.payload and answer.parents == (goal.id,)
    # Every goal after the first hangs off the previous turn: nothing was computed stale.
    for prev_answer, goal in zip(nodes[1::2], nodes[2::2], strict=False):
        assert goal.parents == (prev_answer.id,)


def _read_committed(p: subprocess.Popen[str], want: int, deadline: float) -> list[int]:
    assert p.stdout is not None
    got: list[int] = []
    while len(got) < want:
        line = p.stdout.readline()
        if not line:
            break
        got.append(int(line))
        if time.monotonic() > deadline:
            break
    return got


async def _check_crash_state(store: Store, ns: str, printed: list[int]) -> int:
    thread = await store.nodes(ns, "thread:c", limit=100_000)
    user = await store.nodes(ns, "user:c", limit=100_000)
    n = len(user)
    assert len(thread) == 2 * n, "a commit landed in one scope but not the other"
    assert [x.payload["i"] for x in thread[::2]] == list(range(n))
    assert [x.payload["i"] for x in thread[1::2]] == list(range(n))
    assert [x.payload["i"] for x in user] == list(range(n))
    assert all(x.kind == "goal" for x in thread[::2])
    assert set(printed) <= set(range(n)), "a commit that returned was lost"
    head = await store.head(ns, "thread:c")
    assert head.sequence == 2 * n
    if n:
        assert head.frontier == (thread[-1].id,)
        last = await store.resource_head(ns, "user:c", "var:last")
        assert last is not None and last.payload == {"i": n - 1}
    return n


async def test_sigkill_mid_commit_loses_no_committed_turn(crash_target: str) -> None:
    target = crash_target
    ns = f"crash-{uuid.uuid4().hex}"
    committed = 0
    rng = random.Random(7)
    for _ in range(3):
        p = start("crash", target, ns, committed)
        go(p)
        printed = _read_committed(p, 40, time.monotonic() + 30)
        assert len(printed) >= 5, "the writer made no progress"
        time.sleep(rng.uniform(0, 0.004))  # land somewhere inside the next commit
        os.kill(p.pid, signal.SIGKILL)
        out, _ = p.communicate(timeout=10)
        assert p.returncode == -signal.SIGKILL
        printed += [int(x) for x in out.split()]
        async with await tether.open_store(target) as store:
            n = await _check_crash_state(store, ns, printed)
        assert n >= committed
        committed = n
    # After three crashes the store still takes ordinary commits.
    async with await tether.open_store(target) as store:
        txn = tether.Transaction(store, ns)
        await txn.append("thread:c", "goal", {"i": committed, "pad": ""})
        await txn.append("thread:c", "answer", {"i": committed, "pad": ""})
        await txn.append("user:c", "resource", {"i": committed}, resource_key="var:last")
        await txn.commit()
        assert await _check_crash_state(store, ns, []) == committed + 1
