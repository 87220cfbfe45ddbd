"""tether.adapters.pydantic_ai: Pydantic AI's three store protocols on every backend.

Runs with Pydantic AI's ``TestModel`` / ``FunctionModel`` (no model API) on the
``store`` fixture (memory, SQLite, Redis, PostgreSQL). The harness's own tests run on
these stores in tests/test_pydantic_ai_harness_suite.py; the second version combination
(the newest harness, whose slim has no ConversationStore) in
tests/test_adapter_pydantic_ai_compat.py.
"""

from __future__ import annotations

import asyncio
import pickle
import uuid
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("pydantic_ai_harness")

from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai_harness.memory import (
    MemoryConflictError,
    MemoryOperation,
    MemoryOperationConflictError,
    MemoryStore,
    SearchableMemoryStore,
)
from pydantic_ai_harness.step_persistence import (
    StepPersistence,
    StepStore,
    ToolEffectRecord,
    continue_run,
)

import tether
from tether.adapters.pydantic_ai import (
    InvalidMemoryPath,
    MemoryConflict,
    TetherMemoryStore,
    TetherStepStore,
)

try:  # pydantic-ai-slim >= 2.66; the newest harness pins an older slim (the compat test)
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.conversation_store import ConversationConflict

    from tether.adapters.pydantic_ai import (
        ConversationConflictError,
        InvalidMessage,
        TetherConversationStore,
    )
except ImportError:
    HAS_CONVERSATION_STORE = False
else:
    HAS_CONVERSATION_STORE = True

conversation_store = pytest.mark.skipif(
    not HAS_CONVERSATION_STORE, reason="this pydantic-ai-slim has no ConversationStore (< 2.66)"
)


@pytest.fixture
def ns() -> str:
    return "pai-" + uuid.uuid4().hex[:12]


def _agent(**kw: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(TestModel(), **kw)

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    return agent


async def _count(store: tether.Store, ns: str, scope: str) -> int:
    return (await store.head(ns, scope)).sequence


# -- ConversationStore --------------------------------------------------------------


@conversation_store
async def test_conversation_round_trip_is_exact_and_each_message_stored_once(
    store: tether.Store, ns: str
) -> None:
    cs = TetherConversationStore(store, namespace=ns)
    agent = _agent()
    conv = await cs.load("c1") or Conversation(conversation_id="c1")
    r1 = await agent.run("hello", conversation=conv)
    first = await cs.save(r1)
    assert [e.message for e in first] == r1.all_messages()
    loaded = await cs.load("c1")
    assert loaded is not None and loaded.messages == r1.all_messages()
    before = await _count(store, ns, "thread:c1")
    r2 = await agent.run("again", conversation=loaded)
    second = await cs.save(r2)
    # O(delta): only the new messages and one record version were appended
    assert len(second) == len(r2.new_messages())
    assert await _count(store, ns, "thread:c1") == before + len(second) + 1
    again = await cs.load("c1")
    assert again is not None and again.messages == r2.all_messages()
    # message_history= / all_messages(): the stored history drives the next run exactly
    r3 = await agent.run("third", message_history=again.messages)
    assert r3.all_messages()[: len(again.messages)] == again.messages
    entries = await cs.load_entries("c1")
    assert entries is not None and [e.message for e in entries] == r2.all_messages()
    assert await cs.read_entry(entries[1].id) == entries[1]


@conversation_store
async def test_conversation_stale_save_is_a_typed_conflict_and_writes_nothing(
    store: tether.Store, ns: str
) -> None:
    cs = TetherConversationStore(store, namespace=ns)
    agent = _agent()
    await cs.save(await agent.run("hello", conversation=Conversation(conversation_id="c1")))
    a = await cs.load("c1")
    b = await cs.load("c1")
    assert a is not None and b is not None
    await cs.save(await agent.run("from a", conversation=a))
    seq = await _count(store, ns, "thread:c1")
    with pytest.raises(ConversationConflict) as info:
        await cs.save(await agent.run("from b", conversation=b))
    assert isinstance(info.value, ConversationConflictError)
    assert info.value.code == "conversation_conflict"
    assert info.value.conversation_id == "c1"
    assert pickle.loads(pickle.dumps(info.value)).conversation_id == "c1"
    assert await _count(store, ns, "thread:c1") == seq
    # a new conversation under a taken id conflicts too
    with pytest.raises(ConversationConflictError):
        await cs.save(await agent.run("x", conversation=Conversation(conversation_id="c1")))


@conversation_store
async def test_conversation_fork_shares_history_and_delete_keeps_entries(
    store: tether.Store, ns: str
) -> None:
    cs = TetherConversationStore(store, namespace=ns)
    agent = _agent()
    r1 = await agent.run("hello", conversation=Conversation(conversation_id="c1"))
    await cs.save(r1)
    forked = await cs.fork("c1", at=len(r1.all_messages()), new_conversation_id="c2")
    assert forked.messages == r1.all_messages()
    # the fork stores no copy: thread:c2 holds only its record
    assert await _count(store, ns, "thread:c2") == 1
    r2 = await agent.run("on the fork", conversation=forked)
    await cs.save(r2)
    fresh = TetherConversationStore(store, namespace=ns)  # no cache: finds c1's entries
    c2 = await fresh.load("c2")
    assert c2 is not None and c2.messages == r2.all_messages()
    assert sorted(r.conversation_id for r in await fresh.read_records()) == ["c1", "c2"]
    c1 = await fresh.load("c1")
    assert c1 is not None
    await fresh.delete("c1")
    assert await fresh.load("c1") is None
    c2b = await fresh.load("c2")  # the fork still reads the entries it points at
    assert c2b is not None and c2b.messages == r2.all_messages()
    updated = await fresh.update("c2", title="about adding")
    assert updated.title == "about adding"
    assert (await fresh.read_record("c2")).title == "about adding"  # type: ignore[union-attr]


@conversation_store
async def test_conversation_message_that_is_not_a_message_is_refused(
    store: tether.Store, ns: str
) -> None:
    cs = TetherConversationStore(store, namespace=ns)
    conv = Conversation(conversation_id="c1", messages=["not a message"])  # type: ignore[list-item]
    with pytest.raises(InvalidMessage) as info:
        await cs.save(conv)
    assert info.value.code == "invalid_message"
    assert await _count(store, ns, "thread:c1") == 0


@conversation_store
async def test_messages_of_every_part_kind_read_back_equal(store: tether.Store, ns: str) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    TextPart("let me add"),
                    ToolCallPart("add", {"a": 2**53 - 1, "b": -0.5, "n": None}, tool_call_id="t1"),
                ]
            )
        return ModelResponse(parts=[TextPart("done: é ✓ \u2028")])

    agent: Agent[None, str] = Agent(FunctionModel(model))

    @agent.tool_plain
    def add(a: int, b: float, n: None = None) -> float:
        return a + b

    prompt = ["look", BinaryContent(data=b"\x00\xffpng", media_type="image/png")]
    cs = TetherConversationStore(store, namespace=ns)
    r = await agent.run(prompt, conversation=Conversation(conversation_id="parts"))
    await cs.save(r)
    loaded = await cs.load("parts")
    assert loaded is not None
    # Pydantic AI's own serializer reads a BinaryContent of an image back as the
    # BinaryImage subclass: the same JSON, so the same message to every store of its
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    dump = ModelMessagesTypeAdapter.dump_json
    assert dump(loaded.messages) == dump(r.all_messages())
    assert loaded.messages[1:] == r.all_messages()[1:]


# -- StepStore ----------------------------------------------------------------------


async def test_step_persistence_run_snapshot_and_ledger(store: tether.Store, ns: str) -> None:
    ss = TetherStepStore(store, namespace=ns)
    assert isinstance(ss, StepStore)
    agent = _agent(capabilities=[StepPersistence(store=ss, run_id="r1")])
    r = await agent.run("hello")
    kinds = [e.kind for e in await ss.list_events(run_id="r1")]
    assert kinds[0] == "run_started" and kinds[-1] == "run_completed"
    assert "tool_call_completed" in kinds
    assert [x.run_id for x in await ss.list_runs()] == ["r1"]
    assert await continue_run(ss, run_id="r1") == r.all_messages()
    effect = await ss.get_tool_effect(run_id="r1", tool_call_id="pyd_ai_tool_call_id__add")
    assert effect is not None and effect.status == "completed"
    assert effect.idempotency_key is not None and effect.idempotency_key.startswith("cw_")
    assert await ss.list_unresolved_tool_effects(run_id="r1") == []
    # a fresh store instance (a cold process) reads the same snapshot
    cold = TetherStepStore(store, namespace=ns)
    snap = await cold.latest_snapshot(run_id="r1")
    assert snap is not None and snap.messages == r.all_messages()
    # message_history= / all_messages(): the stored history drives the next run exactly
    r2 = await _agent().run("more", message_history=snap.messages)
    assert r2.all_messages()[: len(snap.messages)] == r.all_messages()


async def test_runs_of_one_conversation_store_its_history_once(
    store: tether.Store, ns: str
) -> None:
    ss = TetherStepStore(store, namespace=ns)
    history = None
    sizes = []
    for i in range(3):
        agent = _agent(capabilities=[StepPersistence(store=ss, run_id=f"r{i}")])
        r = await agent.run(f"turn {i}", message_history=history, conversation_id="chat")
        history = r.all_messages()
        messages = [
            n
            for n in await store.nodes(ns, "thread:pydantic-ai-steps:chat", limit=10_000)
            if n.payload.get("pai") == "m"
        ]
        if sizes:  # a later run appends its new messages only, not the history again
            assert len(messages) - sizes[-1] == len(r.new_messages())
        sizes.append(len(messages))
        assert (await ss.latest_snapshot(run_id=f"r{i}")).messages == history  # type: ignore[union-attr]
    assert [r.run_id for r in await ss.list_runs(conversation_id="chat")] == ["r0", "r1", "r2"]
    cold = TetherStepStore(store, namespace=ns)
    first = await cold.latest_snapshot(run_id="r0")
    assert first is not None and history is not None
    assert first.messages == history[: len(first.messages)]


async def test_snapshots_append_only_their_new_messages(store: tether.Store, ns: str) -> None:
    ss = TetherStepStore(store, namespace=ns)
    agent = _agent(capabilities=[StepPersistence(store=ss, run_id="r1")])
    r = await agent.run("hello")
    msgs = r.all_messages()
    from pydantic_ai_harness.step_persistence import ContinuableSnapshot

    scope = "thread:pydantic-ai-run:r2"
    await ss.save_snapshot(ContinuableSnapshot(run_id="r2", step_index=1, messages=msgs[:2]))
    mid = await _count(store, ns, scope)
    await ss.save_snapshot(ContinuableSnapshot(run_id="r2", step_index=2, messages=msgs))
    assert await _count(store, ns, scope) == mid + (len(msgs) - 2) + 1
    # a cold store (no cached line) extends the stored line the same way
    cold = TetherStepStore(store, namespace=ns)
    more = [*msgs, ModelRequest(parts=[UserPromptPart("next")])]
    before = await _count(store, ns, scope)
    await cold.save_snapshot(ContinuableSnapshot(run_id="r2", step_index=3, messages=more))
    assert await _count(store, ns, scope) == before + 2
    assert (await cold.latest_snapshot(run_id="r2")).messages == more  # type: ignore[union-attr]
    # a rewritten history (compaction) branches; the older snapshots still read back
    short = [ModelRequest(parts=[UserPromptPart("summary")]), *msgs[-1:]]
    await ss.save_snapshot(ContinuableSnapshot(run_id="r2", step_index=4, messages=short))
    snaps = await ss.list_snapshots(run_id="r2")
    assert [s.messages for s in snaps] == [msgs[:2], msgs, more, short]
    # a retried save (same key) writes nothing
    keyed = ContinuableSnapshot(run_id="r2", step_index=5, messages=more, idempotency_key="9:5:c")
    await ss.save_snapshot(keyed)
    n = await _count(store, ns, scope)
    await ss.save_snapshot(keyed)
    assert await _count(store, ns, scope) == n


async def test_tool_effect_resume_follows_the_runtime_rule(store: tether.Store, ns: str) -> None:
    ss = TetherStepStore(store, namespace=ns)
    started = ToolEffectRecord(tool_call_id="c1", tool_name="pay", run_id="r1", status="started")
    await ss.record_tool_effect(started)
    first = await ss.get_tool_effect(run_id="r1", tool_call_id="c1")
    assert first is not None and first.idempotency_key
    assert [x.tool_call_id for x in await ss.list_unresolved_tool_effects(run_id="r1")] == ["c1"]
    # a crash, then the call is re-issued: it carries the first attempt's key
    await ss.record_tool_effect(started)
    again = await ss.get_tool_effect(run_id="r1", tool_call_id="c1")
    assert again is not None and again.idempotency_key == first.idempotency_key
    done = ToolEffectRecord(
        tool_call_id="c1",
        tool_name="pay",
        run_id="r1",
        status="completed",
        idempotency_key=first.idempotency_key,
    )
    await ss.record_tool_effect(done)
    assert await ss.list_unresolved_tool_effects(run_id="r1") == []
    # the call has its result: a later start or a second result is dropped
    await ss.record_tool_effect(started)
    await ss.record_tool_effect(
        ToolEffectRecord(tool_call_id="c1", tool_name="pay", run_id="r1", status="failed")
    )
    assert await ss.get_tool_effect(run_id="r1", tool_call_id="c1") == done
    # the ledger is tether's tool_call / tool_result nodes
    kinds = [n.kind for n in await store.nodes(ns, "thread:pydantic-ai-run:r1")]
    assert kinds == ["tool_call", "tool_call", "tool_result"]


# -- MemoryStore --------------------------------------------------------------------


async def test_memory_store_versions_receipts_history_and_undo(
    store: tether.Store, ns: str
) -> None:
    ms = TetherMemoryStore(store, namespace=ns)
    assert isinstance(ms, MemoryStore) and isinstance(ms, SearchableMemoryStore)
    op = MemoryOperation(id="run-1:call-1", fingerprint="write:a")
    one = await ms.write("notes/a.md", "one", expected_version=None, operation=op)
    assert (await ms.write("notes/a.md", "one", expected_version=None, operation=op)).replayed
    with pytest.raises(MemoryOperationConflictError):
        await ms.get_operation(MemoryOperation(id=op.id, fingerprint="other"))
    two = await ms.write("notes/a.md", "two", expected_version=one.version)
    seq = await _count(store, ns, "app")
    with pytest.raises(MemoryConflictError) as info:
        await ms.write("notes/a.md", "stale", expected_version=one.version)
    assert isinstance(info.value, MemoryConflict) and info.value.code == "memory_conflict"
    assert await _count(store, ns, "app") == seq
    # tether's history reads every version; undo writes the one before back
    assert [v.content for v in await ms.history("notes/a.md")] == ["one", "two"]
    undone = await ms.undo("notes/a.md", expected_version=two.version)
    now = await ms.read("notes/a.md", max_chars=100)
    assert now is not None and now.content == "one" and now.version == undone.version
    gone = await ms.delete("notes/a.md", expected_version=undone.version)
    assert gone.existed and await ms.read("notes/a.md", max_chars=10) is None
    assert [v.content for v in await ms.history("notes/a.md")] == ["one", "two", "one", None]
    # the notebook is tether's semantic memory: the key is the path
    heads = await store.resource_heads(ns, "app", "semantic:memory:")
    assert set(heads) == {"semantic:memory:notes/a.md"}


@pytest.mark.parametrize("path", ["../x.md", "a//b.md", "a b.md", "", 3])
async def test_memory_store_refuses_bad_paths(store: tether.Store, ns: str, path: Any) -> None:
    ms = TetherMemoryStore(store, namespace=ns)
    with pytest.raises(InvalidMemoryPath) as info:
        await ms.write(path, "x", expected_version=None)
    assert info.value.code == "invalid_memory_path"
    assert isinstance(info.value, ValueError)
    assert await _count(store, ns, "app") == 0


async def test_memory_capability_writes_through_tether(store: tether.Store, ns: str) -> None:
    from pydantic_ai_harness.memory import Memory

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            args = {"content": "likes tea", "file": "prefs.md"}
            return ModelResponse(parts=[ToolCallPart("write_memory", args, tool_call_id="w1")])
        if len(messages) == 3:
            args = {"content": "likes coffee", "file": "prefs.md", "old_text": "likes tea"}
            return ModelResponse(parts=[ToolCallPart("write_memory", args, tool_call_id="w2")])
        return ModelResponse(parts=[TextPart("noted")])

    ms = TetherMemoryStore(store, namespace=ns, scope="user:alice")
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[Memory(store=ms)])
    await agent.run("remember this")
    (path,) = await ms.list_paths(limit=100)
    f = await ms.read(path, max_chars=10_000)
    assert f is not None and "likes coffee" in f.content and f.operation_id is not None
    versions = await ms.history(path)
    assert versions[-1].version == f.version and "likes tea" in (versions[0].content or "")
    # the capability's edit, undone with tether's history
    await ms.undo(path, expected_version=f.version)
    back = await ms.read(path, max_chars=10_000)
    assert back is not None and back.content == versions[0].content


async def test_memory_write_metadata_where_the_harness_has_it(store: tether.Store, ns: str) -> None:
    from dataclasses import fields

    from pydantic_ai_harness.memory import MemoryFile

    if "metadata" not in {f.name for f in fields(MemoryFile)}:
        pytest.skip("this pydantic-ai-harness has no write metadata (< 0.60)")
    from pydantic_ai_harness.memory import MetadataMemoryStore

    ms = TetherMemoryStore(store, namespace=ns)
    assert isinstance(ms, MetadataMemoryStore)
    m = await ms.write_with_metadata(
        "a.md", "x", expected_version=None, metadata={"by": "alice", "é": "✓"}
    )
    f = await ms.read("a.md", max_chars=10)
    assert f is not None and f.metadata == {"by": "alice", "é": "✓"}
    await ms.write("a.md", "y", expected_version=m.version)  # a plain write records none
    g = await ms.read("a.md", max_chars=10)
    assert g is not None and g.metadata is None


async def test_memory_search_by_meaning_through_tethers_recall(
    store: tether.Store, ns: str
) -> None:
    pytest.importorskip("numpy", reason="recall's vectors need the recall extra (numpy)")
    from tether.models.embeddings import HashingEmbedder

    ms = TetherMemoryStore(store, namespace=ns, embedder=HashingEmbedder(128))
    await ms.write("team/tea.md", "alice drinks green tea every morning", expected_version=None)
    await ms.write("team/code.md", "the build runs on two cores", expected_version=None)
    await ms.write("other/tea.md", "green tea elsewhere", expected_version=None)
    gone = await ms.write("team/old.md", "green tea, long ago", expected_version=None)
    await ms.delete("team/old.md", expected_version=gone.version)
    found = await ms.search(
        "team/", "green tea", limit=5, max_files=10, max_chars=200, max_file_chars=100
    )
    paths = [m.path for m in found.matches]
    assert paths[0] == "team/tea.md"  # closest in meaning, within the prefix only
    assert all(p.startswith("team/") for p in paths) and "team/old.md" not in paths
    assert sum(len(m.path) + len(m.snippet) for m in found.matches) <= 200


@conversation_store
async def test_concurrent_saves_of_one_conversation_one_wins(store: tether.Store, ns: str) -> None:
    agent = _agent()
    first = TetherConversationStore(store, namespace=ns)
    await first.save(await agent.run("hello", conversation=Conversation(conversation_id="c1")))
    writers = [TetherConversationStore(store, namespace=ns) for _ in range(4)]
    loaded = [await w.load("c1") for w in writers]
    results = [await agent.run(f"from {i}", conversation=c) for i, c in enumerate(loaded)]
    outcomes = await asyncio.gather(
        *(w.save(r) for w, r in zip(writers, results, strict=True)), return_exceptions=True
    )
    won = [i for i, o in enumerate(outcomes) if not isinstance(o, BaseException)]
    assert len(won) == 1
    assert all(
        isinstance(o, ConversationConflictError) for o in outcomes if o is not outcomes[won[0]]
    )
    stored = await first.load("c1")
    assert stored is not None and stored.messages == results[won[0]].all_messages()


async def test_concurrent_runs_of_one_conversation_read_back_exactly(
    store: tether.Store, ns: str
) -> None:
    base = await _agent().run("hello")
    history = base.all_messages()
    stores = [TetherStepStore(store, namespace=ns) for _ in range(3)]
    # each store has seen the shared history once (a cached line), then all run at once
    for i, ss in enumerate(stores):
        warm = _agent(capabilities=[StepPersistence(store=ss, run_id=f"w{i}")])
        await warm.run("warm", message_history=history, conversation_id="chat")
    runs = [
        _agent(capabilities=[StepPersistence(store=ss, run_id=f"r{i}")]).run(
            f"branch {i}", message_history=history, conversation_id="chat"
        )
        for i, ss in enumerate(stores)
    ]
    results = await asyncio.gather(*runs)
    cold = TetherStepStore(store, namespace=ns)
    for i, r in enumerate(results):
        snap = await cold.latest_snapshot(run_id=f"r{i}")
        assert snap is not None and snap.messages == r.all_messages()
