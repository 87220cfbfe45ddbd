"""LangGraph's ``DeltaChannel`` through ``TetherSaver``: ``get_delta_channel_history``.

* the behaviour of the ``delta_channel_history`` conformance group of LangGraph's
  repository (not in the published conformance package yet): writes oldest first,
  the nearest snapshot or plain value as the seed with its own writes replayed,
  the target's writes left out, channels ending their walks independently, no seed
  at the root, writes of one step in ``writes_sort_key`` order; sync and async;
* the override returns what LangGraph's default walk (``get_tuple`` per ancestor)
  returns over the same saver, on random threads with forks, re-puts, writes
  before their checkpoint, deletions and copies (hypothesis);
* it reads a long chain in a few batched reads, where the default reads per ancestor;
* a real ``StateGraph`` with a ``DeltaChannel`` of messages gives the same state as
  ``InMemorySaver``, and stores its snapshots as lists: a turn's bytes stay flat.
"""

from __future__ import annotations

import asyncio
import operator
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph.channels.delta")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, DeltaChannelHistory
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from tether.adapters import _lg_history
from tether.adapters.langgraph import TetherSaver
from tether.core.graph import CausalNode
from tether.store import open_store
from tether.store.in_memory import MemoryStore

History = Mapping[str, DeltaChannelHistory]


def _default(saver: TetherSaver, config: RunnableConfig, channels: Sequence[str]) -> History:
    """LangGraph's own walk (one get_tuple per ancestor) over the same saver."""
    return BaseCheckpointSaver.get_delta_channel_history(saver, config=config, channels=channels)


async def _adefault(saver: TetherSaver, config: RunnableConfig, channels: Sequence[str]) -> History:
    return await BaseCheckpointSaver.aget_delta_channel_history(
        saver, config=config, channels=channels
    )


async def _history(
    saver: TetherSaver, route: str, config: RunnableConfig, channels: Sequence[str]
) -> History:
    if route == "async":
        return await saver.aget_delta_channel_history(config=config, channels=channels)
    return await asyncio.to_thread(
        lambda: saver.get_delta_channel_history(config=config, channels=channels)
    )


async def _put(
    saver: TetherSaver,
    thread: str,
    parent: RunnableConfig | None,
    values: dict[str, Any],
    step: int,
    *,
    cid: str | None = None,
    run_id: str | None = None,
) -> RunnableConfig:
    config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    versions = {k: step + 1 for k in values}
    cp = Checkpoint(
        v=1,
        id=cid or str(uuid6(clock_seq=-1)),
        ts="",
        channel_values=values,
        channel_versions=versions,
        versions_seen={},
        updated_channels=None,
    )
    md: dict[str, Any] = {"source": "loop", "step": step, "parents": {}}
    if run_id:
        md["run_id"] = run_id
    return await saver.aput(config, cp, md, versions)  # type: ignore[arg-type]


async def _chain(
    saver: TetherSaver, thread: str, n: int, snapshots: set[int], plain: set[int] = frozenset()
) -> list[RunnableConfig]:
    """``n`` checkpoints on one line; a snapshot or a plain value at the given steps, and
    one write of ``step`` to ``ch`` at every step."""
    configs: list[RunnableConfig] = []
    parent = None
    for step in range(n):
        values: dict[str, Any] = {}
        if step in snapshots:
            values["ch"] = _DeltaSnapshot(f"snap{step}")
        elif step in plain:
            values["ch"] = [f"plain{step}"]
        parent = await _put(saver, thread, parent, values, step)
        configs.append(parent)
        await saver.aput_writes(parent, [("ch", step)], str(uuid.uuid4()))
    return configs


def _values(h: History, ch: str) -> list[Any]:
    return [w[2] for w in h[ch]["writes"]]


@pytest.fixture(params=["memory", "sqlite"])
async def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        s = TetherSaver(MemoryStore(), namespace="delta")
    else:
        s = TetherSaver(await open_store(f"sqlite:///{tmp_path / 'd.db'}"), namespace="delta")
    yield s
    await s.store.close()


# -- the conformance group's behaviour -------------------------------------------------


@pytest.mark.parametrize("route", ["async", "sync"])
async def test_writes_oldest_first_from_the_nearest_snapshot(
    saver: TetherSaver, route: str
) -> None:
    configs = await _chain(saver, "t", 6, snapshots={0, 3})
    h = await _history(saver, route, configs[-1], ["ch"])
    # the walk starts at the head's parent (step 4) and ends at the snapshot at
    # step 3, whose own write (3) produced step 4 and is replayed
    assert _values(h, "ch") == [3, 4]
    assert h["ch"]["seed"] == _DeltaSnapshot("snap3")
    assert type(h["ch"]["seed"]) is _DeltaSnapshot
    h = await _history(saver, route, configs[2], ["ch"])
    assert _values(h, "ch") == [0, 1] and h["ch"]["seed"] == _DeltaSnapshot("snap0")


async def test_the_targets_own_writes_are_left_out(saver: TetherSaver) -> None:
    configs = await _chain(saver, "t", 3, snapshots={0})
    await saver.aput_writes(configs[-1], [("ch", "extra")], str(uuid.uuid4()))
    h = await saver.aget_delta_channel_history(config=configs[-1], channels=["ch"])
    assert _values(h, "ch") == [0, 1]


async def test_channels_end_their_walks_independently(saver: TetherSaver) -> None:
    parent = None
    configs = []
    for step in range(5):
        values: dict[str, Any] = {}
        if step == 1:
            values["a"] = _DeltaSnapshot("snap_a")
        if step == 3:
            values["b"] = _DeltaSnapshot("snap_b")
        parent = await _put(saver, "t", parent, values, step)
        configs.append(parent)
        await saver.aput_writes(parent, [("a", step), ("b", step)], str(uuid.uuid4()))
    h = await saver.aget_delta_channel_history(config=configs[-1], channels=["a", "b", "c"])
    assert _values(h, "a") == [1, 2, 3] and h["a"]["seed"] == _DeltaSnapshot("snap_a")
    assert _values(h, "b") == [3] and h["b"]["seed"] == _DeltaSnapshot("snap_b")
    assert h["c"] == {"writes": []}  # never written, never stored: empty, no seed
    assert await saver.aget_delta_channel_history(config=configs[-1], channels=[]) == {}


async def test_no_seed_at_the_root_and_a_plain_value_is_a_seed(saver: TetherSaver) -> None:
    configs = await _chain(saver, "root", 4, snapshots=set())
    h = await saver.aget_delta_channel_history(config=configs[-1], channels=["ch"])
    assert _values(h, "ch") == [0, 1, 2] and "seed" not in h["ch"]
    # a thread from before the channel became a DeltaChannel: a plain value seeds it
    configs = await _chain(saver, "migrated", 4, snapshots=set(), plain={0, 1})
    h = await saver.aget_delta_channel_history(config=configs[-1], channels=["ch"])
    assert h["ch"]["seed"] == ["plain1"] and _values(h, "ch") == [1, 2]


async def test_one_steps_writes_replay_in_writes_sort_key_order(saver: TetherSaver) -> None:
    configs = await _chain(saver, "t", 3, snapshots={0})
    first, last = "0" * 8 + "-0000-0000-0000-" + "0" * 12, "f" * 8 + "-ffff-ffff-ffff-" + "f" * 12
    await saver.aput_writes(configs[1], [("ch", "second")], first, "~pull, 02")
    await saver.aput_writes(configs[1], [("ch", "first")], last, "~pull, 01")
    # no task path (graph input, update_state): before every task write, by task id
    await saver.aput_writes(configs[1], [("ch", "input")], "zz")
    h = await saver.aget_delta_channel_history(config=configs[-1], channels=["ch"])
    assert _values(h, "ch") == [0, 1, "input", "first", "second"]


async def test_a_missing_or_deleted_checkpoint_has_no_history(saver: TetherSaver) -> None:
    missing: RunnableConfig = {"configurable": {"thread_id": "none", "checkpoint_id": "x"}}
    assert await saver.aget_delta_channel_history(config=missing, channels=["ch"]) == {
        "ch": {"writes": []}
    }
    configs = []
    parent = None
    for step in range(4):
        parent = await _put(saver, "del", parent, {}, step, run_id=f"run{step % 2}")
        configs.append(parent)
        await saver.aput_writes(parent, [("ch", step)], str(uuid.uuid4()))
    await saver.adelete_for_runs(["run0"])  # steps 0 and 2: the walk from 3 stops at 2
    h = await saver.aget_delta_channel_history(config=configs[3], channels=["ch"])
    assert h == await _adefault(saver, configs[3], ["ch"]) == {"ch": {"writes": []}}


@pytest.mark.parametrize("page", [1, 512])
async def test_writes_stored_before_a_checkpoints_newest_put_are_found(
    saver: TetherSaver, page: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes sit below a checkpoint's newest put when the id was written to before
    its put, or put again: the walk still finds them, at any page size."""
    monkeypatch.setattr(_lg_history._Pages, "page", page)
    x_id, y_id = str(uuid6(clock_seq=-1)), str(uuid6(clock_seq=-1))
    early: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_id": x_id}}
    await saver.aput_writes(early, [("ch", "early")], "t0")
    x = await _put(saver, "t", None, {}, 0, cid=x_id)
    await saver.aput_writes(x, [("ch", "x")], "t1")
    y = await _put(saver, "t", x, {}, 1, cid=y_id)
    await saver.aput_writes(y, [("ch", "y")], "t2")
    await _put(saver, "t", x, {}, 1, cid=y_id)  # y put again
    z = await _put(saver, "t", y, {}, 2)
    h = await saver.aget_delta_channel_history(config=z, channels=["ch"])
    assert _values(h, "ch") == ["early", "x", "y"]
    assert h == await _adefault(saver, z, ["ch"])


# -- the same as LangGraph's default walk, on any thread ----------------------------------

_value = st.one_of(st.integers(-3, 3), st.text(max_size=3), st.lists(st.integers(0, 9), max_size=4))
_stored = st.one_of(
    st.none(),  # not stored at this checkpoint
    _value.map(_DeltaSnapshot),
    st.lists(st.text(max_size=3), max_size=4).map(_DeltaSnapshot),
    st.lists(st.integers(0, 9), max_size=3),  # a plain value (migration)
)
_op = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 30), st.tuples(_stored, _stored)),
    st.tuples(st.just("reput"), st.integers(0, 30), st.integers(0, 30)),
    st.tuples(
        st.just("write"),
        st.integers(0, 30),
        st.tuples(st.sampled_from("ab"), _value, st.sampled_from(["t1", "t2", "t3"])),
        st.sampled_from(["", "~pull, 1", "~pull, 2"]),
    ),
    st.tuples(st.just("early"), st.integers(0, 30), _value),  # a write before its put
    st.tuples(st.just("delete"), st.integers(0, 3)),
)


async def _apply(
    saver: TetherSaver,
    ops: list[tuple[Any, ...]],
    after_each: Callable[[], Awaitable[None]] | None = None,
) -> list[RunnableConfig]:
    """Run random operations on thread ``t``; every checkpoint id ever put, oldest first.
    ``after_each`` runs after every operation."""
    configs: list[RunnableConfig] = []
    ids: list[str] = []  # creation order: a re-put's parent is older, so no cycles
    early: list[str] = []
    for n, op in enumerate(ops):
        if op[0] == "put":
            parent = configs[op[1] % len(configs)] if configs and op[1] else None
            values = {ch: v for ch, v in zip("ab", op[2], strict=True) if v is not None}
            cid = early.pop() if early else None
            configs.append(await _put(saver, "t", parent, values, n, cid=cid, run_id=f"r{n % 4}"))
            ids.append(configs[-1]["configurable"]["checkpoint_id"])
        elif op[0] == "reput" and configs:
            i = op[1] % len(configs)
            parent = configs[op[2] % i] if i else None
            await _put(saver, "t", parent, {}, n, cid=ids[i], run_id=f"r{n % 4}")
        elif op[0] == "write" and configs:
            ch, value, task = op[2]
            await saver.aput_writes(configs[op[1] % len(configs)], [(ch, value)], task, op[3])
        elif op[0] == "early":
            cid = str(uuid6(clock_seq=-1))
            cfg: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_id": cid}}
            await saver.aput_writes(cfg, [("a", op[2])], "t9")
            early.append(cid)
        elif op[0] == "delete":
            await saver.adelete_for_runs([f"r{op[1]}"])
        if after_each is not None:
            await after_each()
    return configs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(_op, min_size=1, max_size=25),
    copy=st.booleans(),
    page=st.sampled_from([1, 2, 5, 512]),  # nodes per read: where a walk ends a page
)
def test_same_history_as_langgraphs_walk(ops: list[tuple[Any, ...]], copy: bool, page: int) -> None:
    async def run() -> None:
        saver = TetherSaver(MemoryStore(), namespace="prop")
        configs = await _apply(saver, ops)
        thread = "t"
        if copy:
            await saver.acopy_thread("t", "c")
            thread = "c"
        targets = [{"configurable": {**c["configurable"], "thread_id": thread}} for c in configs]
        targets.append({"configurable": {"thread_id": thread}})  # the latest
        for cfg in targets:
            for channels in (["a", "b"], ["b"]):
                got = await saver.aget_delta_channel_history(config=cfg, channels=channels)
                want = await _adefault(saver, cfg, channels)
                assert _typed(got) == _typed(want), cfg

    _run_with_page(run(), page)


async def test_each_walk_starts_from_the_last_ones_nodes_and_stays_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A chain that grows between walks: each walk reads only the nodes stored since the
    last one (``_Pages``, ``TetherSaver._recent``), and its answer is LangGraph's walk's,
    also after another saver wrote the thread and after a reset."""
    store = MemoryStore()
    saver = TetherSaver(store, namespace="grow")
    stranger = TetherSaver(store, namespace="grow")
    latest: RunnableConfig = {"configurable": {"thread_id": "t"}}
    configs = await _chain(saver, "t", 30, snapshots={0, 10, 20})

    async def same() -> list[Any]:
        got = await saver.aget_delta_channel_history(config=latest, channels=["ch"])
        assert _typed(got) == _typed(await _adefault(saver, latest, ["ch"]))
        return _values(got, "ch")

    assert await same() == list(range(20, 29))
    pages = _count_pages(saver, monkeypatch)
    for i in range(30, 36):
        configs.append(await _put(saver, "t", configs[-1], {}, i))
        await saver.aput_writes(configs[-1], [("ch", i)], str(uuid.uuid4()))
        assert await same() == list(range(20, i))
    assert pages == {"since": 6, "pages": 0}  # never a whole page again
    # another saver moves the thread: its nodes are read, the answer follows them
    configs.append(await _put(stranger, "t", configs[-1], {"ch": _DeltaSnapshot("s")}, 40))
    await stranger.aput_writes(configs[-1], [("ch", 40)], "x")
    configs.append(await _put(stranger, "t", configs[-1], {}, 41))
    assert await same() == [40]
    # a reset: the kept nodes belong to the old generation, so a whole page is read
    await stranger.adelete_thread("t")
    configs = await _chain(stranger, "t", 5, snapshots={0})
    assert await same() == [0, 1, 2, 3]
    assert pages["pages"] == 1


async def test_an_encrypted_store_keeps_no_nodes_between_walks() -> None:
    """Under a cipher, erasing a user makes payloads unreadable where they are stored;
    a node kept from an earlier walk would still show them. So walks on an encrypted
    store read the store each time, and answer exactly as LangGraph's walk."""
    pytest.importorskip("cryptography")
    from tether.crypto import MasterKey

    store = await open_store("memory://", cipher=MasterKey.generate())
    try:
        saver = TetherSaver(store, namespace="sealed")
        latest: RunnableConfig = {"configurable": {"thread_id": "t"}}
        configs = await _chain(saver, "t", 12, snapshots={0})
        for i in range(12, 15):
            got = await saver.aget_delta_channel_history(config=latest, channels=["ch"])
            assert _typed(got) == _typed(await _adefault(saver, latest, ["ch"]))
            assert len(saver._recent) == 0
            configs.append(await _put(saver, "t", configs[-1], {}, i))
            await saver.aput_writes(configs[-1], [("ch", i)], str(uuid.uuid4()))
    finally:
        await store.close()
    # and on the default codec the same walks keep the newest nodes
    plain = TetherSaver(MemoryStore(), namespace="plain")
    await _chain(plain, "t", 12, snapshots={0})
    await plain.aget_delta_channel_history(config=latest, channels=["ch"])
    assert len(plain._recent) == 1


def _count_pages(saver: TetherSaver, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How the saver's walks start: from the kept nodes, or with a page read (of the
    walk's page size: a saver that did not write the thread last finds its latest
    checkpoint with a short read of the newest nodes, not counted here)."""
    counts = {"since": 0, "pages": 0}
    real_since, real_nodes = _lg_history._Pages._since, saver.store.nodes

    async def since(self: Any, recent: Any) -> bool:
        ok: bool = await real_since(self, recent)
        counts["since"] += ok
        return ok

    async def nodes(*a: Any, **k: Any) -> Any:
        if k.get("descending") and k.get("limit") == _lg_history._Pages.page:
            counts["pages"] += 1
        return await real_nodes(*a, **k)

    monkeypatch.setattr(_lg_history._Pages, "_since", since)
    monkeypatch.setattr(saver.store, "nodes", nodes)
    return counts


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(_op, min_size=1, max_size=20),
    page=st.sampled_from([1, 3, 512]),
    other=st.sets(st.integers(0, 19), max_size=4),  # another saver writes after these ops
    reset=st.sets(st.integers(0, 19), max_size=2),  # the thread is deleted after these
)
def test_a_growing_thread_reads_its_history_exactly_between_writes(
    ops: list[tuple[Any, ...]], page: int, other: set[int], reset: set[int]
) -> None:
    """A walk starts from the newest nodes the last walk read (``_Pages``): asked after
    every operation, with another saver writing the same thread in between and the
    thread deleted (a reset) now and then, it gives LangGraph's own walk's answer."""

    async def run() -> None:
        store = MemoryStore()
        saver = TetherSaver(store, namespace="grow")
        stranger = TetherSaver(store, namespace="grow")
        step = [0]

        async def check() -> None:
            n = step[0]
            step[0] += 1
            if n in other:
                await _put(stranger, "t", None, {"a": _DeltaSnapshot(f"x{n}")}, 100 + n)
            if n in reset:
                await stranger.adelete_thread("t")
            cfg: RunnableConfig = {"configurable": {"thread_id": "t"}}
            for channels in (["a", "b"], ["b"]):
                got = await saver.aget_delta_channel_history(config=cfg, channels=channels)
                want = await _adefault(saver, cfg, channels)
                assert _typed(got) == _typed(want), (n, channels)

        await _apply(saver, ops, check)

    _run_with_page(run(), page)


def _run_with_page(coro: Awaitable[None], page: int) -> None:
    """``asyncio.run(coro)`` with the history walk reading ``page`` nodes at a time."""
    saved = _lg_history._Pages.page
    _lg_history._Pages.page = page
    try:
        asyncio.run(coro)  # type: ignore[arg-type]
    finally:
        _lg_history._Pages.page = saved


def _typed(h: History) -> Any:
    """A history with the type of every value spelt out (a snapshot is a tuple too)."""

    def t(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return (type(v).__name__, [t(x) for x in v])
        return (type(v).__name__, v)

    return {
        c: (t(e.get("seed", "<none>")), [(w[0], w[1], t(w[2])) for w in e["writes"]])
        for c, e in h.items()
    }


# -- a long chain in a few reads ------------------------------------------------------------


class CountingStore(MemoryStore):
    """A memory store that counts its reads (a real store, not a mock)."""

    reads = 0

    async def nodes(self, *a: Any, **kw: Any) -> list[CausalNode]:
        self.reads += 1
        return await super().nodes(*a, **kw)

    async def get_nodes(self, *a: Any, **kw: Any) -> dict[str, CausalNode]:
        self.reads += 1
        return await super().get_nodes(*a, **kw)

    async def versions(self, *a: Any, **kw: Any) -> list[CausalNode]:
        self.reads += 1
        return await super().versions(*a, **kw)

    async def resource_head(self, *a: Any, **kw: Any) -> CausalNode | None:
        self.reads += 1
        return await super().resource_head(*a, **kw)

    async def resource_heads(self, *a: Any, **kw: Any) -> dict[str, CausalNode]:
        self.reads += 1
        return await super().resource_heads(*a, **kw)


async def test_a_long_chain_costs_a_few_reads() -> None:
    store = CountingStore()
    saver = TetherSaver(store, namespace="reads")
    configs = await _chain(saver, "t", 120, snapshots={0})

    async def reads(fn: Callable[[], Any]) -> tuple[int, Any]:
        store.reads = 0
        out = await fn()
        return store.reads, out

    ours, got = await reads(
        lambda: saver.aget_delta_channel_history(config=configs[-1], channels=["ch"])
    )
    theirs, want = await reads(lambda: _adefault(saver, configs[-1], ["ch"]))
    assert got == want and len(got["ch"]["writes"]) == 119
    assert theirs > 119 and ours <= 8, (ours, theirs)


# -- a real graph ---------------------------------------------------------------------------


def _append(state: list[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    return list(add_messages(state, [m for w in writes for m in w]))


class DeltaState(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_append, snapshot_frequency=4)]
    turns: Annotated[int, operator.add]


def _delta_graph(saver: BaseCheckpointSaver[Any]) -> Any:
    def agent(state: DeltaState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"reply to {n} " + "x" * 80, id=f"ai-{n}")], "turns": 1}

    builder = StateGraph(DeltaState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


def _turn(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"question {i} " + "y" * 80, id=f"h-{i}")], "turns": 0}


def test_a_delta_graph_through_tether_matches_langgraphs_saver(tmp_path: Path) -> None:
    ours = TetherSaver.from_url(f"sqlite:///{tmp_path / 'g.db'}")
    try:
        graphs = [_delta_graph(ours), _delta_graph(InMemorySaver())]
        cfg: RunnableConfig = {"configurable": {"thread_id": "chat"}}
        for i in range(25):
            for g in graphs:
                g.invoke(_turn(i), cfg)
        a, b = (g.get_state(cfg) for g in graphs)
        assert [m.content for m in a.values["messages"]] == [
            m.content for m in b.values["messages"]
        ]
        assert len(a.values["messages"]) == 50 and a.values["turns"] == 25
        # every past state reads back the same way (history replayed from any checkpoint)
        ha = [s.values for s in graphs[0].get_state_history(cfg)]
        hb = [s.values for s in graphs[1].get_state_history(cfg)]
        assert ha == hb
    finally:
        ours.close()


async def test_delta_snapshots_are_stored_as_lists() -> None:
    store = MemoryStore()
    saver = TetherSaver(store, namespace="cost")
    graph = _delta_graph(saver)
    cfg: RunnableConfig = {"configurable": {"thread_id": "long"}}

    async def size() -> int:
        return (await store.stats("cost", "thread:long")).payload_bytes

    per_turn: list[int] = []
    for i in range(80):
        before = await size()
        await graph.ainvoke(_turn(i), cfg)
        per_turn.append(await size() - before)
    # A snapshot every 2 turns holds the whole conversation; stored as one blob it
    # would make turns 70-79 cost ~4x turns 10-19.
    early, late = sum(per_turn[10:20]), sum(per_turn[70:80])
    assert late < 1.3 * early, (early, late)
    state = await graph.aget_state(cfg)
    assert len(state.values["messages"]) == 160
