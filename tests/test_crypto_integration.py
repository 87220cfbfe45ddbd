"""Encryption at rest wired through the layers: the runtime binds threads to their users,
erasure reaches exactly the erased user's threads, and every view of erased data shows a
placeholder or raises ``KeyErased`` (never garbage, never a crash)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st

from _server_helpers import TOKEN, demo_agent, serve
from tether import InvalidRequest, control
from tether.cli import main
from tether.control import ErasureResult
from tether.core import scopes
from tether.core.graph import CausalNode
from tether.crypto import (
    Cipher,
    CipherError,
    KeyErased,
    MasterKey,
    bind_thread,
    bound_user,
    erase_user,
    erased_placeholders,
    is_erased,
)
from tether.projections import (
    AgentMemory,
    VarDecl,
    Variables,
    Window,
    execution_view,
    list_runs,
    load_conversation,
    project,
    semantic_memory,
)
from tether.projections.projection import flatten
from tether.server import Tokens, create_app
from tether.server.auth import dev_token
from tether.store import Store, open_store
from tether.store.in_memory import MemoryStore
from tether.store.txn import transact

NS = "default"


@pytest.fixture
def key() -> MasterKey:
    return MasterKey.generate()


@pytest.fixture
async def store(tmp_path: Path, key: MasterKey) -> AsyncIterator[Store]:
    s = await open_store(f"sqlite:///{tmp_path / 'enc.db'}", cipher=key)
    yield s
    await s.close()


async def _payloads(store: Store, scope: str) -> list[Any]:
    return [n.payload for n in await store.nodes(NS, scope)]


# --------------------------------------------------------------------------- runtime


async def test_agent_steps_bind_threads_so_erasure_takes_exactly_the_users_threads(
    store: Store,
) -> None:
    agent = demo_agent(store)
    await agent.step("What's the weather in Paris?", thread="t1", user="alice")
    await agent.step("Please note that my plan is gold.", thread="t1", user="alice")
    await agent.step("What's the weather in Rome?", thread="t2", user="bob")
    # A thread first written without a user stays under the namespace key.
    await agent.step("hello", thread="anon", user=None)
    await agent.step("What's the weather in Oslo?", thread="anon", user="alice")
    assert scopes.user("alice") in {s.scope for s in await store.list_scopes(NS)}
    bob_before = await _payloads(store, "thread:t2")
    bob_user_before = await _payloads(store, "user:bob")
    anon_before = await _payloads(store, "thread:anon")

    report = await erase_user(store, NS, "alice")
    assert report.keys_destroyed == 1
    assert report.threads == 1  # t1 only: "anon" was written before any binding

    reads: list[Callable[[], Awaitable[Any]]] = [
        lambda: store.nodes(NS, "thread:t1"),
        lambda: store.nodes(NS, "user:alice"),
        lambda: store.resource_heads(NS, "thread:t1", "var:"),
        lambda: store.resource_heads(NS, "user:alice", "var:"),
    ]
    for read in reads:
        with pytest.raises(KeyErased) as e:
            await read()
        assert e.value.code == "key_erased"
        assert e.value.details["owner"] == "user:alice"
    # Everyone else is untouched, and so is the thread that was never bound to alice.
    assert await _payloads(store, "thread:t2") == bob_before
    assert await _payloads(store, "user:bob") == bob_user_before
    assert await _payloads(store, "thread:anon") == anon_before
    later = await agent.step("What's the weather in Lima?", thread="t2", user="bob")
    assert later.status == "completed"
    assert "Lima" in str(await _payloads(store, "thread:t2"))

    # The erased thread cannot be continued: a typed error, and nothing written.
    head = await store.head(NS, "thread:t1")
    with pytest.raises(KeyErased):
        await agent.step("hello again", thread="t1", user="alice")
    assert await store.head(NS, "thread:t1") == head


async def test_a_user_who_comes_back_after_an_erasure_starts_afresh(store: Store) -> None:
    agent = demo_agent(store)
    await agent.step("Hello, my name is Alice.", thread="t1", user="alice")
    await agent.step("What's the weather in Paris?", thread="t1", user="alice")
    await erase_user(store, NS, "alice")
    # Her erased memories do not reach the model, her erased user variable reads as its
    # default (0), and the new version supersedes the erased one.
    back = await agent.step("What's the weather in Oslo?", thread="t3", user="alice")
    assert back.status == "completed", back.error
    decl = VarDecl(name="weather_asks", type="integer", scope="user", default=0)
    assert await Variables(store, NS, [decl], user="alice").get("weather_asks") == 1
    erased_view = Variables(store, NS, [decl], user="alice", erased_as_default=True)
    with erased_placeholders():
        assert [v.erased for v in await erased_view.history("weather_asks")] == [True, False]
    asked = await agent.step("what's my name?", thread="t3", user="alice")
    assert "don't know your name" in str(await _payloads(store, "thread:t3")), asked
    # The new thread is hers: erasing her again takes it.
    again = await erase_user(store, NS, "alice")
    assert again.keys_destroyed == 1 and again.threads == 2
    with pytest.raises(KeyErased):
        await store.nodes(NS, "thread:t3")


async def test_binding_is_free_once_bound_and_a_no_op_unencrypted(store: Store) -> None:
    agent = demo_agent(store)
    await agent.step("hello", thread="t1", user="alice")
    # Bound by the step: binding again to the same user is accepted, another user is not.
    assert await bind_thread(store, NS, "t1", "alice")
    assert not await bind_thread(store, NS, "t1", "bob", strict=False)
    # A step for another user on alice's thread leaves the binding alone.
    await agent.step("hello", thread="t1", user="bob")
    assert (await erase_user(store, NS, "bob")).threads == 0
    assert (await erase_user(store, NS, "alice")).threads == 1
    with pytest.raises(KeyErased):
        await store.nodes(NS, "thread:t1")

    plain = await open_store("memory://")
    try:
        result = await demo_agent(plain).step("hello", thread="t1", user="alice")
        assert result.status == "completed"
        assert not await bind_thread(plain, NS, "t1", "alice")
    finally:
        await plain.close()


# --------------------------------------------------------------------------- memory views


async def _erased_world(store: Store) -> dict[str, Any]:
    """alice (t1: name, weather, a note, an approved payment) and bob (t2); alice erased."""
    agent = demo_agent(store)
    await agent.step("Hello, my name is Alice.", thread="t1", user="alice")
    await agent.step("What's the weather in Paris?", thread="t1", user="alice")
    await agent.step("Please note that my plan is gold.", thread="t1", user="alice")
    paying = await agent.step("pay 40 eur to Bob", thread="t1", user="alice")
    await agent.approve("t1", paying.pending_approvals[0].call_id)
    await agent.step("What's the weather in Rome?", thread="t2", user="bob")
    runs = await list_runs(store, NS, "t1")
    nodes = await store.nodes(NS, "thread:t1")
    user_keys = sorted(await store.resource_heads(NS, "user:alice"))
    bob = await load_conversation(store, NS, "t2")
    await erase_user(store, NS, "alice")
    return {"runs": runs, "nodes": nodes, "user_keys": user_keys, "bob": bob}


async def test_conversation_view_of_an_erased_thread(store: Store) -> None:
    world = await _erased_world(store)
    with pytest.raises(KeyErased):
        await load_conversation(store, NS, "t1")
    with erased_placeholders():
        messages = await load_conversation(store, NS, "t1")
        window = await load_conversation(store, NS, "t1", policy=Window(size=3))
        bob = await load_conversation(store, NS, "t2")
    # One placeholder per goal (user) and inference (assistant), in order; no tool
    # message, since which call a result answered was erased with it.
    expected = [
        {"role": "user" if n.kind == "goal" else "assistant", "content": "[erased]"}
        for n in world["nodes"]
        if n.kind in ("goal", "inference")
    ]
    assert messages == expected and len(expected) > 8
    assert window == expected[-3:]
    assert bob == world["bob"]  # nobody else's view changes


def _node(seq: int, kind: str, payload: Any, parents: tuple[str, ...] = ()) -> CausalNode:
    return CausalNode(
        id=f"cw_{seq:024x}",
        kind=kind,
        parents=parents,
        payload=payload,
        created_at="",
        sequence=seq,
    )


ERASED = {"$erased": True}


@given(
    erased=st.lists(st.booleans(), min_size=9, max_size=9),
    llm=st.sampled_from(["agent", "other"]),
)
def test_projection_never_shows_a_tool_result_without_its_call(
    erased: list[bool], llm: str
) -> None:
    """Any subset of a two-turn thread erased: placeholders where goals and inferences
    were, and every tool message right after the assistant message that made its call."""
    call = {"id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}
    real = [
        ("goal", {"run": "r1", "input": "weather?", "llm": "agent", "metadata": {}}),
        ("inference", {"run": "r1", "llm": "agent", "content": None, "tool_calls": [call]}),
        ("tool_call", {"run": "r1", "llm": "agent", "call_id": "c1", "name": "get_weather"}),
        (
            "tool_result",
            {"run": "r1", "llm": "agent", "call_id": "c1", "name": "get_weather", "content": 18},
        ),
        ("inference", {"run": "r1", "llm": "agent", "content": "18 degrees", "tool_calls": []}),
        ("answer", {"run": "r1", "output": "18 degrees"}),
        ("goal", {"run": "r2", "input": "thanks", "llm": "agent", "metadata": {}}),
        ("inference", {"run": "r2", "llm": "agent", "content": "welcome", "tool_calls": []}),
        ("answer", {"run": "r2", "output": "welcome"}),
    ]
    nodes = [
        _node(i + 1, kind, ERASED if gone else payload)
        for i, ((kind, payload), gone) in enumerate(zip(real, erased, strict=True))
    ]
    messages = flatten(project(nodes, llm=llm))
    placeholders = [m for m in messages if m["content"] == "[erased]" and "tool_calls" not in m]
    assert len(placeholders) == sum(
        1
        for (kind, _), gone in zip(real, erased, strict=True)
        if gone and kind in ("goal", "inference")
    )
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            before = messages[i - 1]
            assert before["role"] in ("assistant", "tool")
            owner = next(x for x in reversed(messages[:i]) if x["role"] == "assistant")
            assert m["tool_call_id"] in [c["id"] for c in owner.get("tool_calls", [])]
    if llm == "other":  # only the placeholders reach another llm's view
        assert messages == placeholders


async def test_variables_agent_memory_and_semantic_memory_of_an_erased_user(
    store: Store,
) -> None:
    world = await _erased_world(store)
    decls = [
        VarDecl(name="weather_asks", type="integer", scope="user", default=0),
        VarDecl(name="last_answer", type="string", scope="thread", default=""),
    ]
    variables = Variables(store, NS, decls, thread="t1", user="alice")
    notes = AgentMemory(store, NS, scope="thread:t1", name="notes")
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: variables.get("weather_asks"),
        lambda: variables.all(),
        lambda: variables.history("last_answer"),
        lambda: notes.items(),
        lambda: notes.history(),
        lambda: semantic_memory(store, NS, "user:alice"),
    ]
    for call_ in calls:
        with pytest.raises(KeyErased):
            await call_()
    with erased_placeholders():
        # An erased value is the placeholder, never the default (0 / "") nor garbage.
        assert is_erased(await variables.get("weather_asks"))
        values = await variables.all()
        assert set(values) == {"weather_asks", "last_answer"}
        assert all(is_erased(v) for v in values.values())
        history = await variables.history("weather_asks")
        assert history and all(v.erased and is_erased(v.value) for v in history)
        assert history[0].to_dict()["erased"] is True
        assert await notes.items() == {"plan": ERASED}
        assert await notes.recall("plan") == ERASED
        assert [getattr(e, "op", None) for e in await notes.history()] == ["erased"]
        assert [getattr(v, "content", None) for v in await notes.history("plan")] == [ERASED]
        with pytest.raises(KeyErased):
            await notes.undo()
        memory = await semantic_memory(store, NS, "user:alice")
        wanted = {
            k.removeprefix("semantic:") for k in world["user_keys"] if k.startswith("semantic:")
        }
        assert set(memory) == wanted and wanted
        assert all(is_erased(v) for v in memory.values())
    # The user comes back: new writes get a new key; the old versions stay erased.
    await variables.set("weather_asks", "5")
    assert await variables.get("weather_asks") == 5
    with erased_placeholders():
        history = await variables.history("weather_asks")
    assert [v.erased for v in history] == [True] * (len(history) - 1) + [False]
    assert history[-1].value == 5


async def test_execution_views_of_an_erased_thread(store: Store) -> None:
    world = await _erased_world(store)
    run = world["runs"][0].run
    with pytest.raises(KeyErased):
        await list_runs(store, NS, "t1")
    with pytest.raises(KeyErased):
        await execution_view(store, NS, "t1", run)
    with erased_placeholders():
        assert await list_runs(store, NS, "t1") == []  # their run ids were erased
        with pytest.raises(KeyErased) as e:
            await execution_view(store, NS, "t1", run)
        assert e.value.details["erased_runs"] == len(world["runs"])
        bob = await list_runs(store, NS, "t2")
    assert [r.status for r in bob] == ["completed"]


# --------------------------------------------------------------------------- control plane


def _report(result: control.StateOperationResult, name: str) -> control.StateStoreReport:
    return next(r for r in result.stores if r.name == name)


async def test_describe_and_history_show_erased_data_as_erased(store: Store) -> None:
    # A tool's own state in alice's user scope, erased with her.
    await transact(store, NS, lambda t: t.semantic("user:alice", "tool_state", "cart/items", [1]))
    world = await _erased_world(store)
    nodes = world["nodes"]
    d = await control.describe(store, namespace=NS, thread="t1", include_data=True)
    graph = _report(d, "graph")
    assert graph.node_count == len(nodes)  # ids, kinds and sequences remain
    conv = _report(d, "conversation")
    assert conv.data and {m["content"] for m in conv.data} == {"[erased]"}
    assert conv.metadata["erased"] == len(conv.data)
    variables = _report(d, "variables")
    assert variables.data == {"last_answer": ERASED}
    assert variables.metadata["erased"] == 1
    memory = _report(d, "memory")  # the thread's agent memory "notes"
    assert memory.data == {"agent_memory:notes/plan": ERASED}
    for name in ("executions", "task", "flow"):
        r = _report(d, name)
        assert r.data == [], name  # their run ids were erased: counted, not listed
    assert _report(d, "executions").metadata["erased"] == len(world["runs"])
    assert _report(d, "task").metadata["erased"] == len(world["runs"])
    user = await control.describe(store, namespace=NS, user="alice", include_data=True)
    assert all(is_erased(v) for v in _report(user, "variables").data.values())
    assert all(is_erased(v) for v in _report(user, "memory").data.values())
    assert "tool_state:cart/items" not in _report(user, "memory").data
    assert _report(user, "tools").data == {"cart": {"items": ERASED}}
    assert _report(user, "tools").metadata["erased"] == 1
    # Bob's thread: nothing erased, nothing counted.
    bob = await control.describe(store, namespace=NS, thread="t2", include_data=True)
    assert all("erased" not in r.metadata for r in bob.stores)
    assert _report(bob, "conversation").data == world["bob"]
    # The result crosses JSON unchanged.
    assert control.StateOperationResult.from_dict(d.to_dict()) == d

    h = await control.history(store, namespace=NS, thread="t1", limit=1000)
    assert [(n["id"], n["kind"], n["sequence"]) for n in h.nodes] == [
        (n.id, n.kind, n.sequence) for n in nodes
    ]
    assert all(n["payload"] == ERASED for n in h.nodes)
    assert h.metadata["erased"] == len(nodes)


@pytest.mark.parametrize("on_erased", ["raise", "placeholder"])
async def test_export_verify_fork_and_steps_of_erased_data_raise_key_erased(
    tmp_path: Path, key: MasterKey, on_erased: Any
) -> None:
    url = f"sqlite:///{tmp_path / 'enc.db'}"
    async with await open_store(url, cipher=key) as first:
        world = await _erased_world(first)
    # Even a store that shows placeholders everywhere never exports or copies them.
    store = await open_store(url, cipher=Cipher(masters=(key,), on_erased=on_erased))
    try:
        chunks: list[bytes] = []
        with pytest.raises(KeyErased):
            async for chunk in control.export_chunks(store, NS, "thread:t1"):
                chunks.append(chunk)
        assert chunks == []  # not one byte of a snapshot that would lie
        with erased_placeholders(), pytest.raises(KeyErased):
            await control.export(store, namespace=NS, thread="t1")
        # Verify checks what erasure left and counts what it could not check.
        checked = (await control.verify(store, namespace=NS, thread="t1")).checks[0]
        assert checked.ok and checked.erased == checked.checked == len(world["nodes"])
        with erased_placeholders(), pytest.raises(KeyErased):
            await control.fork(store, namespace=NS, thread="t1", node=world["nodes"][-1].id)
        assert "thread:t1-copy" not in {s.scope for s in await store.list_scopes(NS)}
        # The runtime plans from real payloads only: a typed error, nothing written.
        agent = demo_agent(store)
        head = await store.head(NS, "thread:t1")
        retries: tuple[Callable[[], Awaitable[Any]], ...] = (
            lambda: agent.step("hello", thread="t1", user="alice"),
            lambda: agent.resume("t1"),
            lambda: agent.approve("t1", "call_x"),
        )
        for call_ in retries:
            with pytest.raises(KeyErased):
                await call_()
        assert await store.head(NS, "thread:t1") == head
        # Bob's thread exports and verifies as before.
        assert (await control.verify(store, namespace=NS, thread="t2")).ok
        assert (await control.export(store, namespace=NS, thread="t2")).snapshot
    finally:
        await store.close()


async def test_a_fork_of_a_users_thread_is_erased_with_the_user(store: Store) -> None:
    agent = demo_agent(store)
    await agent.step("What's the weather in Rome?", thread="t2", user="bob")
    head = await store.head(NS, "thread:t2")
    fork = await control.fork(
        store, namespace=NS, thread="t2", node=head.frontier[0], new_thread="f"
    )
    assert fork.created == "thread:f"
    assert await bound_user(store, NS, "f") == "bob"
    assert (await control.erase_user(store, NS, "bob")).threads == 2
    with pytest.raises(KeyErased):
        await store.nodes(NS, "thread:f")


async def test_the_erase_operation(store: Store) -> None:
    world = await _erased_world(store)  # tether.crypto.erase_user: alice's key only
    assert world["runs"]
    # Her runs' index entries live in her threads, sealed with her key: destroying the
    # key took them out of the index already, with nothing left to remove.
    assert not [r for r in (await control.runs(store, namespace=NS)).runs if r.user == "alice"]
    first = await control.erase_user(store, NS, "alice")
    assert first.keys_destroyed == 0 and not first.erased  # the key was gone already
    assert first.unindexed_runs == 0
    again = await control.erase_user(store, NS, "alice")  # harmless
    assert again.keys_destroyed == 0 and again.unindexed_runs == 0
    agent = demo_agent(store)
    await agent.step("What's the weather in Oslo?", thread="t3", user="carol")
    await agent.step("hello", thread="t4", user="carol")
    before = (await agent.runs()).runs
    assert {r.user for r in before} >= {"carol", "bob"}

    result = await control.erase_user(store, NS, "carol")
    assert result.erased and result.keys_destroyed == 1 and len(result.key_ids) == 1
    assert result.threads == 2 and result.unindexed_runs == 2
    assert {r.user for r in (await agent.runs()).runs} == {"bob"}
    assert ErasureResult.from_dict(result.to_dict()) == result
    assert result.to_dict()["operation"] == "erase"
    for bad in (
        {**result.to_dict(), "extra": 1},
        {"namespace": NS},
        {**result.to_dict(), "threads": -1},
    ):
        with pytest.raises(InvalidRequest):
            ErasureResult.from_dict(bad)
    with pytest.raises(InvalidRequest):
        await control.erase_user(store, NS, "")


async def test_erasing_needs_an_encrypted_store() -> None:
    plain = await open_store("memory://")
    try:
        await demo_agent(plain).step("hello", thread="t1", user="alice")
        runs = (await demo_agent(plain).runs()).runs
        with pytest.raises(CipherError) as e:
            await control.erase_user(plain, NS, "alice")
        assert e.value.code == "not_encrypted"
        assert (await demo_agent(plain).runs()).runs == runs  # nothing changed
    finally:
        await plain.close()


# --------------------------------------------------------------------------- CLI


def _cli(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env, input=input, catch_exceptions=False)


@pytest.fixture
def encrypted_db(tmp_path: Path, key: MasterKey) -> tuple[str, dict[str, str]]:
    """A SQLite file an agent worked on (alice on t1, bob on t2), and the CLI's env."""
    path = str(tmp_path / "cli.db")

    async def fill() -> None:
        async with await open_store(path, cipher=key) as s:
            agent = demo_agent(s)
            await agent.step("What's the weather in Paris?", thread="t1", user="alice")
            await agent.step("What's the weather in Rome?", thread="t2", user="bob")

    asyncio.run(fill())
    return path, {"TETHER_MASTER_KEY": key.to_base64()}


def test_cli_opens_encrypted_stores_with_the_key_from_the_environment(
    encrypted_db: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    db, env = encrypted_db
    no_key = _cli("--store", db, "describe", "--thread", "t1", env={"TETHER_MASTER_KEY": ""})
    assert no_key.exit_code == 1 and "error [missing_key]" in no_key.stderr
    wrong = _cli(
        "--store", db, "threads", env={"TETHER_MASTER_KEY": MasterKey.generate().to_base64()}
    )
    assert wrong.exit_code == 1 and "error [wrong_key]" in wrong.stderr
    ok = _cli("--store", db, "--json", "describe", "--thread", "t1", "--data", env=env)
    assert ok.exit_code == 0, ok.stderr
    conversation = next(r for r in orjson.loads(ok.stdout)["stores"] if r["name"] == "conversation")
    assert "Paris" in str(conversation["data"])
    # A plaintext store refuses a key rather than mixing plaintext and ciphertext.
    plain = str(tmp_path / "plain.db")
    asyncio.run(_plain_store(plain))
    mixed = _cli("--store", plain, "threads", env=env)
    assert mixed.exit_code == 1 and "error [not_encrypted]" in mixed.stderr
    refused = _cli("--store", plain, "--json", "erase-user", "--user", "alice", "--yes")
    assert refused.exit_code == 1
    assert orjson.loads(refused.stderr)["code"] == "not_encrypted"


async def _plain_store(path: str) -> None:
    async with await open_store(path) as s:
        await demo_agent(s).step("hello", thread="t1", user="alice")


def test_cli_erase_user(encrypted_db: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    db, env = encrypted_db
    base = ("--store", db, "--json")
    declined = _cli(*base, "erase-user", "--user", "alice", env=env, input="y\n")
    # no terminal: not asked (a piped "y" is no answer), refused naming --yes, as JSON
    assert declined.exit_code == 2
    refusal = orjson.loads(declined.stderr)
    assert refusal["code"] == "confirmation_required" and "--yes" in refusal["message"]
    assert "erase user alice" in refusal["message"]
    assert _cli(*base, "history", "--thread", "t1", env=env).stdout.count('"$erased"') == 0
    bad = _cli(*base, "erase-user", "--user", "", "--yes", env=env)
    assert bad.exit_code == 2

    r = _cli(*base, "erase-user", "--user", "alice", "--yes", env=env)
    assert r.exit_code == 0, r.stderr
    result = ErasureResult.from_dict(orjson.loads(r.stdout))
    assert (result.user, result.keys_destroyed, result.threads) == ("alice", 1, 1)
    assert result.unindexed_runs == 1
    human = _cli("--store", db, "erase-user", "--user", "alice", "--yes", env=env)
    assert human.exit_code == 0 and "nothing left to erase for user alice" in human.stdout

    # What remains reads as erased; what would lie fails with a typed error.
    history = orjson.loads(_cli(*base, "history", "--thread", "t1", env=env).stdout)
    assert history["nodes"] and all(n["payload"] == ERASED for n in history["nodes"])
    shown = _cli("--store", db, "describe", "--thread", "t1", "--data", env=env)
    assert shown.exit_code == 0 and "[erased]" in shown.stdout
    out = tmp_path / "t1.json"
    for args in (("export", "--thread", "t1"), ("export", "--thread", "t1", "-o", str(out))):
        failed = _cli(*base, *args, env=env)
        assert failed.exit_code == 1 and failed.stdout == ""
        assert orjson.loads(failed.stderr)["code"] == "key_erased"
    assert not out.exists() and not Path(f"{out}.part").exists()
    verify = _cli("--store", db, "verify", "--thread", "t1", env=env)
    assert verify.exit_code == 0 and "erased)" in verify.stdout
    # Bob is untouched.
    assert _cli("--store", db, "verify", "--thread", "t2", env=env).exit_code == 0


# --------------------------------------------------------------------------- HTTP


def _http(app: Any, token: str = TOKEN) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://tether",
        headers={"Authorization": f"Bearer {token}"},
    )


async def test_http_erase_and_every_view_of_erased_data(store: Store) -> None:
    agent = demo_agent(store)
    await agent.step("What's the weather in Paris?", thread="t1", user="alice")
    await agent.step("Please note that my plan is gold.", thread="t1", user="alice")
    await agent.step("What's the weather in Rome?", thread="t2", user="bob")
    run = (await list_runs(store, NS, "t1"))[0].run
    node = (await store.nodes(NS, "thread:t1"))[0].id
    reader = "reader-token-" + "9" * 20
    tokens = Tokens(
        [
            dev_token(TOKEN, name="admin", grants=["state.*", "agent.*"]),
            dev_token(reader, name="reader", grants=["state.describe", "state.history"]),
        ]
    )
    app = create_app(store, tokens=tokens, agent=demo_agent)
    async with _http(app) as c, _http(app, reader) as r:
        denied = await r.post("/v1/ns/default/users/alice/erase")
        assert denied.status_code == 403 and denied.json()["details"]["grant"] == "state.erase"
        assert (await r.get("/v1/ns/default/threads/t1/history")).text.count("$erased") == 0

        erased = await c.post("/v1/ns/default/users/alice/erase")
        assert erased.status_code == 200, erased.text
        result = ErasureResult.from_dict(erased.json())
        assert (result.keys_destroyed, result.threads, result.unindexed_runs) == (1, 1, 2)

        # What remains is shown as erased...
        d = (await r.get("/v1/ns/default/threads/t1", params={"include_data": True})).json()
        stores = {s["name"]: s for s in d["stores"]}
        assert {m["content"] for m in stores["conversation"]["data"]} == {"[erased]"}
        assert stores["variables"]["data"] == {"last_answer": ERASED}
        assert (
            stores["executions"]["data"] == [] and stores["executions"]["metadata"]["erased"] == 2
        )
        history = (await r.get("/v1/ns/default/threads/t1/history")).json()
        assert history["nodes"] and all(n["payload"] == ERASED for n in history["nodes"])
        for path, params in (
            ("/v1/ns/default/resources", {"scope": "user:alice"}),
            ("/v1/ns/default/resources", {"scope": "thread:t1", "prefix": "var:"}),
        ):
            got = await c.get(path, params=params)
            assert got.status_code == 200, got.text
            resources = got.json()["resources"]
            assert resources and all(n["payload"] == ERASED for n in resources.values())
        versions = await c.get(
            "/v1/ns/default/versions", params={"scope": "thread:t1", "key": "var:last_answer"}
        )
        assert [v["payload"] for v in versions.json()["versions"]] == [ERASED]
        # ...and what would have to lie answers 410 key_erased (a JSON error, no stream).
        gone = [
            await c.get("/v1/ns/default/threads/t1/export"),
            await c.get(f"/v1/ns/default/threads/t1/runs/{run}"),
            await c.post("/v1/ns/default/threads/t1/fork", json={"node": node}),
            await c.post("/state/export", json={"thread": "t1"}),
            await c.post("/v1/ns/default/threads/t1/step", json={"input": "hi", "user": "alice"}),
            await c.get("/v1/ns/default/threads/t1/task"),
            await c.get("/v1/ns/default/threads/t1/approvals"),
        ]
        for g in gone:
            assert g.status_code == 410, (g.request.url, g.text)
            assert g.headers["content-type"] == "application/json"
            assert g.json()["code"] == "key_erased"
        # The run index no longer holds alice's runs (their metadata named her).
        listed = (await r.get("/v1/ns/default/runs")).json()
        assert [x["thread"] for x in listed["runs"]] == ["t2"] and "alice" not in str(listed)
        verified = (await c.get("/v1/ns/default/threads/t1/verify")).json()
        assert verified["ok"] is True and verified["checks"][0]["erased"] > 0
        # Bob is untouched.
        assert (await c.get("/v1/ns/default/threads/t2/verify")).json()["ok"] is True
        assert (await r.get("/v1/ns/default/threads/t2/task")).json()["status"] == "completed"
        assert "$erased" not in (await c.get("/v1/ns/default/threads/t2/history")).text


async def test_http_erase_on_a_plaintext_store_is_a_conflict() -> None:
    plain = await open_store("memory://")
    try:
        app = create_app(plain, tokens=Tokens.single(TOKEN))
        async with _http(app) as c:
            got = await c.post("/v1/ns/default/users/alice/erase")
            assert got.status_code == 409 and got.json()["code"] == "not_encrypted"
            bad = await c.post("/v1/ns/default/users/%20x%0A/erase")
            assert bad.status_code == 400
    finally:
        await plain.close()


async def test_a_server_given_a_url_uses_the_master_key_from_the_environment(
    tmp_path: Path, key: MasterKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'srv.db'}"
    async with await open_store(url, cipher=key) as s:
        await demo_agent(s).step("What's the weather in Paris?", thread="t1", user="alice")
    monkeypatch.delenv("TETHER_MASTER_KEY", raising=False)
    monkeypatch.delenv("TETHER_MASTER_KEY_FILE", raising=False)
    without = create_app(url, tokens=Tokens.single(TOKEN))
    async with _http(without) as c:
        got = await c.get("/v1/ns/default/threads/t1")
        assert got.status_code == 503 and got.json()["code"] == "missing_key"
    await without.state.tether.close()
    monkeypatch.setenv("TETHER_MASTER_KEY", key.to_base64())
    app = create_app(url, tokens=Tokens.single(TOKEN))
    try:
        async with _http(app) as c:
            got = await c.get("/v1/ns/default/threads/t1", params={"include_data": True})
            assert got.status_code == 200 and "Paris" in got.text
            assert (await c.post("/v1/ns/default/users/alice/erase")).status_code == 200
            assert "[erased]" in (await c.get("/v1/ns/default/threads/t1?include_data=true")).text
    finally:
        await app.state.tether.close()
    with pytest.raises(InvalidRequest):
        create_app(MemoryStore(), tokens=Tokens.single(TOKEN), cipher=key)


@pytest.mark.slow
def test_tether_serve_opens_an_encrypted_store(
    tmp_path: Path, key: MasterKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "served.db"

    async def fill() -> None:
        async with await open_store(str(db), cipher=key) as s:
            await demo_agent(s).step("What's the weather in Paris?", thread="t1", user="alice")

    asyncio.run(fill())
    monkeypatch.setenv("TETHER_MASTER_KEY", key.to_base64())
    with serve(db, tmp_path / "serve.log") as served:
        base = served.url.rstrip("/")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        shown = httpx.get(f"{base}/v1/ns/default/threads/t1?include_data=true", headers=auth)
        assert shown.status_code == 200 and "Paris" in shown.text
        erased = httpx.post(f"{base}/v1/ns/default/users/alice/erase", headers=auth)
        assert erased.status_code == 200 and erased.json()["keys_destroyed"] == 1
        export = httpx.get(f"{base}/v1/ns/default/threads/t1/export", headers=auth)
        assert export.status_code == 410 and export.json()["code"] == "key_erased"


# --------------------------------------------------------------------------- inspector


@pytest.mark.slow
def test_the_inspector_shows_erased_data_as_erased(
    tmp_path: Path, key: MasterKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_inspector_browser import ARGS, CHROMIUM, _need_browser

    sync_playwright = _need_browser()
    db = tmp_path / "inspected.db"

    async def fill() -> None:
        async with await open_store(str(db), cipher=key) as s:
            agent = demo_agent(s)
            await agent.step("Hello, my name is Alice.", thread="t1", user="alice")
            await agent.step("What's the weather in Paris?", thread="t1", user="alice")
            await agent.step("Please note that my plan is gold.", thread="t1", user="alice")
            await agent.step("What's the weather in Rome?", thread="t2", user="bob")
            await control.erase_user(s, NS, "alice")

    asyncio.run(fill())
    monkeypatch.setenv("TETHER_MASTER_KEY", key.to_base64())
    problems: list[str] = []
    with (
        serve(db, tmp_path / "serve.log", "--agent", "_server_helpers:demo_agent") as served,
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on(
                "console",
                lambda m: (
                    problems.append(m.text)
                    if m.type == "error" and "status of 410" not in m.text  # the Export below
                    else None
                ),
            )
            page.goto(served.url)
            page.fill("#token", TOKEN)
            page.click("#connect")
            page.click("[data-thread='t1']")
            page.wait_for_selector("svg.graph")
            nodes = page.locator("g.node")
            assert nodes.count() == page.locator("g.node-erased").count() > 5
            assert "erased" in page.inner_text(".thread-stats")
            page.locator("g.node[data-kind='goal']").first.click()
            panel = page.inner_text("#node-panel")
            assert "This payload was erased" in panel and "Alice" not in panel
            assert page.locator("[data-paneltab='state']").count() == 0
            page.screenshot(path=str(tmp_path / "inspector-erased-node.png"))

            page.click("[data-tab='conversation']")
            page.wait_for_selector(".msg-erased")
            assert page.locator(".msg").count() == page.locator(".msg-erased").count()
            page.click("[data-tab='variables']")
            page.wait_for_selector("tr.erased[data-key='var:last_answer']")
            assert "(erased)" in page.inner_text("tr[data-key='var:last_answer']")
            page.click("[data-tab='memory']")
            page.wait_for_selector("tr.erased[data-key='semantic:agent_memory:notes/plan']")
            row = page.inner_text("tr[data-key='semantic:agent_memory:notes/plan']")
            assert "notes/plan" in row and "(erased)" in row and "gold" not in row
            page.click("[data-tab='runs']")
            page.wait_for_selector(".erased-runs")
            assert "3 runs were erased" in page.inner_text(".erased-runs")
            page.click("text=Export")
            page.wait_for_selector(".toast-bad")
            assert "410 key_erased" in page.inner_text(".toast-bad")
            page.screenshot(path=str(tmp_path / "inspector-erased.png"))

            # Bob's thread is shown as before.
            page.click("[data-thread='t2']")
            page.click("[data-tab='conversation']")
            page.wait_for_selector(".chat")
            assert "Rome" in page.inner_text(".chat")
            assert page.locator(".msg-erased").count() == 0
        finally:
            browser.close()
    assert problems == []
