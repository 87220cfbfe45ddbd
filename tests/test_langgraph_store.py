"""TetherStore beyond LangGraph's tests: durable items, shared between instances, recall sees them."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.memory")

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
