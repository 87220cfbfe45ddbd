"""TetherStore beyond LangGraph's tests: durable items, shared between instances, recall sees them."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.memory")

from conftest import drop_pg_schema
from tether.adapters.langgraph_store import TetherStore
from tether.models.embeddings import HashingEmbedder
from tether.projections import recall


def test_items_survive_a_reopen_and_two_instances_share_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    a = TetherStore.from_url(url)
    a.put(("users", "alice"), "diet", {"text": "vegetarian"})
    a.put(("users", "alice"), "pet", {"text": "dog"})
    a.delete(("users", "alice"), "pet")
    a.close()
    b = TetherStore.from_url(url)
    c = TetherStore.from_url(url)
    item = b.get(("users", "alice"), "diet")
    assert item is not None and item.value == {"text": "vegetarian"}
    assert b.get(("users", "alice"), "pet") is None
    c.put(("users", "alice"), "city", {"text": "Lisbon"})  # b sees c's write on its next call
    assert {i.key for i in b.search(("users", "alice"))} == {"diet", "city"}
    b.close()
    c.close()


async def test_tether_recall_searches_langgraph_items() -> None:
    s = await TetherStore.afrom_url("memory://")
    await s.aput(("users", "alice"), "allergy", {"text": "allergic to peanuts"})
    await s.aput(("users", "alice"), "city", {"text": "lives in Lisbon"})
    hits = await recall(s.store, "default", "app", "peanuts", embedder=HashingEmbedder(128), k=1)
    assert hits[0].type == "lg_store" and hits[0].content["value"]["text"] == "allergic to peanuts"
    await s.aclose()


def test_ttl_hides_expired_items_refreshes_on_read_and_sweeps(tmp_path: Path) -> None:
    import time

    from tether.adapters.langgraph_store import ITEM_TYPE
    from tether.projections import semantic_memory

    s = TetherStore.from_url(f"sqlite:///{tmp_path / 't.db'}", ttl={"refresh_on_read": True})
    assert s.supports_ttl
    ns = ("users", "alice")
    s.put(ns, "short", {"v": 1}, ttl=0.01)  # 0.6 s
    s.put(ns, "kept", {"v": 2})
    time.sleep(0.4)
    assert s.get(ns, "short") is not None  # read at 0.4 s: expiry moves to 1.0 s
    time.sleep(0.4)
    assert s.get(ns, "short", refresh_ttl=False) is not None  # 0.8 s: alive thanks to it
    time.sleep(0.5)
    assert s.get(ns, "short") is None and {i.key for i in s.search(ns)} == {"kept"}
    assert s.sweep_ttl() == 1
    memory = s._bridge.run_sync(lambda: semantic_memory(s.store, "default", "app", ITEM_TYPE))
    assert [k for k in memory if "short" in k] == []  # tombstoned in the graph
    # a process opening the file later sees the same
    s.close()
    t = TetherStore.from_url(f"sqlite:///{tmp_path / 't.db'}")
    assert t.get(ns, "short") is None and t.get(ns, "kept") is not None
    t.close()


def test_recall_embeds_a_langgraph_item_by_its_value_not_its_times() -> None:
    from tether.projections.recall_index import memory_text

    def payload(at: str) -> dict[str, object]:
        content = {
            "value": {"text": "allergic to peanuts"},
            "index": None,
            "created_at": at,
            "updated_at": at,
        }
        return {"type": "lg_store", "key": '["users","alice","allergy"]', "content": content}

    early, late = payload("2026-01-01T00:00:00+00:00"), payload("2026-12-01T17:59:59+00:00")
    assert memory_text(early) == memory_text(late) == '{"text":"allergic to peanuts"}'


@pytest.mark.postgres
async def test_concurrent_puts_on_a_pooled_store_all_land(postgres_url: str) -> None:
    """Every item of a TetherStore lives in one tether scope. Concurrent tasks' aput
    calls on a pooled store (PostgreSQL) raced each other for that scope's head and
    some lost all their retries (Conflict out of aput, 4 of 150 here); the store now
    queues its own batches, so every put lands."""
    import asyncio
    import uuid

    schema = f"tether_lgs_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in postgres_url else "?"
    store = await TetherStore.afrom_url(f"{postgres_url}{sep}schema={schema}&max_size=8")
    try:
        await asyncio.gather(
            *(store.aput(("users", str(i % 7)), f"k{i}", {"v": i}) for i in range(150))
        )
        items = await store.asearch(("users",), limit=1000)
        assert sorted(it.value["v"] for it in items) == list(range(150))
        assert len(store._writing) == 0
    finally:
        await store.aclose()
        await drop_pg_schema(postgres_url, schema)
