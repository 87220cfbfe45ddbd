"""The recall index of an encrypted store kept in the backend's table, every vector sealed
(``Cipher(recall_index="encrypted")``, tether.crypto._vectors): same hits as a plaintext
store, no vector or text readable in the database, found again after a restart without
embedding, gone or unreadable after erasure, and a tampered row refused."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from _crypto_backends import Database, backend_params, database_fixture
from tether import control
from tether.core.errors import CipherError
from tether.crypto import Cipher, MasterKey, cipher_from_env, erase_user
from tether.models.embeddings import CallableEmbedder, HashingEmbedder
from tether.projections import recall, remember
from tether.projections.recall_index import vector_table, verify_index
from tether.store import Store, open_store

pytest.importorskip("cryptography")
np = pytest.importorskip("numpy")

ALICE, BOB = "user:alice", "user:bob"
FACTS = {
    "allergy": "user is allergic to peanuts",
    "colour": "favourite colour is deep blue",
    "city": "lives in Lisbon, Portugal",
    "pet": "has a dog named Rex",
    "job": "works as a nurse at the hospital",
    "diet": "is vegetarian and does not eat meat",
}
QUERIES = ["peanuts", "what colour", "where does she live", "animal", "profession", "meat"]


@pytest.fixture(params=[p for p in backend_params() if p.id != "memory"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    async for d in database_fixture(request, tmp_path):
        yield d


def _dense(text: str) -> list[float]:
    """A dense vector (every component nonzero, unlike HashingEmbedder's), from the text
    and its words, so that its bytes cannot turn up in a file by chance."""
    import hashlib
    import random

    v = [random.Random(hashlib.sha256(text.encode()).digest()).gauss(0, 0.1) for _ in range(64)]
    for w in text.lower().split():
        rng = random.Random(hashlib.sha256(w.strip("?,.").encode()).digest())
        v = [x + rng.gauss(0, 1) for x in v]
    return v


class Counted(CallableEmbedder):
    def __init__(self) -> None:
        self.texts: list[str] = []

        def fn(texts: list[str]) -> list[list[float]]:
            self.texts.extend(texts)
            return [_dense(t) for t in texts]

        super().__init__(fn, dim=64, name="counted")


async def _seed(store: Store, ns: str, scope: str) -> None:
    for key, text in FACTS.items():
        await remember(store, ns, scope, "memory", key, f"{scope}: {text}")


async def _answers(store: Store, ns: str, scope: str, e: Any) -> list[list[tuple[Any, ...]]]:
    out = []
    for q in QUERIES:
        hits = await recall(store, ns, scope, q, embedder=e, k=4)
        out.append([(h.scope, h.type, h.key, h.content, h.score) for h in hits])
    return out


def _sealed(key: MasterKey) -> Cipher:
    return Cipher(masters=(key,), recall_index="encrypted")


async def test_the_sealed_index_answers_like_a_plaintext_one_and_shows_nothing(
    db: Database, tmp_path: Path, ns: str
) -> None:
    e = Counted()
    plain = await open_store(f"sqlite:///{tmp_path / 'plain.db'}")
    try:
        await _seed(plain, ns, ALICE)
        want = await _answers(plain, ns, ALICE, e)
        known = (await vector_table(plain).entries(ns, ALICE, e.name))["semantic:memory:allergy"]
    finally:
        await plain.close()
    plain_bytes = (tmp_path / "plain.db").read_bytes()
    assert known.vector in plain_bytes  # the control: a plaintext index does hold it

    store = await db.open(_sealed(MasterKey.generate()))
    table = vector_table(store)
    assert type(table).__name__ == "EncryptedVectorTable"
    await _seed(store, ns, ALICE)
    assert await _answers(store, ns, ALICE, e) == want
    assert await verify_index(store, ns, ALICE, embedder=e) == []
    entries = await table.entries(ns, ALICE, e.name)
    assert entries["semantic:memory:allergy"].vector == known.vector  # opened exactly
    stored = await table.inner.entries(ns, ALICE, e.name)  # type: ignore[attr-defined]
    assert len(stored) == len(FACTS)  # the rows are in the database, sealed
    assert all(v.vector[0] == 0xA7 and len(v.vector) == 64 * 4 + 46 for v in stored.values())
    await store.close()

    raw = await db.raw_bytes()
    vec = known.vector
    assert all(x != 0.0 for x in np.frombuffer(vec, dtype="<f4"))
    for i in range(0, len(vec) - 8, 4):  # no 8 bytes (two components) of it, raw or as hex
        assert vec[i : i + 8] not in raw and vec[i : i + 8].hex().encode() not in raw
    for text in FACTS.values():
        assert text.encode() not in raw
    assert b"peanuts" not in raw and b"Lisbon" not in raw


async def test_a_restart_finds_the_sealed_index_without_embedding(db: Database, ns: str) -> None:
    key = MasterKey.generate()
    e = Counted()
    store = await db.open(_sealed(key))
    await _seed(store, ns, ALICE)
    first = await _answers(store, ns, ALICE, e)
    assert len(e.texts) == len(FACTS) + len(QUERIES)
    await store.close()
    store = await db.open(_sealed(key))
    assert await _answers(store, ns, ALICE, e) == first
    assert len(e.texts) == len(FACTS) + 2 * len(QUERIES)  # only the questions
    await remember(store, ns, ALICE, "memory", "pet", "has a cat")
    await recall(store, ns, ALICE, "cat", embedder=e)
    assert e.texts[-2:] == ["cat", "has a cat"]
    await store.close()
    # the default keeps nothing in the store: a new process embeds everything again
    store = await db.open(key)
    assert type(vector_table(store)).__name__ == "MemoryVectorTable"
    before = len(e.texts)
    await recall(store, ns, ALICE, "cat", embedder=e)
    assert len(e.texts) - before == len(FACTS) + 1


async def test_erasing_a_user_removes_their_sealed_rows(db: Database, ns: str) -> None:
    e = HashingEmbedder(64)
    store = await db.open(_sealed(MasterKey.generate()))
    await _seed(store, ns, ALICE)
    await _seed(store, ns, BOB)
    await _answers(store, ns, ALICE, e)
    bob = await _answers(store, ns, BOB, e)
    table = vector_table(store)
    inner = table.inner  # type: ignore[attr-defined]
    assert len(await inner.entries(ns, ALICE, e.name)) == len(FACTS)
    await control.erase_user(store, ns, "alice")
    assert await inner.entries(ns, ALICE, e.name) == {}  # the rows are gone
    assert (ALICE, e.name) not in await table.indexed(ns)
    assert await recall(store, ns, ALICE, "peanuts", embedder=e) == []
    assert await _answers(store, ns, BOB, e) == bob


async def test_rows_left_under_a_destroyed_key_are_never_found(db: Database, ns: str) -> None:
    """Erasure by key alone (tether.crypto.erase_user, or a copy of the database made
    before control.erase_user dropped the rows): the rows stay, unreadable, and are
    deleted when met; other users' searches are unchanged."""
    e = HashingEmbedder(64)
    store = await db.open(_sealed(MasterKey.generate()))
    await _seed(store, ns, ALICE)
    await _seed(store, ns, BOB)
    await _answers(store, ns, ALICE, e)
    bob = await _answers(store, ns, BOB, e)
    table = vector_table(store)
    inner = table.inner  # type: ignore[attr-defined]
    await erase_user(store, ns, "alice")
    assert len(await inner.entries(ns, ALICE, e.name)) == len(FACTS)  # still there, sealed
    assert await recall(store, ns, ALICE, "peanuts", embedder=e) == []
    assert await inner.entries(ns, ALICE, e.name) == {}
    assert await _answers(store, ns, BOB, e) == bob


async def test_a_tampered_or_swapped_row_is_refused(tmp_path: Path, ns: str) -> None:
    path = tmp_path / "t.db"
    key = MasterKey.generate()
    e = HashingEmbedder(64)
    store = await open_store(f"sqlite:///{path}", cipher=_sealed(key))
    await _seed(store, ns, ALICE)
    await recall(store, ns, ALICE, "peanuts", embedder=e)
    await store.close()

    def rows() -> dict[str, bytes]:
        with sqlite3.connect(path) as c:
            return {
                r[0]: bytes(r[1])
                for r in c.execute(
                    "SELECT key, vector FROM tether_recall_vectors WHERE scope = ?", (ALICE,)
                )
            }

    def put(k: str, v: bytes) -> None:
        c = sqlite3.connect(path)
        try:
            c.execute("UPDATE tether_recall_vectors SET vector = ? WHERE key = ?", (v, k))
            c.commit()
        finally:
            c.close()

    original = rows()
    a, b = "semantic:memory:allergy", "semantic:memory:city"
    flipped = bytearray(original[a])
    flipped[-20] ^= 1
    for change in ([(a, bytes(flipped))], [(a, original[b]), (b, original[a])]):
        for k, v in change:
            put(k, v)
        store = await open_store(f"sqlite:///{path}", cipher=_sealed(key))
        try:
            with pytest.raises(CipherError) as err:
                await recall(store, ns, ALICE, "peanuts", embedder=e)
            assert err.value.code == "decrypt_failed"
        finally:
            await store.close()
        for k, v in original.items():
            put(k, v)
    store = await open_store(f"sqlite:///{path}", cipher=_sealed(key))
    try:  # restored: searches again
        assert (await recall(store, ns, ALICE, "peanuts", embedder=e))[0].key == "allergy"
    finally:
        await store.close()


def test_the_environment_chooses_where_the_index_lives() -> None:
    k = MasterKey.generate().to_base64()  # type: ignore[attr-defined]
    assert cipher_from_env({"TETHER_MASTER_KEY": k}).recall_index == "process"  # type: ignore[union-attr]
    env = {"TETHER_MASTER_KEY": k, "TETHER_RECALL_INDEX": "encrypted"}
    assert cipher_from_env(env).recall_index == "encrypted"  # type: ignore[union-attr]
    with pytest.raises(CipherError) as err:
        cipher_from_env({"TETHER_MASTER_KEY": k, "TETHER_RECALL_INDEX": "disk"})
    assert err.value.code == "invalid_request"
