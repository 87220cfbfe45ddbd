"""Racing processes on one Redis: every turn lands exactly once, in one linear chain.

Real subprocesses (this file run as a script is the worker), released together
through their stdin so that they truly overlap. Each worker commits turns with
``transact``, which retries on Conflict; the parent then reads every thread back.
Each test runs on the Redis server (TETHER_TEST_REDIS_URL) and on the session's local
Redis Cluster (3 masters), reached by a plain URL to one node.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from tether import Transaction, transact
from tether.store import Store, open_store
from tether.store.redis import RedisStore

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(params=["server", "cluster"])
def redis_url(request: pytest.FixtureRequest) -> str:
    if request.param == "cluster":
        url: str = request.getfixturevalue("redis_cluster_url")
        return url
    from conftest import server_url

    return server_url("TETHER_TEST_REDIS_URL")


NS = "race"


async def _turn(store: Store, thread: str, proc: int, turn: int, tries: list[int]) -> None:
    async def fn(txn: Transaction) -> None:
        tries[0] += 1
        goal = await txn.append(thread, "goal", {"p": proc, "t": turn})
        await txn.append(thread, "answer", {"p": proc, "t": turn}, parents=[goal.id])

    await transact(store, NS, fn, attempts=200)


async def _worker(url: str, prefix: str, mode: str, proc: int, threads: int, turns: int) -> None:
    store = await open_store(url, prefix=prefix)
    tries = [0]
    try:
        print("ready", flush=True)
        sys.stdin.readline()  # the parent releases every worker at once
        t0 = time.perf_counter()
        if mode == "hot":
            for t in range(turns):
                await _turn(store, "thread:hot", proc, t, tries)
        else:
            # 16 tasks share the threads; every process walks them in the same order,
            # so the processes keep colliding on the same thread heads.
            queue = [(th, t) for t in range(turns) for th in range(threads)]
            it = iter(queue)

            async def run() -> None:
                for th, t in it:
                    await _turn(store, f"thread:{th}", proc, t, tries)

            await asyncio.gather(*(run() for _ in range(16)))
        commits = turns if mode == "hot" else threads * turns
        print(
            json.dumps(
                {"commits": commits, "retries": tries[0] - commits, "s": time.perf_counter() - t0}
            ),
            flush=True,
        )
    finally:
        await store.close()


def _race(url: str, prefix: str, mode: str, procs: int, threads: int, turns: int) -> list[Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    ps = [
        subprocess.Popen(
            [sys.executable, __file__, url, prefix, mode, str(p), str(threads), str(turns)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for p in range(procs)
    ]
    try:
        for p in ps:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in ps:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        out = []
        for p in ps:
            stdout, _ = p.communicate(timeout=60)
            assert p.returncode == 0, stdout
            out.append(json.loads(stdout.strip().splitlines()[-1]))
        return out
    finally:
        for p in ps:
            if p.poll() is None:
                p.kill()
                p.wait()


async def _check_thread(store: Store, scope: str, expected: set[tuple[int, int]]) -> None:
    """Each (process, turn) exactly once; goal then its answer; one linear chain."""
    nodes = await store.nodes(NS, scope, limit=100_000)
    assert [n.sequence for n in nodes] == list(range(1, len(nodes) + 1))
    goals = [n for n in nodes if n.kind == "goal"]
    assert sorted((n.payload["p"], n.payload["t"]) for n in goals) == sorted(expected)
    assert len(nodes) == 2 * len(expected)
    for goal, answer in zip(nodes[::2], nodes[1::2], strict=True):
        assert goal.kind == "goal" and answer.kind == "answer"
        assert answer.payload == goal.payload and answer.parents == (goal.id,)
    for prev, nxt in itertools.pairwise(nodes):
        assert nxt.parents == (prev.id,)
    head = await store.head(NS, scope)
    assert head.sequence == len(nodes) and head.frontier == (nodes[-1].id,)
    stats = await store.stats(NS, scope)
    assert stats.nodes == len(nodes) and stats.kinds == {"goal": len(goals), "answer": len(goals)}


async def _with_store(redis_url: str, prefix: str) -> RedisStore:
    s = await open_store(redis_url, prefix=prefix)
    assert isinstance(s, RedisStore)
    return s


async def test_two_processes_write_200_threads_x_20_turns(redis_url: str) -> None:
    prefix = f"tt-race-{uuid.uuid4().hex[:10]}:"
    threads, turns = 200, 20
    try:
        results = await asyncio.to_thread(_race, redis_url, prefix, "threads", 2, threads, turns)
        assert [r["commits"] for r in results] == [threads * turns] * 2
        store = await _with_store(redis_url, prefix)
        try:
            expected = {(p, t) for p in range(2) for t in range(turns)}
            for th in range(threads):
                await _check_thread(store, f"thread:{th}", expected)
            scopes = await store.list_scopes(NS, limit=1000)
            assert len(scopes) == threads and all(s.sequence == 4 * turns for s in scopes)
        finally:
            await store.close()
    finally:
        s = await _with_store(redis_url, prefix)
        await s.drop_prefix()
        await s.close()


async def test_several_processes_append_to_one_thread(redis_url: str) -> None:
    prefix = f"tt-race-{uuid.uuid4().hex[:10]}:"
    procs, turns = 4, 40
    try:
        results = await asyncio.to_thread(_race, redis_url, prefix, "hot", procs, 1, turns)
        # The processes really raced: some commits were computed against a moved head.
        assert sum(r["retries"] for r in results) > 0
        store = await _with_store(redis_url, prefix)
        try:
            expected = {(p, t) for p in range(procs) for t in range(turns)}
            await _check_thread(store, "thread:hot", expected)
        finally:
            await store.close()
    finally:
        s = await _with_store(redis_url, prefix)
        await s.drop_prefix()
        await s.close()


if __name__ == "__main__":
    url, prefix, mode, proc, threads, turns = sys.argv[1:7]
    asyncio.run(_worker(url, prefix, mode, int(proc), int(threads), int(turns)))
