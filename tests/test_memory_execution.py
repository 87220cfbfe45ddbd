"""Execution views (seed 000): executor trees and run statuses derived from the graph."""

from __future__ import annotations

from typing import Any

import pytest

from memory_helpers import Thread
from tether import NotFound
from tether.projections import execution_view, list_runs
from tether.store.in_memory import MemoryStore


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


async def test_completed_run_with_tool_calls(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.tool_turn(
        "run_1", "q", [("a", "search", {"q": 1}), ("b", "fetch", {})], ["A", "B"], "done"
    )
    view = await execution_view(store, ns, "t1", "run_1")
    assert view.status == "completed" and view.kind == "run"
    assert view.node_actor_id == "llm:agent"
    assert [c.status for c in view.children] == ["completed", "completed"]
    assert set(view.child_executor_ids) == {c.execution_id for c in view.children}
    tool = view.children[0].actor
    assert tool is not None and tool.node_type == "ToolNode"
    assert tool.node_state == {"call_id": "a", "input": {"q": 1}, "output": "A", "is_error": False}
    assert view.actor is not None and [m["role"] for m in view.actor.node_state["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert view.to_dict()["children"][0]["actor"]["node_type"] == "ToolNode"


async def test_statuses_follow_the_graph(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    # running: a tool call without a result
    await t.goal("run_1", "q")
    await t.inference("run_1", None, [("a", "slow", {})])
    v = await execution_view(store, ns, "t1", "run_1")
    assert (v.status, v.children[0].status) == ("running", "running")
    # completed after the result and the answer
    await t.result("run_1", "a", "ok", name="slow")
    await t.inference("run_1", "fine")
    await t.answer("run_1")
    assert (await execution_view(store, ns, "t1", "run_1")).status == "completed"

    # suspended: a call needing approval without a verification
    await t.goal("run_2", "pay")
    await t.inference("run_2", None, [("p", "pay", {"eur": 9})], needs_approval=True)
    v = await execution_view(store, ns, "t1", "run_2")
    assert (v.status, v.children[0].status) == ("suspended", "suspended")
    await t.verify("run_2", "p", "approved")
    v = await execution_view(store, ns, "t1", "run_2")
    assert (v.status, v.children[0].status) == ("running", "running")
    await t.result("run_2", "p", "paid", name="pay")
    v = await execution_view(store, ns, "t1", "run_2")
    assert v.children[0].status == "completed" and v.status == "running"

    # rejected approval, then the run fails
    await t.goal("run_3", "pay more")
    await t.inference("run_3", None, [("p", "pay", {"eur": 99})], needs_approval=True)
    await t.verify("run_3", "p", "rejected")
    v = await execution_view(store, ns, "t1", "run_3")
    assert v.children[0].status == "failed"
    await t.error("run_3", "rejected")
    v = await execution_view(store, ns, "t1", "run_3")
    assert v.status == "failed" and v.actor is not None and v.actor.has_error

    # a tool error result is a failed child
    await t.goal("run_4", "q")
    await t.inference("run_4", None, [("x", "f", {})])
    await t.result("run_4", "x", "boom", name="f", is_error=True)
    v = await execution_view(store, ns, "t1", "run_4")
    assert v.children[0].status == "failed" and v.children[0].actor.has_error  # type: ignore[union-attr]

    runs = await list_runs(store, ns, "t1")
    assert [(r.run, r.status) for r in runs] == [
        ("run_1", "completed"),
        ("run_2", "running"),
        ("run_3", "failed"),
        ("run_4", "running"),
    ]
    assert runs[2].error == {"code": "rejected", "message": "failed"}
    assert runs[0].ended_at is not None and runs[1].ended_at is None
    assert runs[0].to_dict()["goal_id"] == runs[0].goal_id


async def test_sub_node_calls_are_child_executors(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    await t.goal("run_1", "write", llm="planner")
    await t.inference("run_1", "plan", llm="planner")
    await t.inference("run_1", None, [("w", "search", {})], llm="writer", input="plan")
    await t.goal("run_2", "suspended elsewhere", llm="planner")  # another run: not in this tree
    v = await execution_view(store, ns, "t1", "run_1")
    assert v.node_actor_id == "llm:planner"
    (writer,) = v.children
    assert writer.kind == "llm" and writer.node_actor_id == "llm:writer"
    assert writer.status == "running" and writer.children[0].kind == "tool_call"
    assert writer.children[0].execution_id in writer.child_executor_ids
    assert [e.kind for e in v.walk()] == ["run", "llm", "tool_call"]
    assert (await list_runs(store, ns, "t1"))[1].status == "running"


async def test_unknown_run_is_not_found(store: MemoryStore, ns: str) -> None:
    t = Thread(store, ns, "t1")
    for i in range(100):
        await t.turn(f"run_{i}", "q", "a")
    with pytest.raises(NotFound):
        await execution_view(store, ns, "t1", "run_nope")
    assert (await execution_view(store, ns, "t1", "run_0")).status == "completed"
    assert len(await list_runs(store, ns, "t1")) == 100


async def test_tool_node_calls_and_step_records_are_children_of_the_run(
    store: MemoryStore, ns: str
) -> None:
    from tether import transact

    t = Thread(store, ns, "t1")
    await t.goal("run_1", "fetch then store", llm=None)
    scope = t.scope

    async def tool_node(txn: Any) -> None:
        call = await txn.append(
            scope,
            "tool_call",
            {
                "run": "run_1",
                "llm": None,
                "node": "fetcher",
                "call_id": "fetcher-0",
                "name": "http_get",
                "arguments": {"u": 1},
                "needs_approval": False,
            },
        )
        await txn.append(
            scope,
            "tool_result",
            {
                "run": "run_1",
                "llm": None,
                "node": "fetcher",
                "call_id": "fetcher-0",
                "name": "http_get",
                "content": {"ok": 1},
                "is_error": False,
            },
            parents=[call.id],
        )
        await txn.append(
            scope,
            "resource",
            {"run": "run_1", "node": "save", "output": 7},
            resource_key="run:run_1:node:save",
        )

    await transact(store, ns, tool_node)
    v = await execution_view(store, ns, "t1", "run_1")
    assert v.status == "running" and v.node_actor_id == "llm:start"
    assert [(c.kind, c.status, c.node_actor_id) for c in v.children] == [
        ("tool_call", "completed", "tool:http_get"),
        ("step", "completed", "node:save"),
    ]
    assert v.children[0].actor is not None and v.children[0].actor.node_id == "fetcher"
    assert v.children[1].actor is not None and v.children[1].actor.node_state == {"output": 7}
    await t.answer("run_1")
    assert (await execution_view(store, ns, "t1", "run_1")).status == "completed"
    # A tool node's call never becomes a message of any LLM node.
    from tether.projections import load_conversation

    assert await load_conversation(store, ns, "t1") == []
