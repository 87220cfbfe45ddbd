"""Recall by meaning: the index as a projection of the graph (tether.projections.recall_index)."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
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

NS = "default"
ALICE = "user:alice"

FACTS = {
    "allergy": "user is allergic to peanuts",
    "colour": "favourite colour is deep blue",
    "city": "lives in Lisbon, Portugal",
    "pet": "has a dog named Rex",
    "job": "works as a nurse at the hospital",
    "diet": "is vegetarian and does not eat meat",
}


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'r.db'}"
    s = await open_store(url)
    yield s
    await s.close()


async def _seed(store: Store, scope: str = ALICE) -> None:
    for key, text in FACTS.items():
        await remember(store, NS, scope, "memory", key, text)


async def test_recall_finds_memories_by_meaning_with_the_offline_model(store: Store) -> None:
    pytest.importorskip("wordllama")
    await _seed(store)
    e = WordLlamaEmbedder()
    questions = {
        "what did I say about my allergies?": "allergy",
        "which city do I live in?": "city",
        "what is my job?": "job",
        "do I eat meat?": "diet",
    }
    for q, want in questions.items():
        hits = await recall(store, NS, ALICE, q, embedder=e, k=3)
        assert [h.key for h in hits][:1] == [want], (q, [(h.key, h.score) for h in hits])
        assert hits[0].content == FACTS[want] and hits[0].type == "memory"
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_the_index_follows_the_graph(store: Store) -> None:
    e = HashingEmbedder(128)
    await _seed(store)
    hits = await recall(store, NS, ALICE, "peanuts", embedder=e, k=1)
    assert hits[0].key == "allergy"
    # a successor replaces the vector; a tombstone removes it; both seen on the next search
    await remember(store, NS, ALICE, "memory", "allergy", "allergic to shellfish")
    await forget(store, NS, ALICE, "memory", "pet")
    hits = await recall(store, NS, ALICE, "shellfish", embedder=e, k=10)
    assert hits[0].key == "allergy" and hits[0].content == "allergic to shellfish"
    assert "pet" not in {h.key for h in hits}
    assert len(hits) == len(FACTS) - 1
    # a reset bumps the generation: the index is rebuilt, empty
    await store.reset_scope(NS, ALICE)
    assert await recall(store, NS, ALICE, "shellfish", embedder=e) == []
    mark = await vector_table(store).mark(NS, ALICE, e.name)
    head = await store.head(NS, ALICE)
    assert mark is not None and (mark.generation, mark.sequence) == (
        head.generation,
        head.sequence,
    )


async def test_filters_by_type_and_key_prefix_and_agent_memory_is_searched(store: Store) -> None:
    e = HashingEmbedder(128)
    await remember(store, NS, ALICE, "memory", "food/allergy", "allergic to peanuts")
    await remember(store, NS, ALICE, "preference", "food/likes", "likes peanuts butter")
    await remember(store, NS, ALICE, "memory", "pets/dog", "dog eats peanuts")
    mem = AgentMemory(store, NS, scope=ALICE, name="notes")
    await mem.store("snack", "peanuts are the usual snack")
    everything = await recall(store, NS, ALICE, "peanuts", embedder=e, k=10)
    assert {(h.type, h.key) for h in everything} == {
        ("memory", "food/allergy"),
        ("preference", "food/likes"),
        ("memory", "pets/dog"),
        ("agent_memory", "notes/snack"),
    }
    only_pref = await recall(store, NS, ALICE, "peanuts", embedder=e, types="preference")
    assert [h.key for h in only_pref] == ["food/likes"]
    food = await recall(store, NS, ALICE, "peanuts", embedder=e, key_prefix="food/")
    assert {h.key for h in food} == {"food/allergy", "food/likes"}
    both = await recall(
        store, NS, ALICE, "peanuts", embedder=e, types=["memory"], key_prefix="food/"
    )
    assert [h.key for h in both] == ["food/allergy"]
    agent = await recall(store, NS, ALICE, "peanuts", embedder=e, types=["agent_memory"])
    assert [h.key for h in agent] == ["notes/snack"]
    high = await recall(store, NS, ALICE, "peanuts", embedder=e, k=10, min_score=2.0)
    assert high == []


async def test_recall_over_several_scopes_merges_by_score(store: Store) -> None:
    e = HashingEmbedder(128)
    await remember(store, NS, ALICE, "memory", "allergy", "allergic to peanuts")
    await remember(store, NS, "thread:t1", "memory", "topic", "we talked about peanuts")
    hits = await recall(store, NS, [ALICE, "thread:t1"], "peanuts", embedder=e, k=5)
    assert {(h.scope, h.key) for h in hits} == {(ALICE, "allergy"), ("thread:t1", "topic")}


async def test_bad_arguments_are_typed_errors(store: Store) -> None:
    e = HashingEmbedder(64)
    with pytest.raises(InvalidRequest):
        await recall(store, NS, ALICE, "x", embedder=e, k=0)
    with pytest.raises(InvalidRequest):
        await recall(store, NS, ALICE, "  ", embedder=e)
    with pytest.raises(InvalidRequest):
        await recall(store, NS, "nonsense", "x", embedder=e)


async def test_reindex_reproduces_the_index_exactly(store: Store) -> None:
    e = HashingEmbedder(128)
    await _seed(store)
    await remember(store, NS, ALICE, "memory", "city", "moved to Porto")
    await forget(store, NS, ALICE, "memory", "job")
    await recall(store, NS, ALICE, "where", embedder=e)
    table = vector_table(store)
    before = await table.entries(NS, ALICE, e.name)
    mark_before = await table.mark(NS, ALICE, e.name)
    assert len(before) == len(FACTS) - 1
    assert await reindex(store, NS, ALICE, embedder=e) == len(before)
    assert await table.entries(NS, ALICE, e.name) == before
    assert await table.mark(NS, ALICE, e.name) == mark_before
    assert await verify_index(store, NS, ALICE, embedder=e) == []


async def test_verify_index_finds_a_tampered_vector(store: Store) -> None:
    e = HashingEmbedder(64)
    await _seed(store)
    await recall(store, NS, ALICE, "x", embedder=e)
    table = vector_table(store)
    entries = await table.entries(NS, ALICE, e.name)
    mark = await table.mark(NS, ALICE, e.name)
    assert mark is not None
    bad = entries["semantic:memory:pet"]
    wrong = VectorEntry(key=bad.key, node=bad.node, vector=struct.pack("<64f", *([0.125] * 64)))
    await table.apply(NS, ALICE, e.name, upserts=[wrong], deletes=["semantic:memory:job"], mark=mark)
    problems = await verify_index(store, NS, ALICE, embedder=e)
    assert problems == [
        "semantic:memory:job: missing from the index",
        "semantic:memory:pet: vector differs from a fresh embedding",
    ]
    await reindex(store, NS, ALICE, embedder=e)
    assert await verify_index(store, NS, ALICE, embedder=e) == []


async def test_erasing_a_user_removes_their_vectors(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'enc.db'}", cipher=MasterKey.generate())
    try:
        e = HashingEmbedder(128)
        await _seed(store)
        await _seed(store, "user:bob")
        assert await recall(store, NS, ALICE, "peanuts", embedder=e)
        assert await recall(store, NS, "user:bob", "peanuts", embedder=e)
        table = vector_table(store)
        assert await table.entries(NS, ALICE, e.name)
        await control.erase_user(store, NS, "alice")
        assert await table.entries(NS, ALICE, e.name) == {}
        assert (ALICE, e.name) not in await table.indexed(NS)
        # bob is untouched; a later search over alice rebuilds nothing from erased data
        assert len(await table.entries(NS, "user:bob", e.name)) == len(FACTS)
        assert await recall(store, NS, ALICE, "peanuts", embedder=e) == []
        assert await table.entries(NS, ALICE, e.name) == {}
    finally:
        await store.close()


async def test_a_reset_drops_the_scopes_vectors_at_once(store: Store) -> None:
    e = HashingEmbedder(64)
    await _seed(store)
    await _seed(store, "user:bob")
    await recall(store, NS, ALICE, "x", embedder=e)
    await recall(store, NS, "user:bob", "x", embedder=e)
    table = vector_table(store)
    await control.reset(store, user="alice")
    assert await table.entries(NS, ALICE, e.name) == {}
    assert len(await table.entries(NS, "user:bob", e.name)) == len(FACTS)
    await control.reset(store, namespace=NS, whole_namespace=True)
    assert await table.indexed(NS) == []
