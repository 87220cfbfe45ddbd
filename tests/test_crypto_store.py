"""Encryption at rest through the Store contract, on every backend.

Each test opens, closes and reopens one database (memory, SQLite file, Redis prefix,
PostgreSQL schema) with different master keys, as separate processes would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from _crypto_backends import Database, backend_params, database_fixture, sqlite_tables
from tether import Transaction
from tether.control.snapshot import export_snapshot, import_snapshot, verify_scope
from tether.core import scopes
from tether.core.graph import CausalNode
from tether.crypto import (
    Cipher,
    CipherError,
    EncryptedStore,
    KeyErased,
    MasterKey,
    MissingKey,
    NotEncrypted,
    WrongKey,
    bind_thread,
    cipher_from_env,
    erase_user,
    erased_placeholders,
    is_erased,
    rotate,
)
from tether.store import Store
from tether.store.in_memory import MemoryStore

NS = "acme"


@pytest.fixture(params=backend_params())
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    async for d in database_fixture(request, tmp_path):
        yield d


async def _write(store: Store, scope: str, payload: Any, **kw: Any) -> CausalNode:
    txn = Transaction(store, NS)
    node = await txn.append(scope, kw.pop("kind", "goal"), payload, **kw)
    await txn.commit()
    return node


async def _everything(store: Store, scope: str) -> list[Any]:
    """Read the scope through every read method of the contract."""
    nodes = await store.nodes(NS, scope)
    out: list[Any] = [n.payload for n in nodes]
    out += [n.payload for n in (await store.get_nodes(NS, scope, [n.id for n in nodes])).values()]
    out += [n.payload for n in await store.nodes(NS, scope, descending=True, limit=2)]
    for key, head in (await store.resource_heads(NS, scope)).items():
        out.append(head.payload)
        again = await store.resource_head(NS, scope, key)
        assert again is not None
        out.append(again.payload)
        out += [v.payload for v in await store.versions(NS, scope, key)]
    return out


async def test_payloads_round_trip_and_identities_are_those_of_plaintext(db: Database) -> None:
    key = MasterKey.generate()
    store = await db.open(key)
    assert isinstance(store, EncryptedStore)
    node = await _write(store, "thread:t1", {"text": "hello", "n": [1, 2.5, None]})
    var = await _write(store, "user:u1", {"v": 1}, kind="resource", resource_key="var:x")
    # Identity is computed over the plaintext: the same node in a plain store has the same id.
    plain = MemoryStore()
    assert (await _write(plain, "thread:t1", {"text": "hello", "n": [1, 2.5, None]})).id == node.id
    got = await store.nodes(NS, "thread:t1")
    assert [(n.id, n.payload) for n in got] == [(node.id, node.payload)]
    assert (await store.resource_head(NS, "user:u1", "var:x")) == var
    # export -> import into a plain store -> export gives the same bytes; verify passes.
    exported = await export_snapshot(store, NS, "thread:t1")
    await import_snapshot(plain, NS, "thread:copy", exported)
    assert await export_snapshot(plain, NS, "thread:copy") == exported
    await import_snapshot(store, NS, "thread:back", exported)
    assert await export_snapshot(store, NS, "thread:back") == exported
    assert (await verify_scope(store, NS, "thread:t1")).ok
    await store.close()
    again = await db.open(key)
    assert await export_snapshot(again, NS, "thread:t1") == exported


async def test_wrong_key_at_open_writes_nothing(db: Database) -> None:
    key = MasterKey.generate()
    store = await db.open(key)
    await _write(store, "user:u1", {"x": 1})
    await store.close()
    before = await db.raw_bytes() if db.kind != "memory" else b""
    for wrong in (MasterKey.generate(), [MasterKey.generate(), MasterKey.generate()]):
        with pytest.raises(WrongKey) as e:
            await db.open(wrong)
        assert e.value.code == "wrong_key"
    if db.kind != "memory":
        assert await db.raw_bytes() == before
    store = await db.open(key)  # the right key still opens it, and the data is intact
    assert [n.payload for n in await store.nodes(NS, "user:u1")] == [{"x": 1}]


async def test_missing_key_at_open(db: Database) -> None:
    store = await db.open(MasterKey.generate())
    await _write(store, "app", {"x": 1})
    await store.close()
    with pytest.raises(MissingKey) as e:
        await db.open(None)
    assert e.value.code == "missing_key"


async def test_plaintext_store_is_not_opened_with_a_cipher(db: Database, tmp_path: Path) -> None:
    plain = await db.open(None)
    await _write(plain, "app", {"x": 1})
    await plain.close()
    with pytest.raises(NotEncrypted):
        await db.open(MasterKey.generate())
    if db.kind == "sqlite":
        assert not [t for t in sqlite_tables(tmp_path / "crypto.db") if "crypto" in t]
    plain = await db.open(None)  # still a plain store: nothing was registered
    assert [n.payload for n in await plain.nodes(NS, "app")] == [{"x": 1}]


async def test_rotation_rewraps_without_touching_payloads(db: Database) -> None:
    old, new = MasterKey.generate(), MasterKey.generate()
    store = await db.open(old)
    for scope in ("user:u1", "user:u2", "app"):
        await _write(store, scope, {"scope": scope})
    sealed = await db.sealed_payloads()
    report = await rotate(store, new)
    assert report.rewrapped == 3 and report.master_id == new.key_id
    assert report.retired == (old.key_id,)
    assert [n.payload for n in await store.nodes(NS, "user:u1")] == [{"scope": "user:u1"}]
    await store.close()
    with pytest.raises(WrongKey):
        await db.open(old)
    store = await db.open(new)
    for scope in ("user:u1", "user:u2", "app"):
        assert [n.payload for n in await store.nodes(NS, scope)] == [{"scope": scope}]
    assert await db.sealed_payloads() == sealed  # the very same ciphertexts


async def test_old_master_reads_during_a_rotation(db: Database) -> None:
    old, new = MasterKey.generate(), MasterKey.generate()
    store = await db.open(old)
    await _write(store, "user:u1", {"v": "before"})
    await store.close()
    # Deploy step 1: every process gets [new, old]; new data keys are wrapped by new.
    both = await db.open([new, old])
    await _write(both, "user:u2", {"v": "during"})
    assert [n.payload for n in await both.nodes(NS, "user:u1")] == [{"v": "before"}]
    await both.close()
    # A process left with only the old key still opens, but not the keys wrapped by new.
    lagging = await db.open(old)
    assert [n.payload for n in await lagging.nodes(NS, "user:u1")] == [{"v": "before"}]
    with pytest.raises(WrongKey):
        await lagging.nodes(NS, "user:u2")
    await lagging.close()
    # Step 2: rotate; step 3: the old key can be destroyed.
    both = await db.open(Cipher(masters=(new, old)))
    assert (await rotate(both)).rewrapped == 1
    await both.close()
    only_new = await db.open(new)
    assert [n.payload for n in await only_new.nodes(NS, "user:u1")] == [{"v": "before"}]
    assert [n.payload for n in await only_new.nodes(NS, "user:u2")] == [{"v": "during"}]
    await only_new.close()
    with pytest.raises(WrongKey):
        await db.open(old)


async def test_erasing_one_user_leaves_the_others_readable(db: Database) -> None:
    key = MasterKey.generate()
    store = await db.open(key)
    assert await bind_thread(store, NS, "ta", "alice")
    assert await bind_thread(store, NS, "tb", "bob")
    for user in ("alice", "bob"):
        await _write(
            store, scopes.user(user), {"pref": user}, kind="resource", resource_key="var:p"
        )
        await _write(
            store, scopes.user(user), {"pref": user + "2"}, kind="resource", resource_key="var:p"
        )
    await _write(store, "thread:ta", {"text": "alice's chat"})
    await _write(store, "thread:tb", {"text": "bob's chat"})
    await _write(store, "thread:tn", {"text": "nobody's chat"})
    await _write(store, "app", {"text": "app"})
    alice_nodes = await store.nodes(NS, "user:alice")

    report = await erase_user(store, NS, "alice")
    assert report.keys_destroyed == 1 and report.threads == 1
    assert report.to_dict()["keysDestroyed"] == 1
    ta = await store.head(NS, "thread:ta")
    reads = [
        lambda: store.nodes(NS, "user:alice"),
        lambda: store.nodes(NS, "user:alice", descending=True, limit=1),
        lambda: store.get_nodes(NS, "user:alice", [alice_nodes[0].id]),
        lambda: store.resource_heads(NS, "user:alice"),
        lambda: store.resource_head(NS, "user:alice", "var:p"),
        lambda: store.versions(NS, "user:alice", "var:p"),
        lambda: store.nodes(NS, "thread:ta"),
        lambda: store.get_nodes(NS, "thread:ta", list(ta.frontier)),
    ]
    for read in reads:
        with pytest.raises(KeyErased) as e:
            await read()
        assert e.value.code == "key_erased"
    # Everyone else's data is untouched.
    assert (await _everything(store, "user:bob"))[:2] == [{"pref": "bob"}, {"pref": "bob2"}]
    assert [n.payload for n in await store.nodes(NS, "thread:tb")] == [{"text": "bob's chat"}]
    assert [n.payload for n in await store.nodes(NS, "thread:tn")] == [{"text": "nobody's chat"}]
    assert [n.payload for n in await store.nodes(NS, "app")] == [{"text": "app"}]
    # Views get placeholders; ids, kinds, parents and sequences remain.
    with erased_placeholders():
        shown = await store.nodes(NS, "user:alice")
    assert [(n.id, n.kind, n.parents, n.sequence) for n in shown] == [
        (n.id, n.kind, n.parents, n.sequence) for n in alice_nodes
    ]
    assert all(is_erased(n.payload) for n in shown)
    # Export and verify fail loudly instead of producing a snapshot that lies.
    with pytest.raises(KeyErased):
        await export_snapshot(store, NS, "thread:ta")
    # The user may come back: new writes get a new key; old payloads stay erased.
    fresh = await _write(
        store, "user:alice", {"pref": "new"}, kind="resource", resource_key="var:q"
    )
    with erased_placeholders():
        mixed = await store.nodes(NS, "user:alice")
    assert [n.payload for n in mixed] == [{"$erased": True}] * 2 + [{"pref": "new"}]
    assert await store.resource_head(NS, "user:alice", "var:q") == fresh
    await store.close()
    # Another process opening the database sees the same.
    again = await db.open(key)
    with pytest.raises(KeyErased):
        await again.nodes(NS, "thread:ta")
    assert [n.payload for n in await again.nodes(NS, "thread:tb")] == [{"text": "bob's chat"}]


async def test_erasure_reaches_another_open_store_at_once(db: Database) -> None:
    if db.kind == "memory":
        pytest.skip("a memory store lives in one process")
    key = MasterKey.generate()
    a, b = await db.open(key), await db.open(key)
    await _write(a, "user:carol", {"x": "carol"})
    assert [n.payload for n in await b.nodes(NS, "user:carol")] == [{"x": "carol"}]
    await erase_user(a, NS, "carol")
    with pytest.raises(KeyErased):  # b had the key cached; cache_ttl=0 rechecks every read
        await b.nodes(NS, "user:carol")


async def test_concurrent_first_writes_share_one_data_key(db: Database) -> None:
    if db.kind == "memory":
        pytest.skip("a memory store lives in one process")
    key = MasterKey.generate()
    a, b = await db.open(key), await db.open(key)
    # Two writers create dave's key at the same time (different threads of dave).
    await asyncio.gather(
        bind_thread(a, NS, "d1", "dave"),
        bind_thread(b, NS, "d2", "dave"),
    )
    await asyncio.gather(
        _write(a, "thread:d1", {"from": "a"}), _write(b, "thread:d2", {"from": "b"})
    )
    assert [n.payload for n in await a.nodes(NS, "thread:d2")] == [{"from": "b"}]
    assert [n.payload for n in await b.nodes(NS, "thread:d1")] == [{"from": "a"}]
    report = await erase_user(a, NS, "dave")
    assert report.keys_destroyed == 1 and report.threads == 2
    for s in (a, b):
        for t in ("thread:d1", "thread:d2"):
            with pytest.raises(KeyErased):
                await s.nodes(NS, t)


async def test_thread_binding_rules(db: Database) -> None:
    store = await db.open(MasterKey.generate())
    await _write(store, "thread:early", {"x": 1})
    with pytest.raises(CipherError) as e:
        await bind_thread(store, NS, "early", "erin")
    assert e.value.code == "thread_not_empty"
    await bind_thread(store, NS, "t", "erin")
    await bind_thread(store, NS, "t", "erin")  # idempotent
    with pytest.raises(CipherError) as e:
        await bind_thread(store, NS, "t", "frank")
    assert e.value.code == "thread_bound"
    assert not await bind_thread(MemoryStore(), NS, "t", "erin")  # unencrypted: a no-op
    with pytest.raises(CipherError):
        await erase_user(MemoryStore(), NS, "erin")


class CountingKms:
    """A MasterKeyProvider as a cloud KMS would be: the key never leaves 'the service'."""

    def __init__(self) -> None:
        self._key = MasterKey.generate()
        self.unwraps = 0

    @property
    def key_id(self) -> str:
        return "kms:projects/p/keys/k1"

    async def wrap(self, plaintext: bytes, context: bytes) -> bytes:
        return await self._key.wrap(plaintext, context)

    async def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        self.unwraps += 1
        return await self._key.unwrap(wrapped, context)


async def test_kms_provider_unwraps_each_data_key_once(db: Database) -> None:
    kms = CountingKms()
    store = await db.open(kms)
    for i in range(5):
        await _write(store, "user:u1", {"i": i})
        await _write(store, "app", {"i": i})
    await store.close()
    store = await db.open(kms)
    kms.unwraps = 0
    for _ in range(5):
        assert len(await store.nodes(NS, "user:u1")) == 5
        assert len(await store.nodes(NS, "app")) == 5
    assert kms.unwraps == 2  # one per data key, then the process cache


def test_cipher_from_env(tmp_path: Path) -> None:
    new, old = MasterKey.generate(), MasterKey.generate()
    assert cipher_from_env({}) is None
    c = cipher_from_env({"TETHER_MASTER_KEY": new.to_base64()})
    assert c is not None and c.masters == (new,)
    f = tmp_path / "old.key"
    f.write_text(old.to_base64())
    c = cipher_from_env(
        {"TETHER_MASTER_KEY": new.to_base64(), "TETHER_MASTER_KEY_OLD_FILE": str(f)}
    )
    assert c is not None and c.masters == (new, old)


def _sqlite_rows(path: Path, scope: str) -> list[int]:
    import sqlite3

    c = sqlite3.connect(path)
    try:
        (sid,) = c.execute(
            "SELECT sid FROM tether_scopes WHERE ns = ? AND scope = ?", (NS, scope)
        ).fetchone()
        return [
            r[0]
            for r in c.execute(
                "SELECT k FROM tether_nodes WHERE k BETWEEN ? AND ? ORDER BY k",
                (sid << 32, (sid << 32) | 0xFFFFFFFF),
            )
        ]
    finally:
        c.close()


def _sqlite_copy_payload(path: Path, src: int, dst: int) -> None:
    import sqlite3

    c = sqlite3.connect(path)
    try:
        c.execute(
            "UPDATE tether_nodes SET payload = (SELECT payload FROM tether_nodes WHERE k = ?)"
            " WHERE k = ?",
            (src, dst),
        )
        c.commit()
    finally:
        c.close()


async def test_ciphertext_moved_in_the_database_is_caught(tmp_path: Path) -> None:
    """An attacker with write access moves sealed payloads around in the SQLite file."""
    path = tmp_path / "moved.db"
    key = MasterKey.generate()
    store = await _open_sqlite(path, key)
    # thread:a and app share the namespace key: only the associated data tells them apart.
    await _write(store, "thread:a", {"secret": "a"})
    await _write(store, "app", {"public": 1})
    await _write(store, "thread:b", {"n": 1})
    await _write(store, "thread:b", {"n": 2})
    await store.close()
    (a,), (app,) = _sqlite_rows(path, "thread:a"), _sqlite_rows(path, "app")
    _sqlite_copy_payload(path, a, app)
    store = await _open_sqlite(path, key)
    with pytest.raises(CipherError) as e:
        await store.nodes(NS, "app")
    assert e.value.code == "decrypt_failed"
    # Within one scope a swap decrypts, but the payload no longer matches the node's id.
    b1, b2 = _sqlite_rows(path, "thread:b")
    assert (await verify_scope(store, NS, "thread:b")).ok
    await store.close()
    _sqlite_copy_payload(path, b1, b2)
    store = await _open_sqlite(path, key)
    check = await verify_scope(store, NS, "thread:b")
    assert not check.ok and check.code == "identity_mismatch"
    await store.close()


async def _open_sqlite(path: Path, key: MasterKey) -> Store:
    from tether.store import open_store

    return await open_store(f"sqlite:///{path}", cipher=key)
