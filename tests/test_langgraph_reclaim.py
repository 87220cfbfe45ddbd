"""The LangGraph saver's prune and delete_for_runs free space for real (issue 43): a
graph run through LangGraph's own API, then ``prune(keep_latest)`` and
``delete_for_runs``; the nodes are gone from every backend, what LangGraph reads is
unchanged, the thread still runs, and ``verify`` proves what remains."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from tether import control
from tether.adapters.langgraph import TetherSaver
from tether.store.base import Store


def _graph(saver: TetherSaver) -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1].content
        return {"messages": [AIMessage(f"echo {last} " + "x" * 200)]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


async def _turns(graph: Any, thread: str, n: int) -> list[str]:
    """``n`` turns on ``thread``, each its own run; their run ids."""
    runs = []
    for i in range(n):
        runs.append(str(uuid.uuid4()))  # LangGraph copies it into the checkpoints' metadata
        config = {"configurable": {"thread_id": thread, "run_id": runs[-1]}}
        await graph.ainvoke({"messages": [HumanMessage(f"m{i} " + "y" * 200)]}, config)
    return runs


async def _checkpoint_nodes(store: Store, ns: str, scope: str) -> int:
    """The checkpoint nodes a thread holds (hidden ones included, until removed)."""
    nodes = await store.nodes(ns, scope, limit=10_000)
    return sum(1 for n in nodes if isinstance(n.payload, dict) and n.payload.get("lg") == "cp")


async def test_prune_keep_latest_removes_old_checkpoints_for_real(store: Store, ns: str) -> None:
    saver = TetherSaver(store, namespace=ns)
    graph = _graph(saver)
    await _turns(graph, "t", 6)
    config = {"configurable": {"thread_id": "t"}}
    before = await graph.aget_state(config)
    assert len([c async for c in saver.alist(config)]) > 2
    used = await store.stats(ns, "thread:t")
    assert await _checkpoint_nodes(store, ns, "thread:t") > 2

    await saver.aprune(["t"], strategy="keep_latest")

    # Every hidden checkpoint's node is gone (each leaves its id a small tombstone),
    # and what only they referenced.
    after = await store.stats(ns, "thread:t")
    assert await _checkpoint_nodes(store, ns, "thread:t") == 1
    assert after.payload_bytes < used.payload_bytes
    assert [c async for c in saver.alist(config)] != []
    assert len([c async for c in saver.alist(config)]) == 1
    state = await graph.aget_state(config)
    assert state.values == before.values and state.config == before.config
    assert (await control.verify_scope(store, ns, "thread:t")).ok
    # The thread goes on from its latest checkpoint, with the whole conversation.
    await _turns(graph, "t", 1)
    now = (await graph.aget_state(config)).values["messages"]
    assert [m.content for m in now[: len(before.values["messages"])]] == [
        m.content for m in before.values["messages"]
    ]
    assert len(now) == len(before.values["messages"]) + 2
    # A second prune right away has only the new turn's checkpoints to take.
    await saver.aprune(["t"], strategy="keep_latest")
    assert (await graph.aget_state(config)).values == (await graph.aget_state(config)).values
    assert (await control.verify_scope(store, ns, "thread:t")).ok


async def test_delete_for_runs_removes_a_runs_checkpoints_for_real(store: Store, ns: str) -> None:
    saver = TetherSaver(store, namespace=ns)
    graph = _graph(saver)
    first = await _turns(graph, "a", 3)
    first += await _turns(graph, "b", 2)
    second = await _turns(graph, "b", 2)
    config_b = {"configurable": {"thread_id": "b"}}
    latest_b = await graph.aget_state(config_b)
    used_a = await store.stats(ns, "thread:a")
    used_b = await store.stats(ns, "thread:b")
    cps_b = await _checkpoint_nodes(store, ns, "thread:b")

    await saver.adelete_for_runs(first)

    # Thread a was all the first run: nothing of it is left.
    assert await saver.aget_tuple({"configurable": {"thread_id": "a"}}) is None
    assert used_a.nodes > 0 and (await store.stats(ns, "thread:a")).nodes == 0
    # Thread b keeps the second run's checkpoints and what they reference.
    assert (await store.stats(ns, "thread:b")).payload_bytes < used_b.payload_bytes
    assert 0 < await _checkpoint_nodes(store, ns, "thread:b") < cps_b
    state = await graph.aget_state(config_b)
    assert state.values == latest_b.values
    runs = {c.metadata.get("run_id") async for c in saver.alist(config_b)}
    assert runs == set(second)
    for thread in ("a", "b"):
        assert (await control.verify_scope(store, ns, f"thread:{thread}")).ok
    await _turns(graph, "b", 1)
    assert len((await graph.aget_state(config_b)).values["messages"]) == 10


async def test_the_store_sweep_frees_what_its_ttl_and_deletes_left(store: Store, ns: str) -> None:
    """LangGraph's Store API: a TTL refreshed by reads writes a version per read, a
    delete a tombstone; a sweep removes the versions no read can return (the current
    version of each item stays, items without a TTL keep their history)."""
    import asyncio

    from tether.adapters.langgraph_store import _PREFIX, TetherStore, item_key

    lg = TetherStore(store, namespace=ns, ttl={"refresh_on_read": True})
    where = ("users", "ada")

    async def versions(key: str) -> list[Any]:
        rk = _PREFIX + item_key(where, key)
        return [n.payload["content"] for n in await store.versions(ns, "app", rk)]

    await lg.aput(where, "short", {"v": "s"}, ttl=0.01)  # 0.6 s
    await lg.aput(where, "plain", {"v": 1})
    await lg.aput(where, "plain", {"v": 2})
    await lg.aput(where, "gone", {"v": "g"})
    await lg.adelete(where, "gone")
    for _ in range(3):
        item = await lg.aget(where, "short")  # each read moves its expiry: a version
        assert item is not None and item.value == {"v": "s"}
    assert (len(await versions("short")), len(await versions("gone"))) == (4, 2)
    used = await store.stats(ns, "app")

    assert await lg.asweep_ttl() == 0  # nothing expired: the refreshed versions go
    assert len(await versions("short")) == 1 and (await versions("gone")) == [None]
    assert [c["value"] for c in await versions("plain")] == [{"v": 1}, {"v": 2}]
    assert (await store.stats(ns, "app")).nodes < used.nodes
    assert {i.key: i.value for i in await lg.asearch(where)} == {
        "short": {"v": "s"},
        "plain": {"v": 2},
    }
    await asyncio.sleep(0.7)
    assert await lg.asweep_ttl() == 1
    assert await versions("short") == [None]  # only its tombstone is left
    assert {i.key for i in await lg.asearch(where)} == {"plain"}
    assert (await control.verify_scope(store, ns, "app")).ok
    # A second Store on the same scope reads the same items.
    other = TetherStore(store, namespace=ns)
    assert (await other.aget(where, "plain")).value == {"v": 2}  # type: ignore[union-attr]
    assert await other.aget(where, "short") is None
