"""Tool state (seed 002's tools module): a tool's own durable key-value state in the graph."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tether
from test_runtime_recovery import Died, DyingStore
from tether import ToolState, control
from tether.models import Rule, ScriptedModel, call
from tether.runtime import Agent, SyncToolState, ToolDefinitionError, tool
from tether.runtime.tool_state import state_key
from tether.store.in_memory import MemoryStore

NS = "default"


@tool
async def counter(name: str, state: ToolState) -> int:
    """Count how often a name was seen."""
    n = int(await state.get(name, 0)) + 1
    await state.set(name, n)
    return n


@tool(state_scope="user")
def visits(page: str, state: SyncToolState) -> int:
    """A sync tool: per-user page visits."""
    n = int(state.get(page, 0)) + 1
    state.set(page, n)
    return n


@tool(state_scope="app")
async def registry(op: str, key: str, state: ToolState) -> Any:
    """Set, delete or list app-wide keys."""
    if op == "set":
        await state.set(key, {"by": key})
        return await state.list()
    if op == "del":
        return await state.delete(key)
    return await state.items()


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(match=r"count (\w+)", tools=[call("counter", name="{1}")], then="n={result}"),
            Rule(
                match=r"twice (\w+)",
                tools=[call("counter", name="{1}"), call("counter", name="{1}")],
                then="{results[0]} {results[1]}",
            ),
            Rule(match=r"visit (\w+)", tools=[call("visits", page="{1}")], then="v={result}"),
            Rule(
                match=r"reg (\w+) (\w+)",
                tools=[call("registry", op="{1}", key="{2}")],
                then="{result}",
            ),
        ]
    )


def agent(store: tether.Store) -> Agent:
    return Agent(None, model(), store=store, tools=[counter, visits, registry])


def test_state_is_injected_and_kept_out_of_the_schema() -> None:
    assert "state" in counter.injects and counter.stateful
    assert "state" not in counter.parameters["properties"]
    assert visits.state_scope == "user" and registry.state_scope == "app"

    # A plain argument that happens to be called state stays an argument.
    @tool
    def address(city: str, state: str) -> str:
        return f"{city}, {state}"

    assert not address.stateful and "state" in address.parameters["properties"]
    with pytest.raises(ToolDefinitionError, match="state_scope"):
        tool(state_scope="user")(lambda x: x)
    with pytest.raises(ToolDefinitionError, match="state_scope is thread, user or app"):

        @tool(state_scope="galaxy")
        def bad(state: ToolState) -> None: ...


async def test_thread_state_survives_turns_and_is_per_thread() -> None:
    store = MemoryStore()
    a = agent(store)
    assert [(await a.step("count apples", thread="t1")).answer for _ in range(3)] == [
        "n=1",
        "n=2",
        "n=3",
    ]
    assert (await a.step("count apples", thread="t2")).answer == "n=1"
    handle = await a.tool_state("counter", thread="t1")
    assert await handle.items() == {"apples": 3}
    assert await handle.list() == ["apples"]
    # Stored as semantic nodes of the reserved type, versioned like everything else.
    versions = await store.versions(NS, "thread:t1", state_key("counter", "apples"))
    assert [v.payload for v in versions] == [
        {"type": "tool_state", "key": "counter/apples", "content": n} for n in (1, 2, 3)
    ]
    # ...and left out of the model's semantic memory.
    assert all("tool_state" not in str(r.memory) for r in a.model.requests)  # type: ignore[attr-defined]


async def test_user_state_from_a_sync_tool_crosses_threads_and_needs_a_user() -> None:
    a = agent(MemoryStore())
    assert (await a.step("visit home", thread="t1", user="u")).answer == "v=1"
    assert (await a.step("visit home", thread="t2", user="u")).answer == "v=2"
    assert (await a.step("visit home", thread="t3", user="w")).answer == "v=1"
    no_user = await a.step("visit home", thread="t4")
    assert no_user.status == "completed" and "per user" in str(no_user.answer)
    assert await (await a.tool_state("visits", user="u")).items() == {"home": 2}


async def test_app_state_set_list_delete() -> None:
    a = agent(MemoryStore())
    # (The scripted model renders the tool's JSON result with str().)
    assert (await a.step("reg set alpha", thread="t1")).answer == "['alpha']"
    assert (await a.step("reg set beta", thread="t2")).answer == "['alpha', 'beta']"
    assert (await a.step("reg del alpha", thread="t1")).answer == "True"
    assert (await a.step("reg del alpha", thread="t1")).answer == "False"
    assert (await a.step("reg get x", thread="t1")).answer == "{'beta': {'by': 'beta'}}"


async def test_parallel_calls_of_one_tool_never_lose_an_update() -> None:
    a = agent(MemoryStore())
    r = await a.step("twice pears", thread="t")
    assert sorted(str(r.answer).split()) == ["1", "2"]
    assert await (await a.tool_state("counter", thread="t")).get("pears") == 2


async def test_a_failing_tool_leaves_its_state_unchanged() -> None:
    @tool
    async def flaky(state: ToolState) -> str:
        await state.set("touched", True)
        raise RuntimeError("boom")

    store = MemoryStore()
    m = ScriptedModel([Rule(match="go", tools=[call("flaky")], then="{result}")])
    r = await Agent(None, m, store=store, tools=[flaky]).step("go", thread="t")
    assert "boom" in str(r.answer)
    assert await store.resource_heads(NS, "thread:t", "semantic:tool_state:") == {}


@pytest.mark.parametrize("after", [False, True], ids=["before-write", "after-write"])
async def test_state_commits_with_the_result_or_not_at_all(after: bool) -> None:
    """A crash before the result commit leaves no state; the re-issued call sees the
    state as it was before the first attempt, so the count is exactly one."""
    seen: list[Any] = []

    @tool
    async def bump(idempotency_key: str, state: ToolState) -> int:
        before = await state.get("n", 0)
        seen.append((idempotency_key, before))
        await state.set("n", before + 1)
        return int(before) + 1

    m = ScriptedModel([Rule(match="bump", tools=[call("bump")], then="n={result}")])
    inner = MemoryStore()
    # Commits: goal, inference + call, result (+ state).
    with pytest.raises(Died):
        await Agent(None, m, store=DyingStore(inner, at=3, after=after), tools=[bump]).step(
            "bump", thread="t"
        )
    heads = await inner.resource_heads(NS, "thread:t", "semantic:tool_state:")
    if after:
        assert heads[state_key("bump", "n")].payload["content"] == 1
    else:
        assert heads == {}
    r = await Agent(None, m, store=inner, tools=[bump]).resume("t")
    assert r.answer == "n=1"
    if not after:
        # Re-issued with the same key, from the pre-call state.
        assert [b for _, b in seen] == [0, 0] and seen[0][0] == seen[1][0]
    else:
        assert [b for _, b in seen] == [0]
    assert (await inner.resource_head(NS, "thread:t", state_key("bump", "n"))).payload[  # type: ignore[union-attr]
        "content"
    ] == 1


async def test_describe_and_reset_the_tools_store_on_its_own(tmp_path: Path) -> None:
    store = await tether.open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        a = agent(store)
        await a.step("count apples", thread="t")
        await a.step("count kiwis", thread="t")
        await tether.projections.remember(store, NS, "thread:t", "memory", "k", "kept")
        d = await control.describe(store, namespace=NS, thread="t", include_data=True)
        tools = next(r for r in d.stores if r.name == "tools")
        assert tools.data == {"counter": {"apples": 1, "kiwis": 1}}
        assert tools.item_count == 2 and tools.metadata == {"tools": {"counter": 2}}
        mem = next(r for r in d.stores if r.name == "memory")
        assert mem.data == {"memory:k": "kept"}  # tool state is not "memory"

        res = await control.reset(store, namespace=NS, thread="t", stores=["tools"])
        assert res.cleared == ("thread:t/tools",)
        after = await control.describe(store, namespace=NS, thread="t", include_data=True)
        assert next(r for r in after.stores if r.name == "tools").exists is False
        assert next(r for r in after.stores if r.name == "memory").data == {"memory:k": "kept"}
        conv = next(r for r in after.stores if r.name == "conversation")
        assert conv.message_count == 8  # the conversation is untouched
        # The tool starts again from nothing.
        assert (await a.step("count apples", thread="t")).answer == "n=1"
        # Memory reset leaves tool state alone.
        await control.reset(store, namespace=NS, thread="t", stores=["memory"])
        assert await (await a.tool_state("counter", thread="t")).items() == {"apples": 1}
    finally:
        await store.close()


async def test_a_handle_outside_the_runtime_commits_explicitly() -> None:
    store = MemoryStore()
    h = ToolState(store, NS, scope="app", tool="cfg")
    await h.set("mode", "fast")
    assert await h.get("mode") == "fast"
    assert await store.resource_heads(NS, "app") == {}  # staged only
    assert await h.commit() == 1
    again = ToolState(store, NS, scope="app", tool="cfg")
    assert await again.items() == {"mode": "fast"}
    await again.set("mode", "fast")
    assert await again.commit() == 0  # the same value writes nothing
    with pytest.raises(tether.InvalidRequest, match="delete"):
        await again.set("mode", None)
    with pytest.raises(tether.InvalidRequest, match="key"):
        await again.get("")
    with pytest.raises(tether.InvalidRequest, match="event loop"):
        again.sync(asyncio.get_running_loop()).get("mode")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["set", "delete"]),
            st.sampled_from(["a", "b", "a/b", "ab"]),
            st.integers(-3, 3),
            st.booleans(),
        ),
        max_size=12,
    ),
    st.sampled_from(["", "a", "b"]),
)
def test_handle_matches_a_dict_model(ops: list[tuple[str, str, int, bool]], prefix: str) -> None:
    """Staged writes and committed ones, in any order, read like one dict."""

    async def go() -> None:
        store = MemoryStore()
        model: dict[str, int] = {}
        h = ToolState(store, NS, scope="thread:t", tool="p")
        for op, key, value, commit in ops:
            if op == "set":
                await h.set(key, value)
                model[key] = value
            else:
                assert await h.delete(key) == (key in model)
                model.pop(key, None)
            assert await h.get(key) == model.get(key)
            if commit:
                await h.commit()
                h = ToolState(store, NS, scope="thread:t", tool="p")
        expected = dict(sorted((k, v) for k, v in model.items() if k.startswith(prefix)))
        assert await h.items(prefix) == expected
        await h.commit()
        fresh = ToolState(store, NS, scope="thread:t", tool="p")
        assert await fresh.items(prefix) == expected

    asyncio.run(go())
