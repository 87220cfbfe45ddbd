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


async def test_prune_keep_latest_removes_old_checkpoints_for_real(store: Store, ns: str) -> None:
    saver = TetherSaver(store, namespace=ns)
    graph = _graph(saver)
    await _turns(graph, "t", 6)
    config = {"configurable": {"thread_id": "t"}}
    before = await graph.aget_state(config)
    assert len([c async for c in saver.alist(config)]) > 2
    used = await store.stats(ns, "thread:t")

    await saver.aprune(["t"], strategy="keep_latest")

    after = await store.stats(ns, "thread:t")
    assert after.nodes < used.nodes and after.payload_bytes < used.payload_bytes
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

    await saver.adelete_for_runs(first)

    # Thread a was all the first run: nothing of it is left.
    assert await saver.aget_tuple({"configurable": {"thread_id": "a"}}) is None
    assert used_a.nodes > 0 and (await store.stats(ns, "thread:a")).nodes == 0
    # Thread b keeps the second run's checkpoints and what they reference.
    assert (await store.stats(ns, "thread:b")).nodes < used_b.nodes
    state = await graph.aget_state(config_b)
    assert state.values == latest_b.values
    runs = {c.metadata.get("run_id") async for c in saver.alist(config_b)}
    assert runs == set(second)
    for thread in ("a", "b"):
        assert (await control.verify_scope(store, ns, f"thread:{thread}")).ok
    await _turns(graph, "b", 1)
    assert len((await graph.aget_state(config_b)).values["messages"]) == 10
