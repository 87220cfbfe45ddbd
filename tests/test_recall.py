"""Recall by meaning: the index as a projection of the graph (tether.projections.recall_index)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tether import control
from tether.core.errors import InvalidRequest
from tether.crypto import MasterKey
from tether.models.embeddings import HashingEmbedder, WordLlamaEmbedder
from tether.projections import AgentMemory, forget, recall, reindex, remember
from tether.projections.recall_index import vector_table, verify_index
from tether.store import Store, open_store
from tether.store.vectors import VectorEntry

ALICE = "user:alice"

FACTS = {
    "allergy": "user is allergic to peanuts",
    "colour": "favourite colour is deep blue",
    "city": "lives in Lisbon, Portugal",
    "pet": "has a dog named Rex",
    "job": "works as a nurse at the hospital",
    "diet": "is vegetarian and does not eat meat",
}


async def _seed(store: Store, ns: str, scope: str = ALICE) -> None:
    for key, text in FACTS.items():
        await remember(store, ns, scope, "memory", key, text)


async def test_recall_finds_memories_by_meaning_with_the_offline_model(
    store: Store, ns: str
) -> None:
    pytest.importorskip("wordllama")
    await _seed(store, ns)
    e = WordLlamaEmbedder()
    questions = {
        "what did I say about my allergies?": "allergy",
        "which city do I live in?": "city",
        "what is my job?": "job",
        "do I eat meat?": "diet",
    }
    for q, want in questions.items():
        hits = await recall(store, ns, ALICE, q, embedder=e, k=3)
        assert [h.key for h in hits][:1] == [want], (q, [(h.key, h.score) for h in hits])
        assert hits[0].content == FACTS[want] and hits[0].type == "memory"
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_the_index_follows_the_graph(store: Store, ns: str) -> None:
    e = HashingEmbedder(128)
    await _seed(store, ns)
    hits = await recall(store, ns, ALICE, "peanuts", embedder=e, k=1)
    assert hits[0].key == "allergy"
    # a successor replaces the vector; a tombstone removes it; both seen on the next search
    await remember(store, ns, ALICE, "memory", "allergy", "allergic to shellfish")
    await forget(store, ns, ALICE, "memory", "pet")
    hits = await recall(store, ns, ALICE, "shellfish", embedder=e, k=10)
    assert hits[0].key == "allergy" and hits[0].content == "allergic to shellfish"
    assert "pet" not in {h.key for h in hits}
    assert len(hits) == len(FACTS) - 1
    # a reset bumps the generation: the index is rebuilt, empty
    await store.reset_scope(ns, ALICE)
    assert await recall(store, ns, ALICE, "shellfish", embedder=e) == []
    mark = await vector_table(store).mark(ns, ALICE, e.name)
    head = await store.head(ns, ALICE)
    assert mark is not None and (mark.generation, mark.sequence) == (
        head.generation,
        head.sequence,
    )


async def test_filters_by_type_and_key_prefix_and_agent_memory_is_searched(
    store: Store, ns: str
) -> None:
    e = HashingEmbedder(128)
    await remember(store, ns, ALICE, "memory", "food/allergy", "allergic to peanuts")
    await remember(store, ns, ALICE, "preference", "food/likes", "likes peanuts butter")
    await remember(store, ns, ALICE, "memory", "pets/dog", "dog eats peanuts")
    mem = AgentMemory(store, ns, scope=ALICE, name="notes")
    await mem.store("snack", "peanuts are the usual snack")
    everything = await recall(store, ns, ALICE, "peanuts", embedder=e, k=10)
    assert {(h.type, h.key) for h in everything} == {
        ("memory", "food/allergy"),
        ("preference", "food/likes"),
        ("memory", "pets/dog"),
        ("agent_memory", "notes/snack"),
    }
    only_pref = await recall(store, ns, ALICE, "peanuts", embedder=e, types="preference")
    assert [h.key for h in only_pref] == ["food/likes"]
    food = await recall(store, ns, ALICE, "peanuts", embedder=e, key_prefix="food/")
    assert {h.key for h in food} == {"food/allergy", "food/likes"}
    both = await recall(
        store, ns, ALICE, "peanuts", embedder=e, types=["memory"], key_prefix="food/"
    )
    assert [h.key for h in both] == ["food/allergy"]
    agent = await recall(store, ns, ALICE, "peanuts", embedder=e, types=["agent_memory"])
    assert [h.key for h in agent] == ["notes/snack"]
    high = await recall(store, ns, ALICE, "peanuts", embedder=e, k=10, min_score=2.0)
    assert high == []


async def test_recall_over_several_scopes_merges_by_score(store: Store, ns: str) -> None:
    e = HashingEmbedder(128)
    await remember(store, ns, ALICE, "memory", "allergy", "allergic to peanuts")
    await remember(store, ns, "thread:t1", "memory", "topic", "we talked about peanuts")
    hits = await recall(store, ns, [ALICE, "thread:t1"], "peanuts", embedder=e, k=5)
    assert {(h.scope, h.key) for h in hits} == {(ALICE, "allergy"), ("thread:t1", "topic")}


async def test_bad_arguments_are_typed_errors(store: Store, ns: str) -> None:
    e = HashingEmbedder(64)
    with pytest.raises(InvalidRequest):
        await recall(store, ns, ALICE, "x", embedder=e, k=0)
    with pytest.raises(InvalidRequest):
        await recall(store, ns, ALICE, "  ", embedder=e)
    with pytest.raises(InvalidRequest):
        await recall(store, ns, "nonsense", "x", embedder=e)


async def test_reindex_reproduces_the_index_exactly(store: Store, ns: str) -> None:
    e = HashingEmbedder(128)
    await _seed(store, ns)
    await remember(store, ns, ALICE, "memory", "city", "moved to Porto")
    await forget(store, ns, ALICE, "memory", "job")
    await recall(store, ns, ALICE, "where", embedder=e)
    table = vector_table(store)
    before = await table.entries(ns, ALICE, e.name)
    mark_before = await table.mark(ns, ALICE, e.name)
    assert len(before) == len(FACTS) - 1 and mark_before is not None
    # Spoil the index first (a wrong vector, a lost entry, a stray one), so only a rebuild
    # from the graph gets back to what it was.
    pet = before["semantic:memory:pet"]
    await table.apply(
        ns,
        ALICE,
        e.name,
        upserts=[
            VectorEntry(key=pet.key, node=pet.node, vector=struct.pack("<128f", *[0.5] * 128)),
            VectorEntry(key="semantic:memory:stray", node=pet.node, vector=pet.vector),
        ],
        deletes=["semantic:memory:city"],
        mark=mark_before,
    )
    assert await table.entries(ns, ALICE, e.name) != before
    assert await reindex(store, ns, ALICE, embedder=e) == len(before)
    assert await table.entries(ns, ALICE, e.name) == before
    assert await table.mark(ns, ALICE, e.name) == mark_before
    assert await verify_index(store, ns, ALICE, embedder=e) == []


async def test_verify_index_finds_a_tampered_vector(store: Store, ns: str) -> None:
    e = HashingEmbedder(64)
    await _seed(store, ns)
    await recall(store, ns, ALICE, "x", embedder=e)
    table = vector_table(store)
    entries = await table.entries(ns, ALICE, e.name)
    mark = await table.mark(ns, ALICE, e.name)
    assert mark is not None
    bad = entries["semantic:memory:pet"]
    wrong = VectorEntry(key=bad.key, node=bad.node, vector=struct.pack("<64f", *([0.125] * 64)))
    await table.apply(
        ns, ALICE, e.name, upserts=[wrong], deletes=["semantic:memory:job"], mark=mark
    )
    problems = await verify_index(store, ns, ALICE, embedder=e)
    assert problems == [
        "semantic:memory:job: missing from the index",
        "semantic:memory:pet: vector differs from a fresh embedding",
    ]
    await reindex(store, ns, ALICE, embedder=e)
    assert await verify_index(store, ns, ALICE, embedder=e) == []


async def test_erasing_a_user_removes_their_vectors(tmp_path: Path, ns: str) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'enc.db'}", cipher=MasterKey.generate())
    try:
        e = HashingEmbedder(128)
        await _seed(store, ns)
        await _seed(store, ns, "user:bob")
        assert await recall(store, ns, ALICE, "peanuts", embedder=e)
        assert await recall(store, ns, "user:bob", "peanuts", embedder=e)
        table = vector_table(store)
        assert await table.entries(ns, ALICE, e.name)
        await control.erase_user(store, ns, "alice")
        assert await table.entries(ns, ALICE, e.name) == {}
        assert (ALICE, e.name) not in await table.indexed(ns)
        # bob is untouched; a later search over alice rebuilds nothing from erased data
        assert len(await table.entries(ns, "user:bob", e.name)) == len(FACTS)
        assert await recall(store, ns, ALICE, "peanuts", embedder=e) == []
        assert await table.entries(ns, ALICE, e.name) == {}
    finally:
        await store.close()


async def test_a_reset_drops_the_scopes_vectors_at_once(store: Store, ns: str) -> None:
    e = HashingEmbedder(64)
    await _seed(store, ns)
    await _seed(store, ns, "user:bob")
    await recall(store, ns, ALICE, "x", embedder=e)
    await recall(store, ns, "user:bob", "x", embedder=e)
    table = vector_table(store)
    await control.reset(store, namespace=ns, user="alice")
    assert await table.entries(ns, ALICE, e.name) == {}
    assert len(await table.entries(ns, "user:bob", e.name)) == len(FACTS)
    await control.reset(store, namespace=ns, whole_namespace=True)
    assert await table.indexed(ns) == []


async def test_a_sqlite_file_keeps_its_index_across_a_restart(tmp_path: Path) -> None:
    import sqlite3

    from tether.models.embeddings import CallableEmbedder

    embedded: list[str] = []
    hashing = HashingEmbedder(64)

    def fn(texts: list[str]) -> list[list[float]]:
        embedded.extend(texts)
        return [hashing.vector(t) for t in texts]

    e = CallableEmbedder(fn, dim=64, name="counted")
    url = f"sqlite:///{tmp_path / 'p.db'}"
    store = await open_store(url)
    await _seed(store, "default")
    first = await recall(store, "default", ALICE, "peanuts", embedder=e)
    await store.close()
    assert len(embedded) == len(FACTS) + 1  # every memory and the query
    store = await open_store(url)
    again = await recall(store, "default", ALICE, "peanuts", embedder=e)
    assert again == first and len(embedded) == len(FACTS) + 2  # only the query this time
    await remember(store, "default", ALICE, "memory", "pet", "has a cat")
    await recall(store, "default", ALICE, "cat", embedder=e)
    assert embedded[-2:] == ["cat", "has a cat"]  # the query, then only the new memory
    assert len(embedded) == len(FACTS) + 4
    await store.close()
    with sqlite3.connect(tmp_path / "p.db") as c:
        rows = c.execute("SELECT count(*) FROM tether_recall_vectors").fetchone()[0]
    assert rows == len(FACTS)


async def test_an_encrypted_file_keeps_no_vectors(tmp_path: Path) -> None:
    import sqlite3

    store = await open_store(f"sqlite:///{tmp_path / 'e.db'}", cipher=MasterKey.generate())
    await _seed(store, "default")
    assert await recall(store, "default", ALICE, "peanuts", embedder=HashingEmbedder(64))
    await store.close()
    with sqlite3.connect(tmp_path / "e.db") as c:
        names = {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
    assert not any(n.startswith("tether_recall") for n in names)


@pytest.mark.postgres
async def test_postgres_keeps_its_index_in_the_database(postgres_url: str, ns: str) -> None:
    pytest.importorskip("asyncpg")
    e = HashingEmbedder(64)
    store = await open_store(postgres_url)
    try:
        assert type(vector_table(store)).__name__ == "PostgresVectorTable"
        await _seed(store, ns)
        first = await recall(store, ns, ALICE, "peanuts", embedder=e)
    finally:
        await store.close()
    store = await open_store(postgres_url)  # another process would see the same rows
    try:
        table = vector_table(store)
        assert len(await table.entries(ns, ALICE, e.name)) == len(FACTS)
        assert await table.mark(ns, ALICE, e.name) is not None
        assert await recall(store, ns, ALICE, "peanuts", embedder=e) == first
        assert await verify_index(store, ns, ALICE, embedder=e) == []
        await control.reset(store, namespace=ns, whole_namespace=True)
        assert await table.indexed(ns) == []
    finally:
        await store.close()


@pytest.mark.redis
async def test_redis_keeps_its_index_in_the_database(redis_url: str, ns: str) -> None:
    pytest.importorskip("redis")
    import redis.asyncio as aioredis

    e = HashingEmbedder(64)
    store = await open_store(redis_url)
    try:
        table = vector_table(store)
        assert type(table).__name__ == "RedisVectorTable"
        # this server has no search module (plain Redis): the exact scan runs
        await _seed(store, ns)
        first = await recall(store, ns, ALICE, "peanuts", embedder=e)
        assert getattr(table, "engine", None) == "scan"
    finally:
        await store.close()
    store = await open_store(redis_url)  # another process would see the same hashes
    try:
        table = vector_table(store)
        assert len(await table.entries(ns, ALICE, e.name)) == len(FACTS)
        assert await recall(store, ns, ALICE, "peanuts", embedder=e) == first
        assert await verify_index(store, ns, ALICE, embedder=e) == []
        await control.reset(store, namespace=ns, user="alice")
        assert await table.indexed(ns) == []
    finally:
        await store.close()
    client = aioredis.Redis.from_url(redis_url)
    try:  # nothing of the namespace's index is left in the database
        assert [k async for k in client.scan_iter(match=f"*{ns}*recall*")] == []
    finally:
        await client.aclose()
