"""The transaction layer on every backend: idempotent appends, conflicts, retries."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import pytest

from tether import Conflict, Transaction, transact
from tether.store import Store

from .backends import Backend

Opener = Callable[..., AbstractAsyncContextManager[Store]]


async def test_transaction_commits_several_scopes_atomically(store: Store, ns: str) -> None:
    txn = Transaction(store, ns)
    goal = await txn.append("thread:t", "goal", {"input": "hi"})
    pref = await txn.semantic("user:u", "preference", "units", "celsius")
    var = await txn.append("thread:t", "resource", {"v": 1}, resource_key="var:v")
    assert var.parents == (goal.id,)
    written = await txn.commit()
    assert [n.id for n in written["thread:t"]] == [goal.id, var.id]
    assert (await store.resource_head(ns, "user:u", "semantic:preference:units")).id == pref.id  # type: ignore[union-attr]
    assert (await store.head(ns, "thread:t")).frontier == (var.id,)


async def test_reappending_stored_content_is_idempotent_across_commits(
    store: Store, ns: str
) -> None:
    t1 = Transaction(store, ns)
    first = await t1.append("thread:t", "goal", {"input": "hi"}, parents=[])
    inference = await t1.append("thread:t", "inference", {"content": "hello"})
    await t1.commit()
    head = await store.head(ns, "thread:t")

    t2 = Transaction(store, ns)
    again = await t2.append("thread:t", "goal", {"input": "hi"}, parents=[])
    await t2.append("thread:t", "answer", {"output": "bye"})
    await t2.commit()
    stored = await store.nodes(ns, "thread:t")
    assert [n.kind for n in stored] == ["goal", "inference", "answer"]
    assert stored[2].payload == {"output": "bye"}
    assert stored[2].parents == (inference.id,)  # recomputed once the goal proved stored
    # The re-appended goal was not written twice: the stored one stands.
    assert [n.id for n in stored].count(first.id) == 1
    assert (await store.head(ns, "thread:t")).sequence == head.sequence + 1
    assert again.id == first.id


async def test_a_stale_transaction_conflicts_and_writes_nothing(store: Store, ns: str) -> None:
    t1 = Transaction(store, ns)
    await t1.append("thread:t", "goal", {"who": 1})
    t2 = Transaction(store, ns)
    await t2.append("thread:t", "goal", {"who": 2})
    await t2.append("user:u", "resource", {"x": 1}, resource_key="var:x")
    await t1.commit()
    with pytest.raises(Conflict):
        await t2.commit()
    assert [n.payload for n in await store.nodes(ns, "thread:t")] == [{"who": 1}]
    assert await store.nodes(ns, "user:u") == []


async def test_transact_retries_until_every_writer_lands_once(store: Store, ns: str) -> None:
    async def turn(i: int) -> None:
        async def fn(txn: Transaction) -> None:
            await txn.head("thread:t")
            await asyncio.sleep(0)  # let the others read the same head
            await txn.append("thread:t", "goal", {"writer": i})

        await transact(store, ns, fn, attempts=50)

    await asyncio.gather(*(turn(i) for i in range(12)))
    stored = await store.nodes(ns, "thread:t")
    assert sorted(n.payload["writer"] for n in stored) == list(range(12))
    assert [n.sequence for n in stored] == list(range(1, 13))
    # Every node's parents are the node before it: each retry recomputed the frontier.
    for prev, cur in itertools.pairwise(stored):
        assert cur.parents == (prev.id,)


async def test_transact_across_two_stores_on_one_target(
    backend: Backend, open_backend: Opener, ns: str
) -> None:
    if not backend.shared:
        pytest.skip(f"{backend.name}: each store holds its own data")
    async with open_backend() as s1, open_backend() as s2:

        async def writer(store: Store, tag: str) -> None:
            for i in range(15):

                async def fn(txn: Transaction, i: int = i) -> None:
                    await txn.head("thread:t")
                    await asyncio.sleep(0)
                    await txn.append("thread:t", "goal", {"w": tag, "i": i})

                await transact(store, ns, fn, attempts=100)

        await asyncio.gather(writer(s1, "a"), writer(s2, "b"))
        stored = await s1.nodes(ns, "thread:t")
        assert sorted((n.payload["w"], n.payload["i"]) for n in stored) == sorted(
            (w, i) for w in "ab" for i in range(15)
        )
        assert [n.sequence for n in stored] == list(range(1, 31))


async def test_reappend_then_explicit_child(store: Store, ns: str) -> None:
    t1 = Transaction(store, ns)
    goal = await t1.append("thread:t", "goal", {"input": "hi"}, parents=[])
    await t1.append("thread:t", "inference", {"c": 1})
    await t1.commit()

    t2 = Transaction(store, ns)
    again = await t2.append("thread:t", "goal", {"input": "hi"}, parents=[])
    child = await t2.append("thread:t", "inference", {"c": 2})
    await t2.append("thread:t", "tool_call", {"c": 3}, parents=[child.id])
    await t2.commit()
    assert again.sequence == goal.sequence  # AgentState returns the existing node
    stored = await store.nodes(ns, "thread:t")
    assert child.id in {n.id for n in stored}
