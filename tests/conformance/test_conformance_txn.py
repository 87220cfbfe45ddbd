"""The transaction layer on every backend: idempotent appends, conflicts, retries."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from tether import Conflict, Transaction, transact
from tether.core.graph import CausalNode
from tether.store import DuplicateNodes, Store

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


# -- a commit that finds nodes already stored (a wrong ``absent`` hint) -------------
#
# ``Transaction.hint(absent=...)`` (or ``append(..., new=True)``) lets a caller skip the
# look-up of a node it believes new (the LangGraph saver does, for content it has not
# seen stored); when the belief is wrong the commit reports the stored nodes and the
# transaction applies its appends again, the stored ones found. That must never commit
# appends computed from one state onto another. Each test below runs with both ways
# of saying it.

ABSENT = pytest.mark.parametrize("how", ["hint", "new"])


async def _stored_tip(store: Store, ns: str) -> tuple[CausalNode, CausalNode]:
    """A thread whose node ``e`` (explicit parents) is stored but not on the frontier."""
    t = Transaction(store, ns)
    await t.append("thread:t", "goal", {"input": "hi"}, parents=[])
    e = await t.append("thread:t", "resource", {"e": 1}, parents=[])
    top = await t.append("thread:t", "inference", {"content": "top"})
    await t.commit()
    return e, top


async def _append_e(txn: Transaction, e: CausalNode, how: str) -> CausalNode:
    """Append ``e`` again, wrongly said to be absent (``how``: by hint or ``new=True``)."""
    if how == "hint":
        await txn.hint("thread:t", absent=[e.id])
    node = await txn.append("thread:t", "resource", {"e": 1}, parents=[], new=how == "new")
    assert node.id == e.id
    return node


async def _restate_e(txn: Transaction, e: CausalNode, how: str) -> CausalNode:
    """Append ``e`` again, wrongly said to be absent, then a node on the frontier (which
    the pending ``e`` joins), then one naming that node in its parents and its payload."""
    await _append_e(txn, e, how)
    step = await txn.append("thread:t", "inference", {"content": "step"})
    return await txn.append(
        "thread:t", "resource", {"of": step.id}, parents=[step.id], resource_key="var:of"
    )


@ABSENT
async def test_a_stored_node_found_at_commit_recomputes_what_followed_it(
    store: Store, ns: str, how: str
) -> None:
    e, top = await _stored_tip(store, ns)
    head = await store.head(ns, "thread:t")
    runs = 0

    async def fn(txn: Transaction) -> CausalNode:
        nonlocal runs
        runs += 1
        return await _restate_e(txn, e, how)

    last = await transact(store, ns, fn)
    assert runs == 2  # the first computation had ``e`` pending: computed again, not patched
    new = await store.nodes(ns, "thread:t", after=head.sequence)
    assert [n.kind for n in new] == ["inference", "resource"]  # ``e`` is not written twice
    step, named = new
    assert step.parents == (top.id,)  # the stored ``e`` is no longer a frontier node
    assert named.parents == (step.id,) and named.payload == {"of": step.id}
    assert last.id == named.id
    assert (await store.head(ns, "thread:t")).frontier == (named.id,)


@ABSENT
async def test_a_transaction_that_cannot_replay_conflicts_and_writes_nothing(
    store: Store, ns: str, how: str
) -> None:
    e, _ = await _stored_tip(store, ns)
    head = await store.head(ns, "thread:t")
    txn = Transaction(store, ns)
    await _restate_e(txn, e, how)
    with pytest.raises(Conflict) as err:
        await txn.commit()
    assert err.value.code == "conflict"
    assert await store.head(ns, "thread:t") == head


@ABSENT
async def test_a_replay_is_computed_against_the_heads_first_read(
    store: Store, ns: str, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A writer that lands between the commit that found a stored node and its replay
    makes the replay conflict: ``fn`` decided from what it read, so it runs again."""
    e, _ = await _stored_tip(store, ns)
    real = store.commit
    landed: list[CausalNode] = []

    async def commit(namespace: str, writes: Any) -> None:
        try:
            await real(namespace, writes)
        except DuplicateNodes:
            if not landed:  # another process sets var:x right after this commit failed
                other = Transaction(store, ns)
                landed.append(
                    await other.append(
                        "thread:t", "resource", {"v": "theirs"}, resource_key="var:x"
                    )
                )
                await other.commit()
            raise

    monkeypatch.setattr(store, "commit", commit)
    seen: list[Any] = []

    async def create_if_absent(txn: Transaction) -> str:
        current = await txn.resource_head("thread:t", "var:x")
        seen.append(None if current is None else current.payload)
        if current is not None:
            return "kept"
        await _append_e(txn, e, how)  # wrongly said absent: makes the commit replay
        await txn.append("thread:t", "resource", {"v": "mine"}, resource_key="var:x")
        return "created"

    assert await transact(store, ns, create_if_absent) == "kept"
    assert seen == [None, {"v": "theirs"}]
    head = await store.resource_head(ns, "thread:t", "var:x")
    assert head is not None and head.id == landed[0].id
