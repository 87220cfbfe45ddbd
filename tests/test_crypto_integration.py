"""Encryption at rest wired through the layers: the runtime binds threads to their users,
erasure reaches exactly the erased user's threads, and every view of erased data shows a
placeholder or raises ``KeyErased`` (never garbage, never a crash)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from _server_helpers import demo_agent
from tether import scopes
from tether.crypto import KeyErased, MasterKey, bind_thread, erase_user
from tether.store import Store, open_store

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

    reads = [
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
