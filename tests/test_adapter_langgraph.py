"""The LangGraph checkpointer: LangGraph's own conformance suite, a real graph, storage cost.

* ``validate()`` of the PyPI package langgraph-checkpoint-conformance, every base
  and extended capability, through the async methods and again through the sync
  ones (the suite only calls async methods, so a wrapper routes them to the sync
  methods from a worker thread), on memory:// and on SQLite;
* a StateGraph with an ``add_messages`` channel and a scripted chat model, run
  for many turns through ``ainvoke`` and through ``invoke``; the state survives
  reopening the SQLite file;
* a step stores only its new messages: the bytes a turn adds do not grow with
  the length of the conversation;
* values round-trip exactly (hypothesis), and messages become tether
  conversation nodes.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from langgraph.graph import END, START, MessagesState, StateGraph

from conftest import drop_pg_schema
from tether import InvalidNode, InvalidRequest, control
from tether.adapters._lg_codec import array_header, join_array, split_items
from tether.adapters._lg_values import ValueCodec
from tether.adapters._values import FANOUT, TreeBuilder
from tether.adapters.langgraph import TetherSaver
from tether.store import Store, open_store
from tether.store.in_memory import MemoryStore

# -- conformance ---------------------------------------------------------------


class SyncRouted(BaseCheckpointSaver[str]):
    """Async methods that run the wrapped saver's *sync* methods in a worker thread."""

    def __init__(self, inner: TetherSaver) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.inner.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        def run() -> list[CheckpointTuple]:
            return list(self.inner.list(config, filter=filter, before=before, limit=limit))

        for t in await asyncio.to_thread(run):
            yield t

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.inner.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.inner.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.inner.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.inner.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.inner.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.inner.prune, thread_ids, strategy=strategy)


async def _sqlite(tmp_path: Path) -> Store:
    return await open_store(f"sqlite:///{tmp_path / f'{uuid.uuid4().hex}.db'}")


def _assert_all_passed(report: Any) -> None:
    assert set(report.results) == {c.value for c in ALL_CAPABILITIES}
    failures = {
        name: r.failures
        for name, r in report.results.items()
        if not (r.detected and r.passed and r.tests_failed == 0 and r.tests_passed > 0)
    }
    assert not failures, failures


@pytest.mark.parametrize(
    "backend",
    [
        "memory",
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
@pytest.mark.parametrize("route", ["async", "sync"])
async def test_conformance_suite(
    backend: str, route: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    stores: list[Store] = []
    schema = f"tether_lg_{uuid.uuid4().hex[:12]}"  # PostgreSQL: dropped at the end
    pg = request.getfixturevalue("postgres_url") if backend == "postgres" else ""
    redis = request.getfixturevalue("redis_url") if backend == "redis" else ""

    async def open_backend() -> Store:
        if backend == "memory":
            return MemoryStore()
        if backend == "sqlite":
            return await _sqlite(tmp_path)
        if backend == "redis":  # every saver has a namespace of its own (below)
            return await open_store(redis)
        return await open_store(f"{pg}{'&' if '?' in pg else '?'}schema={schema}", max_size=4)

    @checkpointer_test(name=f"tether-{backend}-{route}")
    async def factory() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        store = await open_backend()
        stores.append(store)
        saver = TetherSaver(store, namespace=f"conf-{uuid.uuid4().hex[:8]}")
        yield saver if route == "async" else SyncRouted(saver)

    try:
        report = await validate(factory)
    finally:
        for s in stores:
            await s.close()
        if backend == "postgres":
            await drop_pg_schema(pg, schema)
    _assert_all_passed(report)


async def test_conformance_detects_a_broken_saver() -> None:
    """The harness can fail: a saver that forgets pending writes is caught."""

    class Forgetful(TetherSaver):
        async def aput_writes(self, *a: Any, **kw: Any) -> None:
            return None

    @checkpointer_test(name="forgetful")
    async def factory() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        yield Forgetful(MemoryStore())

    report = await validate(factory, capabilities={"put_writes"})
    assert report.results["put_writes"].passed is False


# -- a real graph ------------------------------------------------------------------


def _graph(saver: BaseCheckpointSaver[Any], replies: Iterator[AIMessage]) -> Any:
    model = GenericFakeChatModel(messages=replies)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


def _replies(n: int) -> Iterator[AIMessage]:
    return iter(AIMessage(content=f"reply {i} " + "x" * 80, id=f"ai-{i}") for i in range(n))


async def test_graph_turns_persist_across_reopen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lg.db'}"
    config: RunnableConfig = {"configurable": {"thread_id": "chat-1"}}
    async with await TetherSaver.afrom_url(url) as saver:
        graph = _graph(saver, _replies(5))
        for i in range(5):
            out = await graph.ainvoke({"messages": [HumanMessage(f"question {i}")]}, config)
        assert [m.content for m in out["messages"]][-2:] == ["question 4", "reply 4 " + "x" * 80]
    async with await TetherSaver.afrom_url(url) as saver:
        graph = _graph(saver, _replies(0))
        state = await graph.aget_state(config)
        msgs = state.values["messages"]
        assert len(msgs) == 10
        assert [type(m) for m in msgs[:2]] == [HumanMessage, AIMessage]
        assert msgs[1].id == "ai-0" and msgs[9].content.startswith("reply 4")
        history = [s async for s in graph.aget_state_history(config)]
        assert len(history) == 15  # input + loop checkpoints: 3 per turn
        assert (
            history[0].config["configurable"]["checkpoint_id"]
            == (state.config["configurable"]["checkpoint_id"])
        )


def test_sync_graph_with_a_private_loop(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sync.db'}"
    config: RunnableConfig = {"configurable": {"thread_id": "sync-1"}}
    with TetherSaver.from_url(url) as saver:
        graph = _graph(saver, _replies(3))
        for i in range(3):
            graph.invoke({"messages": [HumanMessage(f"q{i}")]}, config)
        state = graph.get_state(config)
        assert [m.content for m in state.values["messages"]][::2] == ["q0", "q1", "q2"]
        assert len(list(saver.list(config))) == 9  # list runs on the private loop thread
        assert saver._bridge.owns_loop
    assert not saver._bridge.owns_loop  # closed: the loop thread is gone


async def test_sync_method_on_the_home_loop_says_what_to_do() -> None:
    saver = TetherSaver(MemoryStore())
    with pytest.raises(InvalidRequest, match="use the async methods"):
        saver.get_tuple(generate_config())


async def _bytes(store: Store, ns: str, thread: str) -> int:
    return (await store.stats(ns, f"thread:{thread}")).payload_bytes


async def test_a_step_stores_only_its_new_messages() -> None:
    store = MemoryStore()
    saver = TetherSaver(store, namespace="cost")
    graph = _graph(saver, _replies(120))
    config: RunnableConfig = {"configurable": {"thread_id": "long"}}
    per_turn: list[int] = []
    for i in range(120):
        before = await _bytes(store, "cost", "long")
        await graph.ainvoke({"messages": [HumanMessage(f"question {i} " + "y" * 80)]}, config)
        per_turn.append(await _bytes(store, "cost", "long") - before)
    # Turn 110 holds 220 messages, turn 10 holds 20: the cost of a turn must not
    # follow the history (a whole-list saver would store ~11x more at turn 110).
    late, early = sum(per_turn[100:110]), sum(per_turn[10:20])
    assert late < 1.5 * early, (early, late)
    state = await graph.aget_state(config)
    assert len(state.values["messages"]) == 240


async def test_messages_are_conversation_nodes() -> None:
    store = MemoryStore()
    saver = TetherSaver(store, namespace="conv", llm="assistant")
    graph = _graph(saver, _replies(2))
    config: RunnableConfig = {"configurable": {"thread_id": "c"}}
    await graph.ainvoke({"messages": [HumanMessage("hello")]}, config)
    await graph.ainvoke({"messages": [HumanMessage("again")]}, config)
    nodes = await store.nodes("conv", "thread:c")
    goals = [n.payload for n in nodes if n.kind == "goal"]
    inferences = [n.payload for n in nodes if n.kind == "inference"]
    assert [g["input"] for g in goals] == ["hello", "again"]
    assert [i["content"][:7] for i in inferences] == ["reply 0", "reply 1"]
    assert all(p["llm"] == "assistant" for p in goals + inferences)
    # every message is stored exactly once although it is in 6 checkpoints
    assert len(goals) == 2 and len(inferences) == 2


async def test_tool_messages_map_to_tool_results() -> None:
    store = MemoryStore()
    saver = TetherSaver(store, namespace="tools")
    config = generate_config("t")
    call = AIMessage(content="", tool_calls=[{"id": "c1", "name": "add", "args": {"a": 1}}])
    msgs = [HumanMessage("add"), call, ToolMessage("2", tool_call_id="c1", name="add")]
    cp = generate_checkpoint(channel_values={"messages": msgs}, channel_versions={"messages": 1})
    stored = await saver.aput(config, cp, generate_metadata(), {"messages": 1})
    got = await saver.aget_tuple(stored)
    assert got is not None and got.checkpoint["channel_values"]["messages"] == msgs
    nodes = await store.nodes("tools", "thread:t")
    kinds = {n.kind: n.payload for n in nodes}
    assert kinds["inference"]["tool_calls"] == [{"id": "c1", "name": "add", "arguments": {"a": 1}}]
    assert kinds["tool_result"]["call_id"] == "c1" and kinds["tool_result"]["content"] == "2"


# -- exact values ----------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=False),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    """Equal with exact types (1, 1.0 and True differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and a != a:
        return bool(b != b)
    return bool(a == b)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.lists(values, max_size=40), values), min_size=1, max_size=5))
def test_values_round_trip_exactly(steps: list[tuple[list[Any], Any]]) -> None:
    async def run() -> None:
        saver = TetherSaver(MemoryStore())
        parent: RunnableConfig | None = None
        stored = []
        for i, (items, other) in enumerate(steps):
            config = generate_config("t")
            if parent is not None:
                config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
            cp = generate_checkpoint(
                channel_values={"items": items, "other": other},
                channel_versions={"items": i + 1, "other": i + 1},
            )
            parent = await saver.aput(
                config, cp, generate_metadata(step=i), {"items": i + 1, "other": i + 1}
            )
            stored.append((parent, items, other))
        for cfg, items, other in stored:
            got = await saver.aget_tuple(cfg)
            assert got is not None
            assert _same(got.checkpoint["channel_values"]["items"], items)
            assert _same(got.checkpoint["channel_values"]["other"], other)

    asyncio.run(run())


async def test_equal_json_but_different_types_stay_apart() -> None:
    saver = TetherSaver(MemoryStore())
    cfgs = []
    for i, v in enumerate(
        [[1, {"a": 1, "b": 2}], [1.0, {"b": 2, "a": 1}], [True, {"a": 1, "b": 2}]]
    ):
        cp = generate_checkpoint(channel_values={"x": v}, channel_versions={"x": i + 1})
        cfgs.append(
            (await saver.aput(generate_config("t"), cp, generate_metadata(), {"x": i + 1}), v)
        )
    for cfg, v in cfgs:
        got = await saver.aget_tuple(cfg)
        assert got is not None and _same(got.checkpoint["channel_values"]["x"], v)


async def test_deleting_the_latest_run_falls_back_to_the_previous_checkpoint() -> None:
    saver = TetherSaver(MemoryStore())
    first = await saver.aput(
        generate_config("t"), generate_checkpoint(), generate_metadata(run_id="r1"), {}
    )
    cfg = generate_config("t")
    cfg["configurable"]["checkpoint_id"] = first["configurable"]["checkpoint_id"]
    await saver.aput(cfg, generate_checkpoint(), generate_metadata(run_id="r2"), {})
    await saver.adelete_for_runs(["r2"])
    latest = await saver.aget_tuple(generate_config("t"))
    assert latest is not None
    assert latest.config["configurable"]["checkpoint_id"] == first["configurable"]["checkpoint_id"]
    await saver.adelete_for_runs(["r1"])
    assert await saver.aget_tuple(generate_config("t")) is None


async def test_copy_keeps_values_and_deleted_checkpoints_stay_deleted() -> None:
    saver = TetherSaver(MemoryStore())
    parent: RunnableConfig | None = None
    msgs: list[Any] = []
    for i in range(3):
        msgs = [*msgs, HumanMessage(f"m{i}", id=f"h{i}")]
        cfg = generate_config("src")
        if parent:
            cfg["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        cp = generate_checkpoint(
            channel_values={"messages": msgs}, channel_versions={"messages": i + 1}
        )
        parent = await saver.aput(
            cfg, cp, generate_metadata(step=i, run_id=f"r{i}"), {"messages": i + 1}
        )
    await saver.adelete_for_runs(["r1"])
    await saver.acopy_thread("src", "dst")
    src = [t async for t in saver.alist(generate_config("src"))]
    dst = [t async for t in saver.alist(generate_config("dst"))]
    assert [t.metadata["step"] for t in dst] == [2, 0]
    assert [t.checkpoint["channel_values"] for t in dst] == [
        t.checkpoint["channel_values"] for t in src
    ]


async def test_bad_config_is_a_typed_error() -> None:
    saver = TetherSaver(MemoryStore())
    with pytest.raises(InvalidRequest):
        await saver.aget_tuple({"configurable": {}})
    with pytest.raises(InvalidRequest):
        await saver.aprune(["t"], strategy="shred")


# -- reusing unchanged elements ------------------------------------------------------


async def _put_messages(saver: TetherSaver, msgs: list[Any], step: int) -> RunnableConfig:
    cp = generate_checkpoint(
        channel_values={"messages": msgs}, channel_versions={"messages": step + 1}
    )
    return await saver.aput(
        generate_config("m"), cp, generate_metadata(step=step), {"messages": step + 1}
    )


async def _stored_messages(saver: TetherSaver, cfg: RunnableConfig) -> list[Any]:
    got = await saver.aget_tuple(cfg)
    assert got is not None
    return list(got.checkpoint["channel_values"]["messages"])


async def test_a_field_reassigned_in_place_is_stored() -> None:
    saver = TetherSaver(MemoryStore())
    msgs: list[Any] = [HumanMessage("hi", id="h0"), AIMessage("draft", id="a0")]
    first = await _put_messages(saver, msgs, 0)
    msgs[1].content = "final"  # the same object, a field replaced
    msgs[0].id = "h0-renamed"
    msgs[1].additional_kwargs = {"k": 1}
    second = await _put_messages(saver, msgs, 1)
    assert [m.content for m in await _stored_messages(saver, first)] == ["hi", "draft"]
    got = await _stored_messages(saver, second)
    assert [m.content for m in got] == ["hi", "final"]
    assert got[0].id == "h0-renamed" and got[1].additional_kwargs == {"k": 1}
    # a dict element changed in place, and one read back from the store then changed
    loaded = await _stored_messages(saver, second)
    loaded[1].content = "edited after reading"
    rows: list[Any] = [{"a": 1}]
    await _put_messages(saver, rows, 2)
    rows[0]["a"] = 2
    third = await _put_messages(saver, [*loaded, *rows], 3)
    got = await _stored_messages(saver, third)
    assert got[1].content == "edited after reading" and got[2] == {"a": 2}


async def test_list_before_a_stored_checkpoint_follows_put_order_not_id_order() -> None:
    """``before=`` a stored checkpoint lists what was put before it, even when the ids
    do not sort in time (LangGraph's repository conformance suite tests this, newer
    than its published package); ``before=`` an id never put compares ids, as
    LangGraph's own savers do."""
    saver = TetherSaver(MemoryStore())
    tid = str(uuid.uuid4())
    older = generate_checkpoint(checkpoint_id="z-older")
    older["ts"] = "2026-01-01T00:00:00+00:00"
    stored = await saver.aput(generate_config(tid), older, generate_metadata(step=0), {})
    newer = generate_checkpoint(checkpoint_id="a-newer")
    newer["ts"] = "2026-01-01T00:00:01+00:00"
    await saver.aput(stored, newer, generate_metadata(step=1), {})

    async def ids(before: str | None) -> list[str]:
        b = generate_config(tid, checkpoint_id=before) if before else None
        return [t.checkpoint["id"] async for t in saver.alist(generate_config(tid), before=b)]

    assert await ids(None) == ["a-newer", "z-older"]
    assert await ids("a-newer") == ["z-older"]
    assert await ids("z-older") == []
    assert await ids("m-never-put") == ["a-newer"]  # ids below it, newest put first


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_a_new_saver_puts_again_what_another_one_stored(backend: str, tmp_path: Path) -> None:
    """A saver with no memory of the store (a new process: a retry after a crash that
    came after the commit) puts a stored checkpoint and its writes again. It takes its
    messages for new (a hint, to save look-ups), the commit finds them stored and the
    put is computed again: no error, nothing stored twice, the same checkpoint back."""
    store = MemoryStore() if backend == "memory" else await _sqlite(tmp_path)
    try:
        msgs = [HumanMessage("hi", id="h0"), AIMessage("hello", id="a0")]
        cp = generate_checkpoint(
            channel_values={"messages": msgs}, channel_versions={"messages": 1}
        )
        cfg, md = generate_config("m"), generate_metadata(step=0)
        write = [("messages", [AIMessage("more", id="a1")])]
        sizes = []
        for _ in range(2):
            saver = TetherSaver(store)
            out = await saver.aput(cfg, cp, md, {"messages": 1})
            await saver.aput_writes(out, write, "task-1")
            sizes.append(len(await store.nodes(saver.namespace, "thread:m")))
        got = await TetherSaver(store).aget_tuple(out)
        assert got is not None
        assert [
            (type(m), m.id, m.content) for m in got.checkpoint["channel_values"]["messages"]
        ] == [
            (HumanMessage, "h0", "hi"),
            (AIMessage, "a0", "hello"),
        ]
        assert [(t, c, [m.content for m in v]) for t, c, v in got.pending_writes or []] == [
            ("task-1", "messages", ["more"])
        ]
        # the second put stored only its bookkeeping (the marker that the id was put
        # again, a checkpoint node and its pointer), no message again
        kinds = [n.kind for n in (await store.nodes(saver.namespace, "thread:m"))[sizes[0] :]]
        assert "goal" not in kinds and "inference" not in kinds
    finally:
        await store.close()


async def test_a_nested_in_place_mutation_is_stored() -> None:
    """A change deep inside an element already put (no field reassigned) is stored."""
    saver = TetherSaver(MemoryStore())
    msgs: list[Any] = [AIMessage("x", id="a0", additional_kwargs={"k": [1]})]
    await _put_messages(saver, msgs, 0)
    msgs[0].additional_kwargs["k"].append(2)
    cfg = await _put_messages(saver, msgs, 1)
    got = await _stored_messages(saver, cfg)
    assert got[0].additional_kwargs == {"k": [1, 2]}


async def test_tool_arguments_edited_in_place_after_a_put_never_break_a_later_put() -> None:
    """A message's readable fields are the saver's own copy: a node that edits a tool
    call's arguments in place after the put (LangGraph hands nodes its state objects)
    changes neither that put nor a later put of the original message, in any thread.
    (Was: the saver's planned node for those bytes held the caller's dict, so the later
    put failed with "planned node ... was computed as ..." and stored nothing.)"""
    saver = TetherSaver(MemoryStore())
    call = {"id": "c1", "name": "search", "args": {"query": "old", "n": [1, 2.5]}}
    msg = AIMessage("", id="a1", tool_calls=[call], usage_metadata=None)
    original = AIMessage(
        "", id="a1", tool_calls=[{**call, "args": {"query": "old", "n": [1, 2.5]}}]
    )
    await _put_messages(saver, [HumanMessage("hi", id="h1"), msg], 0)
    msg.tool_calls[0]["args"]["query"] = "new"
    msg.tool_calls[0]["args"]["n"].append(3)
    other = generate_config("other")
    cp = generate_checkpoint(
        channel_values={"messages": [HumanMessage("hi", id="h1"), original]},
        channel_versions={"messages": 1},
    )
    cfg = await saver.aput(other, cp, generate_metadata(step=0), {"messages": 1})
    got = await _stored_messages(saver, cfg)
    assert got[1].tool_calls[0]["args"] == {"query": "old", "n": [1, 2.5]}
    assert isinstance(got[1].tool_calls[0]["args"]["n"][1], float)
    # the readable projection holds the original arguments, types kept
    nodes = await saver.store.nodes(saver.namespace, "thread:other")
    (inference,) = [n for n in nodes if n.kind == "inference"]
    assert inference.payload["tool_calls"][0]["arguments"] == {"query": "old", "n": [1, 2.5]}


async def test_a_put_stores_what_it_was_given_when_the_caller_edits_the_last_checkpoint() -> None:
    """The saver computes a put's unchanged channels from the checkpoint it put last:
    that checkpoint is its own copy. A caller that edits the dicts it put (a version,
    here) and then puts a checkpoint naming that channel's new version without listing
    it in new_versions still gets the value it gave stored, as SqliteSaver stores it.
    (Was: the saver's last checkpoint shared the caller's channel_versions, saw the new
    version as the one it had stored, and carried the old value.)"""
    saver = TetherSaver(MemoryStore())
    config = generate_config("carry")
    first = generate_checkpoint(
        channel_values={"a": "a1", "b": "b1"}, channel_versions={"a": 1, "b": 1}
    )
    cfg1 = await saver.aput(config, first, generate_metadata(step=0), {"a": 1, "b": 1})
    first["channel_versions"]["b"] = 2  # the caller's dict, edited after the put
    second = generate_checkpoint(
        channel_values={"a": "a2", "b": "b2"}, channel_versions={"a": 2, "b": 2}
    )
    cfg2 = await saver.aput(cfg1, second, generate_metadata(step=1), {"a": 2})
    got = await saver.aget_tuple(cfg2)
    assert got is not None and got.checkpoint["channel_values"] == {"a": "a2", "b": "b2"}
    prev = await saver.aget_tuple(cfg1)
    assert prev is not None and prev.checkpoint["channel_versions"] == {"a": 1, "b": 1}


async def test_metadata_json_cannot_hold_is_a_typed_error_and_writes_nothing() -> None:
    """A lone surrogate in a checkpoint's metadata: LangGraph's serializer would write it
    as "?", so the put refuses it with the identity rule's typed error, and the thread
    holds nothing."""
    saver = TetherSaver(MemoryStore())
    cp = generate_checkpoint(channel_values={"a": "x"}, channel_versions={"a": 1})
    md = generate_metadata(step=0)
    md["note"] = "bad \ud800 text"  # type: ignore[typeddict-unknown-key]
    with pytest.raises(InvalidNode) as e:
        await saver.aput(generate_config("bad"), cp, md, {"a": 1})
    assert e.value.code == "shape"
    assert await saver.aget_tuple(generate_config("bad")) is None
    assert (await saver.store.head(saver.namespace, "thread:bad")).sequence == 0


def _tool_graph(saver: BaseCheckpointSaver[Any]) -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        call = {"id": "call-1", "name": "search", "args": {"query": "old"}}
        return {"messages": [AIMessage("", id="ai-1", tool_calls=[call])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("route", ["async", "sync"])
async def test_an_edit_made_in_place_survives_update_state(route: str, tmp_path: Path) -> None:
    """LangGraph's own tests edit a message in place and put it back with update_state:
    ``get_state`` must show the edit (as InMemorySaver and SqliteSaver do)."""
    config: RunnableConfig = {"configurable": {"thread_id": "edit"}}
    url = f"sqlite:///{tmp_path / 'edit.db'}"
    if route == "async":
        async with await TetherSaver.afrom_url(url) as saver:
            graph = _tool_graph(saver)
            await graph.ainvoke({"messages": [HumanMessage("find it")]}, config)
            last = (await graph.aget_state(config)).values["messages"][-1]
            last.tool_calls[0]["args"]["query"] = "new"
            await graph.aupdate_state(config, {"messages": last})
            got = (await graph.aget_state(config)).values["messages"]
    else:

        def run() -> list[Any]:
            with TetherSaver.from_url(url) as saver:
                graph = _tool_graph(saver)
                graph.invoke({"messages": [HumanMessage("find it")]}, config)
                last = graph.get_state(config).values["messages"][-1]
                last.tool_calls[0]["args"]["query"] = "new"
                graph.update_state(config, {"messages": last})
                return list(graph.get_state(config).values["messages"])

        got = await asyncio.to_thread(run)
    assert len(got) == 2
    assert got[-1].tool_calls[0]["args"] == {"query": "new"}
    # and the stored conversation node says so too
    store = await open_store(url)
    try:
        nodes = await store.nodes("default", "thread:edit")
        calls = [n.payload["tool_calls"] for n in nodes if n.kind == "inference"]
        assert [c[0]["arguments"] for c in calls] == [{"query": "old"}, {"query": "new"}]
    finally:
        await store.close()


async def test_unchanged_elements_are_not_planned_again() -> None:
    saver = TetherSaver(MemoryStore())
    graph = _graph(saver, _replies(30))
    config: RunnableConfig = {"configurable": {"thread_id": "fast"}}
    for i in range(20):
        await graph.ainvoke({"messages": [HumanMessage(f"q{i}")]}, config)
    calls = 0
    original = saver._values.planned_element

    def counting(llm: str, value: Any, v: Any, draft: bool = False) -> Any:
        nonlocal calls
        calls += 1
        return original(llm, value, v, draft)

    saver._values.planned_element = counting  # type: ignore[method-assign]
    for i in range(20, 25):
        await graph.ainvoke({"messages": [HumanMessage(f"q{i}")]}, config)
    # 5 turns x 2 new messages: only elements whose bytes are new get a node
    # planned, against ~45 elements per put if the history were redone
    assert calls <= 5 * 2, calls
    state = await graph.aget_state(config)
    assert [m.content for m in state.values["messages"]][::2][-3:] == ["q22", "q23", "q24"]


def _count_resource_head_reads(saver: TetherSaver) -> list[int]:
    """Count the saver store's resource-head look-ups from now on: ``[n]``."""
    reads = [0]
    original = saver.store.resource_head

    async def counting(*a: Any, **kw: Any) -> Any:
        reads[0] += 1
        return await original(*a, **kw)

    saver.store.resource_head = counting  # type: ignore[method-assign]
    return reads


async def test_the_latest_read_from_the_savers_own_put_is_a_copy() -> None:
    """A read of the latest checkpoint this saver put (no read but the head's) hands out
    copies: LangGraph edits the checkpoint it reads in place (``get_state`` applies the
    pending writes to it), and neither the next read nor the next put may see that."""
    saver = TetherSaver(MemoryStore())
    cp = generate_checkpoint(channel_values={"ch": "v"}, channel_versions={"ch": 1})
    cfg = await saver.aput(generate_config("t"), cp, generate_metadata(step=1), {"ch": 1})
    heads = _count_resource_head_reads(saver)
    for config in (generate_config("t"), cfg):
        got = await saver.aget_tuple(config)
        assert got is not None
        got.checkpoint["channel_versions"]["ch"] = 99
        got.checkpoint["versions_seen"]["edited"] = {"ch": 99}
        got.metadata["step"] = 99
        again = await saver.aget_tuple(config)
        assert again is not None
        assert again.checkpoint["channel_versions"] == {"ch": 1}
        assert "edited" not in again.checkpoint["versions_seen"]
        assert again.metadata["step"] == 1
    assert heads[0] == 0  # the reads came from the saver's own put
    # "ch" is carried from the parent (its version unchanged): not given again
    cp2 = generate_checkpoint(channel_values={"o": "x"}, channel_versions={"ch": 1, "o": 1})
    cfg2 = await saver.aput(cfg, cp2, generate_metadata(step=2), {"o": 1})
    got = await TetherSaver(saver.store).aget_tuple(cfg2)
    assert got is not None and got.checkpoint["channel_values"]["ch"] == "v"


async def test_writes_anchor_on_the_savers_own_put_and_stay_exact_after_a_reset() -> None:
    """put_writes anchors on the checkpoint node this saver put (no pointer read); after
    delete_thread (a reset: new generation) a write before its put is marked and found."""
    saver = TetherSaver(MemoryStore())
    cp = generate_checkpoint(channel_values={"ch": "v"}, channel_versions={"ch": 1})
    cfg = await saver.aput(generate_config("t"), cp, generate_metadata(), {"ch": 1})
    reads = _count_resource_head_reads(saver)
    await saver.aput_writes(cfg, [("ch", "w1")], "task")
    # none: the anchor came from the put, and this saver wrote the thread from empty,
    # so it knows the writes key has no version yet
    assert reads[0] == 0
    got = await saver.aget_tuple(cfg)
    assert got is not None and got.pending_writes == [("task", "ch", "w1")]
    nodes = await saver.store.nodes(saver.namespace, "thread:t", limit=100)
    (cp_node,) = [n for n in nodes if n.payload.get("lg") == "cp"]
    (w_node,) = [n for n in nodes if (n.resource_key or "").startswith("lgw:")]
    assert cp_node.id in w_node.parents
    # a reset: the same checkpoint id written to before it is put again
    await saver.adelete_thread("t")
    await saver.aput_writes(cfg, [("ch", "early")], "task")
    await saver.aput(generate_config("t"), cp, generate_metadata(), {"ch": 1})
    got = await saver.aget_tuple(cfg)
    assert got is not None and got.pending_writes == [("task", "ch", "early")]
    # the checkpoint is the thread's newest node, its write below it: a saver that did
    # not write the thread reads the latest with its write (the id is marked ``odd``)
    got = await TetherSaver(saver.store).aget_tuple(generate_config("t"))
    assert got is not None and got.pending_writes == [("task", "ch", "early")]
    nodes = await saver.store.nodes(saver.namespace, "thread:t", limit=100)
    assert any(n.resource_key == "lgc:;odd" for n in nodes)
    h = await saver.aget_delta_channel_history(config=cfg, channels=["ch"])
    assert h == await BaseCheckpointSaver.aget_delta_channel_history(
        saver, config=cfg, channels=["ch"]
    )


async def test_a_long_thread_puts_and_writes_without_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the number of key hashes a tip keeps, a put and its writes still read no
    resource head (the new keys are past the greatest checkpoint id of their kind),
    and a key that exists is still read: another saver's write is never missed."""
    import tether.adapters.langgraph as lgmod

    monkeypatch.setattr(lgmod, "_TIP_ALL", 8)
    saver = TetherSaver(MemoryStore())
    reads = _count_resource_head_reads(saver)
    cfg = generate_config("long")
    for step in range(12):  # 12 pointer keys and 12 writes keys: past 8 hashes
        cp = generate_checkpoint(channel_values={"ch": f"v{step}"}, channel_versions={"ch": step})
        cfg = await saver.aput(cfg, cp, generate_metadata(step=step), {"ch": step})
        await saver.aput_writes(cfg, [("ch", f"w{step}")], "task")
    assert reads[0] == 0
    tip = saver._tips.get("thread:long")
    assert tip is not None and tip.keys is not None and tip.keys.hashes is None
    # a write to an old checkpoint of this thread: its writes key exists, so it is
    # read, and LangGraph's once-per-(task, idx) rule holds
    first = [t async for t in saver.alist(generate_config("long"))][-1].config
    await saver.aput_writes(first, [("ch", "again"), ("ch", "second")], "task")
    assert reads[0] >= 1
    got = await saver.aget_tuple(first)
    assert got is not None and got.pending_writes == [
        ("task", "ch", "w0"),
        ("task", "ch", "second"),
    ]


# -- event loops and threads -----------------------------------------------------------


async def test_from_url_inside_a_running_loop_and_close_from_it(tmp_path: Path) -> None:
    """A notebook cell or async code may call from_url and close() on a thread that
    runs a loop: both work, async and sync methods included, and the private loop stops."""
    config: RunnableConfig = {"configurable": {"thread_id": "nb"}}
    saver = TetherSaver.from_url(f"sqlite:///{tmp_path / 'nb.db'}")
    try:
        graph = _graph(saver, _replies(2))
        await graph.ainvoke({"messages": [HumanMessage("q0")]}, config)
        got = saver.get_tuple(config)  # a sync method on this loop's thread: no deadlock
        assert got is not None and len(got.checkpoint["channel_values"]["messages"]) == 2
        assert len([t async for t in saver.alist(config)]) == 3  # alist uses the loop thread
        assert saver._bridge.owns_loop
    finally:
        saver.close()
    assert not saver._bridge.owns_loop


def test_close_from_another_thread_that_runs_a_loop(tmp_path: Path) -> None:
    """A from_url saver made in one thread closes from another thread running its own
    loop, after its private loop thread was started (by list)."""
    import threading

    saver = TetherSaver.from_url(f"sqlite:///{tmp_path / 'x.db'}")
    cp = generate_checkpoint(channel_values={"ch": "v"}, channel_versions={"ch": 1})
    cfg = saver.put(generate_config("t"), cp, generate_metadata(), {"ch": 1})
    assert len(list(saver.list(cfg))) == 1 and saver._bridge.owns_loop
    errors: list[BaseException] = []

    def worker() -> None:
        async def main() -> None:
            saver.close()

        try:
            asyncio.run(main())
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert errors == [] and not saver._bridge.owns_loop


def test_sync_calls_run_in_the_callers_thread(tmp_path: Path) -> None:
    """memory:// and SQLite belong to no loop: a sync put commits in the calling thread
    (no hop to the saver's loop thread), and still round-trips."""
    import threading

    for url in ("memory://", f"sqlite:///{tmp_path / 'inline.db'}"):
        with TetherSaver.from_url(url) as saver:
            seen: list[threading.Thread] = []
            commit = saver.store.commit

            async def spy(*a: Any, _commit: Any = commit, _seen: Any = seen, **kw: Any) -> Any:
                _seen.append(threading.current_thread())
                return await _commit(*a, **kw)

            saver.store.commit = spy  # type: ignore[method-assign]
            msgs = [HumanMessage("hi", id="h")]
            cp = generate_checkpoint(
                channel_values={"messages": msgs}, channel_versions={"messages": 1}
            )
            cfg = saver.put(generate_config("t"), cp, generate_metadata(), {"messages": 1})
            assert seen == [threading.current_thread()]
            got = saver.get_tuple(cfg)
            assert got is not None and got.checkpoint["channel_values"]["messages"] == msgs


# -- lists cut from one serializer call ------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(items=st.lists(values, max_size=20))
def test_a_serialized_list_cuts_into_its_elements(items: list[Any]) -> None:
    """msgpack is context-free: the cut bytes of element i decode to element i, and
    joining them back decodes to the list (the read path's one serializer call)."""
    serde = TetherSaver(MemoryStore()).serde
    t, b = serde.dumps_typed(items)
    head = array_header(b)
    assert t == "msgpack" and head is not None and head[0] == len(items)
    parts = split_items(b, head[1], len(items))
    assert parts is not None
    assert all(
        _same(serde.loads_typed(("msgpack", p)), x) for p, x in zip(parts, items, strict=True)
    )
    assert _same(serde.loads_typed(("msgpack", join_array(parts))), items)
    assert split_items(b, head[1], len(items) + 1) is None  # a wrong count is refused
    assert split_items(b[:-1], head[1], len(items)) is None or not items  # truncated


async def test_edits_anywhere_in_a_growing_list_are_stored() -> None:
    """The tail-only cut applies only when the new list starts with the old one's bytes:
    an edit in the middle, a shrink and a reorder are all stored as given."""
    saver = TetherSaver(MemoryStore())
    msgs: list[Any] = [HumanMessage(f"m{i}", id=f"h{i}") for i in range(40)]
    await _put_messages(saver, msgs, 0)
    msgs[5].content = "edited"
    msgs.append(AIMessage("new", id="a-new"))
    steps = [list(msgs)]
    cfgs = [await _put_messages(saver, msgs, 1)]
    for i, nxt in enumerate([msgs[:10], list(reversed(msgs)), [*msgs, HumanMessage("x")]]):
        steps.append(list(nxt))
        cfgs.append(await _put_messages(saver, nxt, i + 2))
    cold = TetherSaver(saver.store)  # reads the element nodes, not the cached bytes
    for cfg, want in zip(cfgs, steps, strict=True):
        assert await _stored_messages(saver, cfg) == want
        assert await _stored_messages(cold, cfg) == want
    assert (await _stored_messages(cold, cfgs[0]))[5].content == "edited"


def _expected_tree(ids: list[str], raw: list[bytes]) -> list[list[Any]]:
    """The seq tree over whole chunks, built here from its definition: leaves of
    FANOUT element ids carrying the elements' bytes (latin-1), upper levels of
    FANOUT child ids (TreeBuilder's), up to one root; leaves first."""
    from tether.adapters._values import Planned
    from tether.core.graph import node_id

    if not ids:
        return []
    level: list[Any] = []
    for i in range(0, len(ids), FANOUT):
        chunk = ids[i : i + FANOUT]
        payload = {
            "lg": "seq",
            "lvl": 0,
            "items": chunk,
            "x": b"".join(raw[i : i + FANOUT]).decode("latin-1"),
        }
        parents = tuple(sorted(set(chunk)))
        nid = node_id("resource", parents, payload)
        level.append(Planned(id=nid, kind="resource", payload=payload, parents=parents))
    levels = [level]
    builder = TreeBuilder()
    while len(levels[-1]) > 1:
        below = [p.id for p in levels[-1]]
        levels.append(
            [
                builder._node(len(levels), tuple(below[i : i + FANOUT]))
                for i in range(0, len(below), FANOUT)
            ]
        )
    return levels


@settings(max_examples=25, deadline=None)
@given(growth=st.lists(st.integers(min_value=0, max_value=400), min_size=1, max_size=6))
def test_a_grown_list_builds_the_same_tree_as_from_scratch(growth: list[int]) -> None:
    """The tree of a list that extends the slot's previous one reuses that tree's
    nodes, and is node for node the tree built from the element ids of its whole
    chunks, the rest named in the reference; what it plans as new, plus the
    previous reference's nodes, is every node it needs."""
    codec, fresh = ValueCodec(), ValueCodec()
    serde = TetherSaver(MemoryStore()).serde
    slot = ("thread:t", "", "items")
    items: list[Any] = []
    before: set[str] = set()
    for n in growth:
        items = [*items, *(f"item {len(items) + i}" * 3 for i in range(n))]
        ref, plan = codec.encode(serde, "agent", items, slot)
        want_ref, want = fresh.encode(serde, "agent", items)  # no slot: built from scratch
        elements = [p.id for p in want.all() if p.payload.get("lg") == "el"]
        full = len(elements) - len(elements) % FANOUT
        raw = [base64.b64decode(p.payload["v"]["b"]) for p in want.elements]
        tree = _expected_tree(elements[:full], raw[:full])
        assert ref == want_ref and ref["n"] == len(items)
        assert ref["l"] == (tree[-1][0].id if tree else None)
        assert ref.get("t", []) == elements[full:]
        assert [p.id for p in plan.all()] == [p.id for p in want.all()]
        assert {p.id for level in tree for p in level} == {p.id for p in plan.all()} - set(elements)
        if plan.base is not None:
            assert set(plan.base) <= before
            assert {p.id for p in plan.all()} <= before | {p.id for p in plan.new}
            assert set(plan.stored) <= before
        before = {p.id for p in plan.all()}


async def test_a_stale_list_cache_never_skips_a_node() -> None:
    """Another saver (another process) resets the thread and writes it: this saver's
    slot cache describes nodes that are gone, and its put still stores every node."""
    store = MemoryStore()
    mine, other = TetherSaver(store), TetherSaver(store)
    msgs: list[Any] = [HumanMessage(f"m{i}", id=f"h{i}") for i in range(70)]
    await _put_messages(mine, msgs, 0)
    await other.adelete_thread("m")
    await _put_messages(other, [HumanMessage("theirs", id="t0")], 1)
    msgs.append(AIMessage("more", id="a-more"))
    cfg = await _put_messages(mine, msgs, 2)
    cold = TetherSaver(store)  # reads the nodes, not this saver's cached bytes
    assert await _stored_messages(cold, cfg) == msgs
    # an edit in place of an early element, then growth: stored as given
    msgs[3].content = "edited"
    msgs.append(AIMessage("last", id="a-last"))
    cfg = await _put_messages(mine, msgs, 3)
    assert await _stored_messages(TetherSaver(store), cfg) == msgs


async def test_a_put_that_appends_builds_only_the_right_spine() -> None:
    """Tree work per put follows the new elements: after 300 messages, a put of two
    more builds no tree node (they follow the last whole chunk, named in the
    reference), and a put that fills a chunk builds its leaf and the right spine
    (one node per level), not every leaf."""
    saver = TetherSaver(MemoryStore())
    msgs: list[Any] = [HumanMessage(f"m{i}", id=f"h{i}") for i in range(300)]
    await _put_messages(saver, msgs, 0)
    built: list[int] = []
    codec = saver._values
    leaf, node = codec.leaf, codec.trees._node

    def counting_leaf(chunk: Any) -> Any:
        built.append(0)
        return leaf(chunk)

    def counting_node(level: int, *a: Any, **kw: Any) -> Any:
        built.append(level)
        return node(level, *a, **kw)

    codec.leaf = counting_leaf  # type: ignore[method-assign]
    codec.trees._node = counting_node  # type: ignore[method-assign]
    msgs += [HumanMessage("q", id="hq"), AIMessage("a", id="aq")]
    cfg = await _put_messages(saver, msgs, 1)
    assert built == []  # 302 elements: 9 whole leaves (288), 14 named in the reference
    assert await _stored_messages(TetherSaver(saver.store), cfg) == msgs
    msgs += [HumanMessage(f"n{i}", id=f"n{i}") for i in range(320 - len(msgs))]
    cfg = await _put_messages(saver, msgs, 2)
    assert built == [0, 1], built  # 320 = 10 whole leaves: the new leaf and the new root
    assert await _stored_messages(TetherSaver(saver.store), cfg) == msgs


async def test_a_thread_written_by_another_saver_between_puts_stays_exact() -> None:
    """This saver starts each transaction from the head its own last commit left; another
    saver (another process) writing the thread in between makes that commit conflict and
    retry from fresh reads: the checkpoint chain, carried values and writes stay exact."""
    store = MemoryStore()
    mine, other = TetherSaver(store), TetherSaver(store)
    cp1 = generate_checkpoint(
        channel_values={"a": "a1", "b": "b1"}, channel_versions={"a": 1, "b": 1}
    )
    c1 = await mine.aput(generate_config("t"), cp1, generate_metadata(step=1), {"a": 1, "b": 1})
    await mine.aput_writes(c1, [("a", "w-mine")], "task1")
    cp2 = generate_checkpoint(
        channel_values={"a": "a2", "b": "b1"}, channel_versions={"a": 2, "b": 1}
    )
    c2 = await other.aput(c1, cp2, generate_metadata(step=2), {"a": 2})
    await other.aput_writes(c1, [("b", "w-other")], "task2")
    cp3 = generate_checkpoint(
        channel_values={"a": "a2", "b": "b3"}, channel_versions={"a": 2, "b": 3}
    )
    c3 = await mine.aput(c2, cp3, generate_metadata(step=3), {"b": 3})  # "a" is carried from cp2
    await mine.aput_writes(c1, [("a", "w-late")], "task3")
    cold = TetherSaver(store)
    got = await cold.aget_tuple(c3)
    assert got is not None and got.checkpoint["channel_values"] == {"a": "a2", "b": "b3"}
    got1 = await cold.aget_tuple(c1)
    assert got1 is not None
    assert sorted(got1.pending_writes) == sorted(
        [("task1", "a", "w-mine"), ("task2", "b", "w-other"), ("task3", "a", "w-late")]
    )
    nodes = await store.nodes(mine.namespace, "thread:t", limit=100)
    puts = [n for n in nodes if n.payload.get("lg") == "cp"]
    assert [v.payload["id"] for v in puts] == [cp1["id"], cp2["id"], cp3["id"]]
    for v in puts:  # each checkpoint is its own id key's head: found by id in one read
        assert v.resource_key == f"lgi:;{v.payload['id']}"
        assert await store.resource_head(mine.namespace, "thread:t", v.resource_key) == v
    # the other saver put cp2: this saver putting that id again finds its pointer
    # (a key its own commits never wrote) and marks the id
    await mine.aput(c1, cp2, generate_metadata(step=2), {"a": 2})
    odd = await store.versions(mine.namespace, "thread:t", "lgc:;odd", limit=10)
    assert [o.payload["id"] for o in odd] == [cp2["id"]]
    # and a reset by the other saver: this saver's next put starts over, exactly
    await other.adelete_thread("t")
    c4 = await mine.aput(generate_config("t"), cp1, generate_metadata(step=1), {"a": 1, "b": 1})
    got = await TetherSaver(store).aget_tuple(c4)
    assert got is not None and got.checkpoint["channel_values"] == {"a": "a1", "b": "b1"}
    assert got.pending_writes == []


# -- readable in tether's views ----------------------------------------------------------


def _tool_loop_graph(saver: BaseCheckpointSaver[Any]) -> Any:
    """An agent that calls a tool once, reads the result and answers."""

    def agent(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, HumanMessage):
            call = {"id": "call-1", "name": "weather", "args": {"city": "Paris"}}
            return {
                "messages": [
                    AIMessage("", id=f"ai-call-{len(state['messages'])}", tool_calls=[call])
                ]
            }
        return {
            "messages": [AIMessage(f"It is {last.content}.", id=f"ai-{len(state['messages'])}")]
        }

    def tools(state: MessagesState) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        return {"messages": [ToolMessage("sunny", tool_call_id=call["id"], name=call["name"])]}

    def route(state: MessagesState) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


async def test_a_langgraph_thread_reads_as_a_conversation(tmp_path: Path) -> None:
    """A LangGraph thread opened through tether's conversation view (describe, the
    view the HTTP API and inspector serve): the text, the tool call, the tool result."""

    url = f"sqlite:///{tmp_path / 'conv.db'}"
    config: RunnableConfig = {"configurable": {"thread_id": "weather"}}
    async with await TetherSaver.afrom_url(url) as saver:
        graph = _tool_loop_graph(saver)
        await graph.ainvoke({"messages": [HumanMessage("Weather in Paris?")]}, config)
        await graph.ainvoke({"messages": [HumanMessage("And tomorrow?")]}, config)
        res = await control.describe(
            saver.store,
            namespace="default",
            thread="weather",
            stores=["conversation"],
            include_data=True,
        )
    (conv,) = [r for r in res.stores if r.name == "conversation"]
    call = {"id": "call-1", "name": "weather", "arguments": {"city": "Paris"}}
    turn = [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call-1", "name": "weather", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."},
    ]
    assert conv.data == [
        {"role": "user", "content": "Weather in Paris?"},
        *turn,
        {"role": "user", "content": "And tomorrow?"},
        *turn,
    ]
    assert conv.item_count == 8


def _idless_graph(saver: BaseCheckpointSaver[Any], state: Any = MessagesState) -> Any:
    """A node that answers with a message without an id, as hand-written nodes do:
    ``add_messages`` gives it (and the id-less input) an id in the channel."""

    def agent(st: Any) -> dict[str, Any]:
        last = st["messages"][-1]
        return {"messages": [AIMessage(content=f"echo: {last.content}")]}

    builder = StateGraph(state)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


async def _conversation(store: Store, thread: str) -> list[Any]:

    res = await control.describe(
        store, namespace="default", thread=thread, stores=["conversation"], include_data=True
    )
    (conv,) = [r for r in res.stores if r.name == "conversation"]
    assert conv.item_count == len(conv.data)
    return list(conv.data)


async def _draft_steps(saver: TetherSaver, thread: str, *, listed: bool) -> RunnableConfig:
    """The calls a step of ``add_messages`` makes, in order, without LangGraph's
    threads: the checkpoint before the step, the node's write (a message without an
    id), the next checkpoint (the message with the id the reducer gave it). ``listed``:
    the first checkpoint holds the channel's list (else only its version, as a
    ``DeltaChannel``'s checkpoints do). Returns the first checkpoint's config."""
    from langgraph.checkpoint.base import empty_checkpoint

    base: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    c1 = empty_checkpoint()
    v1 = saver.get_next_version(None, None)
    c1["channel_versions"] = {"messages": v1}
    if listed:
        c1["channel_values"] = {"messages": [HumanMessage("hi", id="h1")]}
    cfg1 = await saver.aput(base, c1, {"source": "input", "step": -1}, {"messages": v1})
    await saver.aput_writes(cfg1, [("messages", [AIMessage("reply")])], "task-1", "")
    c2 = empty_checkpoint()
    v2 = saver.get_next_version(v1, None)
    c2["channel_versions"] = {"messages": v2}
    c2["channel_values"] = {"messages": [HumanMessage("hi", id="h1"), AIMessage("reply", id="a1")]}
    await saver.aput(cfg1, c2, {"source": "loop", "step": 0}, {"messages": v2})
    return cfg1


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_messages_without_ids_read_once_in_the_conversation(
    backend: str, tmp_path: Path
) -> None:
    """A message a node returns without an id is in the step's pending writes as it
    was returned and in the next checkpoint with the id ``add_messages`` gave it: two
    stored forms of one message, which the conversation view showed both of (2,991
    messages for a 1,000-turn thread of 2,000). Now the write's copy is a draft: in
    the graph, readable, exact, and not a second conversation message."""
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'once.db'}"
    async with await TetherSaver.afrom_url(url) as saver:
        cfg1 = await _draft_steps(saver, "once", listed=True)
        assert await _conversation(saver.store, "once") == [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "reply"},
        ]
        # the pending write is what the node returned: no id
        tup = await saver.aget_tuple(cfg1)
        assert tup is not None and tup.pending_writes is not None
        [(task, channel, value)] = tup.pending_writes
        assert (task, channel) == ("task-1", "messages")
        assert [(type(m).__name__, m.content, m.id) for m in value] == [
            ("AIMessage", "reply", None)
        ]
        nodes = await saver.store.nodes("default", "thread:once")
        drafts = [n.payload for n in nodes if n.kind == "resource" and n.payload.get("draft")]
        assert [(d["role"], d["content"]) for d in drafts] == [("ai", "reply")]
    async with await TetherSaver.afrom_url(url) as fresh:  # another process: same reads
        if backend == "sqlite":
            tup = await fresh.aget_tuple(cfg1)
            assert tup is not None and tup.pending_writes is not None
            assert [m.id for m in tup.pending_writes[0][2]] == [None]


async def test_a_write_to_a_channel_without_a_list_stays_in_the_conversation() -> None:
    """A checkpoint that holds only the channel's version (a ``DeltaChannel``: its
    writes are its record) keeps its writes' messages as conversation messages."""
    saver = TetherSaver(MemoryStore())
    await _draft_steps(saver, "delta", listed=False)
    conv = await _conversation(saver.store, "delta")
    assert {"role": "assistant", "content": "reply"} in conv
    nodes = await saver.store.nodes("default", "thread:delta")
    assert not [n for n in nodes if n.kind == "resource" and n.payload.get("draft")]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_a_graph_of_messages_without_ids_reads_once(backend: str, tmp_path: Path) -> None:
    """End to end: whichever way LangGraph's threads order a step's write and the
    reducer's ids, every message of the thread shows once, in order."""
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'once.db'}"
    config: RunnableConfig = {"configurable": {"thread_id": "graph"}}
    async with await TetherSaver.afrom_url(url) as saver:
        graph = _idless_graph(saver)
        # The thread's first input has an id: with none, its write comes before any
        # checkpoint holds the list, and may read twice (docs/adapters.md says so).
        first = HumanMessage("start", id="start")
        await graph.ainvoke({"messages": [first]}, config, durability="sync")
        for text in ["hello", "hello", "bye"]:  # a repeated message is two messages
            await graph.ainvoke({"messages": [HumanMessage(text)]}, config, durability="sync")
        assert await _conversation(saver.store, "graph") == [
            m
            for text in ["start", "hello", "hello", "bye"]
            for m in (
                {"role": "user", "content": text},
                {"role": "assistant", "content": f"echo: {text}"},
            )
        ]
        state = await graph.aget_state(config)
        assert [m.content for m in state.values["messages"]][-2:] == ["bye", "echo: bye"]


def test_messages_without_ids_read_once_through_the_sync_methods(tmp_path: Path) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": "sync-once"}}
    with TetherSaver.from_url(f"sqlite:///{tmp_path / 'sync.db'}") as saver:
        graph = _idless_graph(saver)
        graph.invoke({"messages": [HumanMessage("one", id="one")]}, config, durability="sync")
        graph.invoke({"messages": [HumanMessage("two")]}, config, durability="sync")
        conv = asyncio.run(_reopened_conversation(f"sqlite:///{tmp_path / 'sync.db'}"))
    assert [(m["role"], m["content"]) for m in conv] == [
        ("user", "one"),
        ("assistant", "echo: one"),
        ("user", "two"),
        ("assistant", "echo: two"),
    ]


async def _reopened_conversation(url: str) -> list[Any]:
    store = await open_store(url)
    try:
        return await _conversation(store, "sync-once")
    finally:
        await store.close()


async def test_a_delta_channel_keeps_its_writes_in_the_conversation() -> None:
    """A ``DeltaChannel``'s checkpoints hold no list: its writes are its record, so
    their messages stay conversation nodes (none is hidden as a draft)."""
    from langgraph.channels.delta import DeltaChannel
    from langgraph.graph.message import add_messages
    from typing_extensions import TypedDict

    def append(state: list[Any], writes: Sequence[Any]) -> list[Any]:
        return list(add_messages(state, [m for w in writes for m in w]))

    # the functional form: this module's annotations are strings (``__future__``),
    # which LangGraph would resolve without ``append`` in scope
    delta_state = TypedDict(  # type: ignore[operator]  # noqa: UP013
        "DeltaState", {"messages": Annotated[list, DeltaChannel(append)]}
    )
    saver = TetherSaver(MemoryStore())
    graph = _idless_graph(saver, delta_state)
    config: RunnableConfig = {"configurable": {"thread_id": "once"}}
    for text in ["a", "b"]:
        await graph.ainvoke({"messages": [HumanMessage(text, id=text)]}, config, durability="sync")
    conv = await _conversation(saver.store, "once")
    assert [(m["role"], m["content"]) for m in conv] == [
        ("user", "a"),
        ("assistant", "echo: a"),
        ("user", "b"),
        ("assistant", "echo: b"),
    ]


# -- the previous stored layout -----------------------------------------------------


async def _put_previous_layout(store: Store, msgs: list[Any], cfg_value: Any) -> str:
    """One checkpoint of thread ``old`` as the saver wrote it before the tail form:
    the list's tree over every element (its last leaf unfinished), a ``val`` node for
    a small dict, and one ``w`` node per pending write. Returns the checkpoint id."""
    from langgraph.checkpoint.base import empty_checkpoint

    from tether.adapters._lg_codec import content, pack
    from tether.store.txn import transact

    serde = TetherSaver(store).serde
    codec = ValueCodec()
    elements = [codec.element(serde, "agent", m) for m in msgs]
    assert len(elements) % FANOUT, "the last leaf must be unfinished"
    root, seq = TreeBuilder().build(
        [p.id for p in elements], [p.payload["v"]["b"] for p in elements]
    )
    assert root is not None
    write_el = codec.element(serde, "agent", HumanMessage("pending", id="p1"))
    write_root, write_seq = TreeBuilder().build([write_el.id], [write_el.payload["v"]["b"]])
    assert write_root is not None
    val = {"lg": "val", "v": content(serde, cfg_value)[0]}
    cp = empty_checkpoint()
    cp["channel_versions"] = {"messages": 1, "cfg": 1}
    header = {k: v for k, v in cp.items() if k != "channel_values"}
    cid = cp["id"]

    async def fn(txn: Any) -> None:
        scope = "thread:old"
        for p in [*elements, *seq, write_el, *write_seq]:
            await txn.append(scope, p.kind, p.payload, parents=p.parents)
        v = await txn.append(scope, "resource", val, parents=[])
        node = await txn.append(
            scope,
            "resource",
            {
                "lg": "cp",
                "ns": "",
                "id": cid,
                "parent": None,
                "ts": cp["ts"],
                "checkpoint": pack(serde, header),
                "metadata": pack(serde, {"source": "input", "step": -1}),
                "values": {"cfg": {"b": v.id}, "messages": {"l": root, "n": len(msgs)}},
            },
            parents=sorted({*(await txn.frontier(scope)), root, v.id}),
            resource_key="lgc:;cp",
        )
        await txn.append(
            scope,
            "resource",
            {"lg": "id", "id": cid, "cp": node.id},
            parents=[node.id],
            resource_key=f"lgi:;{cid}",
        )
        for idx, (channel, ref) in enumerate(
            [("messages", {"l": write_root, "n": 1}), ("note", {"j": "text"})]
        ):
            await txn.append(
                scope,
                "resource",
                {
                    "lg": "w",
                    "cp": cid,
                    "task": "task-1",
                    "idx": idx,
                    "channel": channel,
                    "path": "",
                    "value": ref,
                },
                parents=sorted({node.id, *([write_root] if "l" in ref else [])}),
                resource_key=f"lgw:;{cid}",
            )

    await transact(store, "default", fn)
    return cid


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_a_thread_in_the_previous_layout_loads_and_grows(
    backend: str, tmp_path: Path
) -> None:
    """Threads written before lists kept their last chunk in the reference and writes
    shared one node still read exactly, take new writes and grow."""
    store: Store = MemoryStore() if backend == "memory" else await _sqlite(tmp_path)
    msgs: list[Any] = [HumanMessage(f"m{i}", id=f"h{i}") for i in range(FANOUT + 5)]
    cfg_value = {"temperature": 0.5, "tags": ["a", "b"]}
    cid = await _put_previous_layout(store, msgs, cfg_value)
    saver = TetherSaver(store)
    config: RunnableConfig = {
        "configurable": {"thread_id": "old", "checkpoint_ns": "", "checkpoint_id": cid}
    }
    got = await saver.aget_tuple({"configurable": {"thread_id": "old"}})
    assert got is not None and got.config["configurable"]["checkpoint_id"] == cid
    assert got.checkpoint["channel_values"] == {"messages": msgs, "cfg": cfg_value}
    assert got.pending_writes == [
        ("task-1", "messages", [HumanMessage("pending", id="p1")]),
        ("task-1", "note", "text"),
    ]
    # a write already stored in the old form is not stored again; a new one is
    again = [("messages", ["again"]), ("note", "again"), ("extra", 7)]
    await saver.aput_writes(config, again, "task-1")
    got = await saver.aget_tuple(config)
    assert got is not None
    assert [w[1:] for w in got.pending_writes] == [
        ("messages", [HumanMessage("pending", id="p1")]),
        ("note", "text"),
        ("extra", 7),
    ]
    # a new checkpoint carries the old dict and extends the old list
    grown = [*msgs, AIMessage("new", id="a-new")]
    cp = generate_checkpoint(
        channel_values={"messages": grown, "cfg": cfg_value},
        channel_versions={"messages": 2, "cfg": 1},
    )
    new_cfg = await saver.aput(config, cp, generate_metadata(step=0), {"messages": 2})
    for reader in (saver, TetherSaver(store)):  # cached bytes, then the nodes
        latest = await reader.aget_tuple(new_cfg)
        assert latest is not None
        assert latest.checkpoint["channel_values"] == {"messages": grown, "cfg": cfg_value}
        old = await reader.aget_tuple(config)
        assert old is not None and old.checkpoint["channel_values"]["messages"] == msgs
    listed = [t.config["configurable"]["checkpoint_id"] async for t in saver.alist(None)]
    assert listed == [cp["id"], cid]
    # the thread now holds both layouts: a saver that did not write it finds the newest
    # put (its namespace key now a marker), and the old checkpoint by its pointer
    thread: RunnableConfig = {"configurable": {"thread_id": "old"}}
    fresh = await TetherSaver(store).aget_tuple(thread)
    assert fresh is not None and fresh.config["configurable"]["checkpoint_id"] == cp["id"]
    # keep_latest hides the old checkpoint (its pointer marked deleted) and frees it
    await TetherSaver(store).aprune(["old"], strategy="keep_latest")
    for reader in (saver, TetherSaver(store)):
        assert await reader.aget_tuple(config) is None
        latest = await reader.aget_tuple(thread)
        assert latest is not None and latest.config["configurable"]["checkpoint_id"] == cp["id"]
        assert latest.checkpoint["channel_values"] == {"messages": grown, "cfg": cfg_value}
    nodes = await store.nodes("default", "thread:old", limit=1000)
    assert [n.payload["id"] for n in nodes if n.payload.get("lg") == "cp"] == [cp["id"]]
    assert (await control.verify_scope(store, "default", "thread:old")).ok
    await store.close()


@pytest.mark.postgres
async def test_concurrent_writes_of_one_thread_on_a_pooled_store_all_land(
    postgres_url: str,
) -> None:
    """LangGraph runs a step's tasks concurrently, each task's aput_writes on its own.
    On a pooled store (PostgreSQL) they would race each other for the thread's head
    and lose until their retries ran out (Conflict out of LangGraph's own
    test_max_concurrency); the saver queues its writes to one thread instead, so
    every one lands, once, while another thread's writes go on beside them."""
    schema = f"tether_lg_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in postgres_url else "?"
    saver = await TetherSaver.afrom_url(f"{postgres_url}{sep}schema={schema}&max_size=8")
    try:
        cp = generate_checkpoint(channel_values={"ch": "v"}, channel_versions={"ch": 1})
        cfgs = [
            await saver.aput(generate_config(t), cp, generate_metadata(), {"ch": 1})
            for t in ("a", "b")
        ]
        await asyncio.gather(
            *(
                saver.aput_writes(cfg, [("ch", f"{i}"), ("other", i)], f"task-{i:03d}")
                for i in range(120)
                for cfg in cfgs
            )
        )
        for cfg in cfgs:
            got = await saver.aget_tuple(cfg)
            assert got is not None
            assert sorted(got.pending_writes) == sorted(
                w
                for i in range(120)
                for w in [(f"task-{i:03d}", "ch", f"{i}"), (f"task-{i:03d}", "other", i)]
            )
        assert len(saver._writing) == 0  # no lock outlives its writers
    finally:
        await saver.aclose()
        await drop_pg_schema(postgres_url, schema)


# -- what is stored: node ids and payloads of a fixed workload ------------------------

# The fingerprint of ``_golden_workload``'s nodes (ids, kinds, parents, keys, sequences,
# payloads), as the saver stored them before its CPU work was cut (issue 46): a change
# to the identity rule, the node layout or a payload's bytes changes it.
_GOLDEN = (204, "d65623fcbc00238b087cd856886e00b98342efaae57afd8cfaf57ea23406040d")


async def _golden_workload(saver: TetherSaver) -> tuple[int, str]:
    import hashlib

    import orjson

    cfg: RunnableConfig = {"configurable": {"thread_id": "golden", "checkpoint_ns": ""}}
    messages: list[Any] = []
    for turn in range(40):
        messages = [
            *messages,
            HumanMessage(content=f"question {turn}", id=f"h{turn}"),
            AIMessage(content=f"answer {turn} " + "x" * turn, id=f"a{turn}"),
        ]
        version = f"{turn:032d}.1"
        ck: Any = {
            "v": 4,
            "id": f"1f0{turn:05d}-0000-6000-8000-000000000000",
            "ts": f"2026-01-01T00:00:{turn:02d}+00:00",
            "channel_values": {"messages": messages, "step": turn},
            "channel_versions": {"messages": version, "step": version},
            "versions_seen": {"agent": {"messages": version}},
        }
        md: Any = {"source": "loop", "step": turn, "parents": {}}
        cfg = await saver.aput(cfg, ck, md, {"messages": version, "step": version})
        writes = [("messages", [AIMessage(content=f"w{turn}", id=f"w{turn}")]), ("step", turn + 1)]
        await saver.aput_writes(cfg, writes, f"task{turn}", "path")
    nodes = await saver.store.nodes(saver.namespace, "thread:golden", limit=100_000)
    h = hashlib.sha256()
    for n in nodes:
        row = [n.id, n.kind, list(n.parents), n.resource_key, n.sequence, n.payload]
        h.update(orjson.dumps(row))
    return len(nodes), h.hexdigest()


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_a_fixed_workload_stores_the_same_nodes(backend: str, tmp_path: Path) -> None:
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'golden.db'}"
    async with await TetherSaver.afrom_url(url) as saver:
        assert await _golden_workload(saver) == _GOLDEN


def test_is_plain_json_keeps_its_depth_limit() -> None:
    from tether.adapters._values import is_plain_json

    def nest(n: int, leaf: Any) -> Any:
        for i in range(n):
            leaf = [leaf] if i % 2 else {"k": leaf}
        return leaf

    for leaf in ("s", True, None, 1, 1.5, [], {}):
        assert is_plain_json(nest(48, leaf))  # the leaf at depth 48: allowed
        assert not is_plain_json(nest(49, leaf))  # at depth 49: refused
    assert not is_plain_json({"a": ["s", 2**53]})
    assert not is_plain_json(["s", float("nan")])
    assert not is_plain_json({1: "s"})
    assert not is_plain_json(["s", (1,)])
    assert is_plain_json({"a": ["s", None, False, 2**53 - 1, {"b": 0.5}]})


async def test_scope_locks_serialise_and_forget_a_scope() -> None:
    from tether.adapters._sync import ScopeLocks

    locks, order = ScopeLocks(), []

    async def writer(name: str) -> None:
        async with locks.hold("s"):
            order.append(f"{name}+")
            await asyncio.sleep(0.01)
            order.append(f"{name}-")

    await asyncio.gather(writer("a"), writer("b"))
    assert order == ["a+", "a-", "b+", "b-"]  # one at a time
    assert len(locks) == 0  # the scope's entry left with its last holder
    with pytest.raises(RuntimeError):
        async with locks.hold("s"):
            raise RuntimeError("inside")
    assert len(locks) == 0
    async with locks.hold("s"):  # released after the error
        assert len(locks) == 1
