"""tether.mcp.KnowledgeGraph on every backend: the reference memory server's knowledge
graph on tether's causal graph (no MCP SDK needed). Side by side with the reference
server itself: tests/test_mcp_reference.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

import tether
from tether.core.errors import InvalidRequest
from tether.mcp import EntityNotFound, KnowledgeGraph, load_memory_file
from tether.mcp.graph import ENTITY_TYPE, RELATION_TYPE
from tether.projections.errors import InvalidArguments


def _e(name: str, *obs: str, type_: str = "person") -> dict[str, object]:
    return {"name": name, "entityType": type_, "observations": list(obs)}


def _r(a: str, rel: str, b: str) -> dict[str, str]:
    return {"from": a, "to": b, "relationType": rel}


async def test_writes_are_versions_of_semantic_memories(store: tether.Store, ns: str) -> None:
    kg = KnowledgeGraph(store, ns, scope="user:ada")
    await kg.create_entities([_e("Bob", "likes tea"), _e("Acme", type_="company")])
    await kg.create_relations([_r("Bob", "works_at", "Acme")])
    await kg.add_observations([{"entityName": "Bob", "contents": ["plays chess"]}])
    await kg.delete_observations([{"entityName": "Bob", "observations": ["likes tea"]}])
    await kg.delete_entities(["Acme"])

    g = await kg.read_graph()
    assert g.entities == [_e("Bob", "plays chess")]
    assert g.relations == []  # the relation went with Acme
    versions = await kg.history("Bob")
    assert [v["entity"]["observations"] for v in versions] == [
        ["likes tea"],
        ["likes tea", "plays chess"],
        ["plays chess"],
    ]
    assert [v["entity"] for v in await kg.history("Acme")] == [_e("Acme", type_="company"), None]
    heads = await store.resource_heads(ns, "user:ada", "semantic:")
    kinds = {n.payload["type"] for n in heads.values()}
    assert kinds == {ENTITY_TYPE, RELATION_TYPE}
    assert (await tether.control.verify(store, namespace=ns, user="ada")).ok


async def test_order_is_creation_order_and_a_recreated_entity_goes_last(
    store: tether.Store, ns: str
) -> None:
    kg = KnowledgeGraph(store, ns, scope="user:ada")
    await kg.create_entities([_e("c"), _e("a"), _e("b")])
    await kg.add_observations([{"entityName": "c", "contents": ["x"]}])  # keeps its place
    assert [e["name"] for e in (await kg.read_graph()).entities] == ["c", "a", "b"]
    await kg.delete_entities(["a"])
    await kg.create_entities([_e("a")])
    assert [e["name"] for e in (await kg.read_graph()).entities] == ["c", "b", "a"]


async def test_a_missing_entity_fails_the_whole_call_and_writes_nothing(
    store: tether.Store, ns: str
) -> None:
    kg = KnowledgeGraph(store, ns, scope="user:ada")
    await kg.create_entities([_e("Bob")])
    before = await store.head(ns, "user:ada")
    with pytest.raises(EntityNotFound) as info:
        await kg.add_observations(
            [
                {"entityName": "Bob", "contents": ["a"]},
                {"entityName": "Nobody", "contents": ["b"]},
            ]
        )
    assert info.value.code == "entity_not_found"
    assert info.value.message == "Entity with name Nobody not found"  # the reference's text
    assert await store.head(ns, "user:ada") == before


@pytest.mark.parametrize(
    ("method", "args", "field"),
    [
        ("create_entities", [{"name": "x", "entityType": "t"}], "entities[0].observations"),
        ("create_entities", [{**_e("x"), "extra": 1}], "entities[0]"),
        ("create_entities", [_e("y"), _e("x"), _e("y")], "entities[2]"),  # a new name twice
        ("create_entities", {"name": "x"}, "entities"),
        ("create_relations", [{"from": "a", "to": 3, "relationType": "r"}], "relations[0].to"),
        ("create_relations", [_r("a", "r", "b"), _r("a", "r", "b")], "relations[1]"),
        ("create_relations", [{"from": "a", "to": "b", "relationType": "\udfff"}], "relations[0].relationType"),
        ("add_observations", [{"entityName": "x", "contents": "a"}], "observations[0].contents"),
        ("delete_entities", "x", "entityNames"),
        ("delete_observations", [{"entityName": "x"}], "deletions[0].observations"),
        ("delete_relations", [{"from": "a", "to": "b"}], "relations[0].relationType"),
        ("search_nodes", None, "query"),
        ("open_nodes", [1], "names[0]"),
    ],
)
async def test_bad_arguments_are_typed_and_write_nothing(
    store: tether.Store, ns: str, method: str, args: object, field: str
) -> None:
    kg = KnowledgeGraph(store, ns, scope="user:ada")
    await kg.create_entities([_e("x")])
    before = await store.head(ns, "user:ada")
    with pytest.raises(InvalidArguments) as info:
        await getattr(kg, method)(args)
    assert info.value.code == "invalid_arguments"
    assert info.value.details["field"] == field
    assert await store.head(ns, "user:ada") == before


async def test_a_name_that_exists_may_repeat_as_in_the_reference(
    store: tether.Store, ns: str
) -> None:
    kg = KnowledgeGraph(store, ns, scope="user:ada")
    await kg.create_entities([_e("x", "first")])
    assert await kg.create_entities([_e("x", "again"), _e("x", "and again")]) == []
    assert (await kg.read_graph()).entities == [_e("x", "first")]


async def test_text_tether_cannot_store_exactly_is_refused(store: tether.Store, ns: str) -> None:
    kg = KnowledgeGraph(store, ns, scope="user:ada")
    with pytest.raises(InvalidArguments) as info:
        await kg.create_entities([_e("Bob", "lone \ud800 surrogate")])
    assert info.value.details["field"] == "entities[0].observations[0]"
    assert (await kg.read_graph()).entities == []


async def test_two_writers_at_once_lose_nothing(store: tether.Store, ns: str) -> None:
    kg = KnowledgeGraph(store, ns, scope="user:ada")
    await kg.create_entities([_e("Bob")])

    async def add(i: int) -> None:
        await kg.add_observations([{"entityName": "Bob", "contents": [f"fact {i}"]}])

    await asyncio.gather(*(add(i) for i in range(12)))
    (bob,) = (await kg.read_graph()).entities
    assert sorted(bob["observations"]) == sorted(f"fact {i}" for i in range(12))


async def test_the_graph_survives_a_restart(tmp_path: Path, ns: str) -> None:
    url = f"sqlite:///{tmp_path / 'kg.db'}"
    async with await tether.open_store(url) as s:
        kg = KnowledgeGraph(s, ns, scope="user:ada")
        await kg.create_entities([_e("Bob", "likes tea")])
        await kg.create_relations([_r("Bob", "knows", "Ann")])
        before = (await kg.read_graph()).to_dict()
    async with await tether.open_store(url) as s:
        kg = KnowledgeGraph(s, ns, scope="user:ada")
        assert (await kg.read_graph()).to_dict() == before
        assert len(await kg.history("Bob")) == 1


# -- the reference's memory file ----------------------------------------------------------


def _jsonl(*items: dict[str, object]) -> str:
    return "\n".join(orjson.dumps(i).decode() for i in items)


async def test_import_keeps_the_file_order_in_one_commit(store: tether.Store, ns: str) -> None:
    text = _jsonl(
        {"type": "entity", **_e("zed", "last letter")},
        {"type": "entity", **_e("Ann")},
        {"type": "relation", **_r("zed", "knows", "Ann")},
    )
    graph = load_memory_file(text + "\n\n")
    kg = KnowledgeGraph(store, ns, scope="user:ada")
    assert await kg.import_graph(graph) == {"entities": 2, "relations": 1}
    assert (await kg.read_graph()).to_dict() == graph.to_dict()
    assert (await store.head(ns, "user:ada")).sequence == 3
    with pytest.raises(InvalidRequest) as info:
        await kg.import_graph(graph)
    assert info.value.code == "not_empty"
    assert (await store.head(ns, "user:ada")).sequence == 3


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"type":"entity","name":"a","entityType":"t","observations":[]}\nnot json', "line 2"),
        ('{"type":"thing","name":"a"}', "line 1"),
        ('{"type":"entity","name":"a","entityType":"t"}', "line 1.observations"),
        ('{"type":"relation","from":"a","to":"b","relationType":"r","x":1}', "line 1"),
        (b'{"type":"entity","name":"\xff"}', "file"),
    ],
)
def test_a_bad_memory_file_names_its_line(text: str | bytes, field: str) -> None:
    with pytest.raises(InvalidArguments) as info:
        load_memory_file(text)
    assert info.value.details["field"] == field
