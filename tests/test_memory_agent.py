"""Agent memory (tools, initial state, versions, undo) and semantic memory with vocabularies."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from tether import InvalidNode, InvalidRequest, NodeType, Transaction, Vocabulary
from tether.core import scopes
from tether.core.messages import ToolSpec
from tether.projections import (
    AgentMemory,
    InvalidArguments,
    MemoryEdit,
    NothingToUndo,
    UnknownVariable,
    UnstorableValue,
    forget,
    remember,
    semantic_memory,
)
from tether.store.in_memory import MemoryStore


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


async def test_store_recall_delete_clear(store: MemoryStore, ns: str) -> None:
    mem = AgentMemory(store, ns, scope=scopes.thread("t1"))
    await mem.store("name", "Alice")
    await mem.store("likes", ["tea", "chess"])
    assert await mem.recall("name") == "Alice"
    assert await mem.items() == {"name": "Alice", "likes": ["tea", "chess"]}
    assert (await mem.delete("name")).changed
    assert not (await mem.delete("name")).changed  # a no-op writes nothing
    assert await mem.recall("name") is None
    e = await mem.clear()
    assert e.keys == ("likes",)
    assert await mem.items() == {}
    # Stored as semantic nodes of type agent_memory, key <memory>/<key>.
    heads = await store.resource_heads(ns, "thread:t1", "semantic:agent_memory:memory/")
    assert {n.payload["key"]: n.payload["content"] for n in heads.values()} == {
        "memory/name": None,
        "memory/likes": None,
    }


async def test_initial_state_is_read_until_the_first_edit_then_written(
    store: MemoryStore, ns: str
) -> None:
    mem = AgentMemory(store, ns, scope="thread:t1", initial={"tone": "brief", "lang": "en"})
    assert await mem.items() == {"tone": "brief", "lang": "en"}
    assert (await store.head(ns, "thread:t1")).sequence == 0  # reading writes nothing
    await mem.store("lang", "fr")
    assert await mem.items() == {"tone": "brief", "lang": "fr"}
    log = await mem.history()
    assert [e.op for e in log] == ["init", "store"]  # type: ignore[union-attr]
    # A configuration change later does not rewrite what the scope already holds.
    later = AgentMemory(store, ns, scope="thread:t1", initial={"tone": "chatty"})
    assert await later.items() == {"tone": "brief", "lang": "fr"}
    # Undo never reverts the initial state.
    await mem.undo()
    assert await mem.items() == {"tone": "brief", "lang": "en"}
    with pytest.raises(NothingToUndo):
        await mem.undo()


async def test_every_edit_is_a_version_and_undo_walks_back(store: MemoryStore, ns: str) -> None:
    mem = AgentMemory(store, ns, scope="user:u1", name="notes")
    await mem.store("a", 1)
    await mem.store("a", 2)
    await mem.store("b", "x")
    await mem.clear()
    versions = await mem.history("a")
    assert [v.content for v in versions] == [1, 2, None]  # type: ignore[union-attr]
    states = []
    for _ in range(4):
        u = await mem.undo()
        assert u.op == "undo" and u.undoes is not None
        states.append(await mem.items())
    assert states == [{"a": 2, "b": "x"}, {"a": 2}, {"a": 1}, {}]
    with pytest.raises(NothingToUndo) as e:
        await mem.undo()
    assert e.value.code == "nothing_to_undo"
    # An edit after undos starts from the current state.
    await mem.store("c", True)
    await mem.undo()
    assert await mem.items() == {}
    ops = [e.op for e in await mem.history()]  # type: ignore[union-attr]
    assert ops == [
        "store",
        "store",
        "store",
        "clear",
        "undo",
        "undo",
        "undo",
        "undo",
        "store",
        "undo",
    ]


async def test_tools_and_dispatch(store: MemoryStore, ns: str) -> None:
    mem = AgentMemory(store, ns, scope="thread:t1")
    specs = mem.tools()
    assert [s.name for s in specs] == [
        "memory_store",
        "memory_delete",
        "memory_clear",
        "memory_recall",
    ]
    assert all(isinstance(s, ToolSpec) for s in specs)
    assert specs[0].parameters["required"] == ["key", "value"]
    assert [s.name for s in mem.tools(("store", "recall"))] == ["memory_store", "memory_recall"]
    assert await mem.call("memory_store", {"key": "city", "value": "Oslo"}) == {
        "ok": True,
        "stored": "city",
    }
    assert await mem.call("memory_recall", {"key": "city"}) == {
        "key": "city",
        "found": True,
        "value": "Oslo",
    }
    assert await mem.call("memory_recall", {}) == {"items": {"city": "Oslo"}}
    assert await mem.call("memory_delete", {"key": "city"}) == {
        "ok": True,
        "deleted": "city",
        "existed": True,
    }
    assert await mem.call("memory_clear", None) == {"ok": True, "cleared": 0}
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("memory_fly", {}, "tool"),
        ("memory_store", {"key": "k"}, "value"),
        ("memory_store", {"value": 1}, "key"),
        ("memory_delete", {"key": "k", "extra": 1}, "extra"),
        ("memory_store", {"key": "", "value": 1}, "key"),
        ("memory_store", {"key": "k", "value": None}, "value"),
    ]
    for name, args, field in bad:
        with pytest.raises(InvalidArguments) as e:
            await mem.call(name, args)
        assert e.value.details["field"] == field
    with pytest.raises(UnstorableValue):
        await mem.call("memory_store", {"key": "k", "value": float("inf")})
    with pytest.raises(InvalidRequest):
        mem.tools(("fly",))
    assert (await store.head(ns, "thread:t1")).sequence == 4  # 2 edits, each a node + a log node


async def test_edits_stage_into_a_transaction(store: MemoryStore, ns: str) -> None:
    mem = AgentMemory(store, ns, scope="thread:t1", initial={"seed": 1})
    txn = Transaction(store, ns)
    await mem.call("memory_store", {"key": "a", "value": 1}, txn=txn)
    await mem.call("memory_clear", {}, txn=txn)
    assert await mem.items(txn=txn) == {}
    assert await mem.items() == {"seed": 1}  # nothing committed yet
    await txn.commit()
    assert await mem.items() == {}
    await mem.undo()
    assert await mem.items() == {"seed": 1, "a": 1}


async def test_memories_are_isolated_by_scope_and_name(store: MemoryStore, ns: str) -> None:
    a = AgentMemory(store, ns, scope="thread:t1")
    b = AgentMemory(store, ns, scope="thread:t2")
    c = AgentMemory(store, ns, scope="thread:t1", name="other")
    await a.store("k", "a")
    assert await b.items() == {} and await c.items() == {}
    with pytest.raises(NothingToUndo):
        await c.undo()
    with pytest.raises(InvalidRequest):
        AgentMemory(store, ns, scope="thread:t1", name="has/slash")
    with pytest.raises(InvalidRequest):
        AgentMemory(store, ns, scope="session:1")


# -- semantic memory ----------------------------------------------------------------------


async def test_semantic_memory_reads_current_values_without_tombstones(
    store: MemoryStore, ns: str
) -> None:
    scope = scopes.user("u1")
    await remember(store, ns, scope, "preference", "color", "blue")
    await remember(store, ns, scope, "preference", "color", "green")  # a successor
    await remember(store, ns, scope, "memory", "pet", "cat")
    await remember(store, ns, scope, "memory", "old", "x")
    assert await forget(store, ns, scope, "memory", "old") is not None
    assert await forget(store, ns, scope, "memory", "never") is None
    await AgentMemory(store, ns, scope=scope).store("k", "v")  # reserved type: hidden by default
    assert await semantic_memory(store, ns, scope) == {
        "preference:color": "green",
        "memory:pet": "cat",
    }
    assert await semantic_memory(store, ns, scope, "preference") == {"preference:color": "green"}
    assert await semantic_memory(store, ns, scope, "agent_memory") == {"agent_memory:memory/k": "v"}
    assert "agent_memory:memory/k" in await semantic_memory(store, ns, scope, include_reserved=True)
    assert await semantic_memory(store, ns, scopes.user("u2")) == {}


async def test_vocabularies_decide_which_types_may_be_written(store: MemoryStore, ns: str) -> None:
    scope = "app"
    with pytest.raises(InvalidNode) as e:
        await remember(store, ns, scope, "decision", "db", "postgres")
    assert e.value.code == "semantic_type"
    product = Vocabulary([NodeType(name="decision", description="A durable decision.")])
    await remember(store, ns, scope, "decision", "db", "postgres", vocabulary=product)
    with pytest.raises(InvalidNode):
        await remember(store, ns, scope, "preference", "x", 1, vocabulary=product)
    dynamic = Vocabulary(allow_dynamic=True)
    await remember(store, ns, scope, "invented-type", "k", 1, vocabulary=dynamic)
    with pytest.raises(InvalidNode):
        await remember(store, ns, scope, "Bad Type", "k", 1, vocabulary=dynamic)
    assert await semantic_memory(store, ns, scope) == {
        "decision:db": "postgres",
        "invented-type:k": 1,
    }


def test_memory_errors_pickle_with_their_codes() -> None:
    for err in (
        NothingToUndo("x", memory="m"),
        UnknownVariable("y", field="name"),
        UnstorableValue("z"),
        InvalidArguments("w", field="key"),
    ):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and back.code == err.code and back.details == err.details
    assert MemoryEdit(op="store", keys=("a",)).to_dict()["keys"] == ["a"]
