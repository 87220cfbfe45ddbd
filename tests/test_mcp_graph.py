"""tether.mcp.KnowledgeGraph on every backend: the reference memory server's knowledge
graph on tether's causal graph (no MCP SDK needed). Side by side with the reference
server itself: tests/test_mcp_reference.py."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import tether
from tether.core.errors import InvalidRequest
from tether.mcp import EntityNotFound, KnowledgeGraph, load_memory_file
from tether.mcp.graph import ENTITY_TYPE, RELATION_TYPE, Graph
from tether.projections.errors import InvalidArguments, NothingToUndo


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


async def test_undo_brings_a_deleted_entity_back_with_its_relations_and_place(
    store: tether.Store, ns: str
) -> None:
    kg = KnowledgeGraph(store, ns, scope="user:ada")
    await kg.create_entities([_e("Ann"), _e("Bob", "likes tea"), _e("Cy")])
    await kg.create_relations([_r("Ann", "knows", "Bob"), _r("Bob", "knows", "Cy")])
    before = (await kg.read_graph()).to_dict()
    await kg.delete_entities(["Bob"])
    assert [e["name"] for e in (await kg.read_graph()).entities] == ["Ann", "Cy"]
    undone = await kg.undo()
    assert undone["op"] == "delete_entities"
    assert sorted(undone["keys"]) == ["Ann knows Bob", "Bob", "Bob knows Cy"]
    assert (await kg.read_graph()).to_dict() == before
    # an undo is a new version: the history keeps the deletion
    assert [v["entity"] is None for v in await kg.history("Bob")] == [False, True, False]


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
        (
            "create_relations",
            [{"from": "a", "to": "b", "relationType": "\udfff"}],
            "relations[0].relationType",
        ),
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
    assert (await store.head(ns, "user:ada")).sequence == 4  # 3 memories, 1 log entry
    with pytest.raises(InvalidRequest) as info:
        await kg.import_graph(graph)
    assert info.value.code == "not_empty"
    assert (await store.head(ns, "user:ada")).sequence == 4
    await kg.undo()  # the whole import, in one
    assert (await kg.read_graph()).to_dict() == {"entities": [], "relations": []}


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


# -- against a port of the reference's own code ------------------------------------------


class Reference:
    """The reference server's KnowledgeGraphManager (dist/index.js), line for line, on
    lists in memory. ``None`` from create_*: the call would store a second copy of a new
    name or relation, which tether refuses."""

    def __init__(self) -> None:
        self.entities: list[dict[str, Any]] = []
        self.relations: list[dict[str, str]] = []

    def create_entities(self, entities: list[dict[str, Any]]) -> Any:
        new = [e for e in entities if not any(x["name"] == e["name"] for x in self.entities)]
        if len({e["name"] for e in new}) != len(new):
            return None
        self.entities += [_e(e["name"], *e["observations"], type_=e["entityType"]) for e in new]
        return new

    def create_relations(self, relations: list[dict[str, str]]) -> Any:
        new = [r for r in relations if r not in self.relations]
        if any(r in new[:i] for i, r in enumerate(new)):
            return None
        self.relations += [dict(r) for r in new]
        return new

    def add_observations(self, observations: list[dict[str, Any]]) -> Any:
        staged = [dict(e, observations=list(e["observations"])) for e in self.entities]
        results = []
        for o in observations:
            entity = next((e for e in staged if e["name"] == o["entityName"]), None)
            if entity is None:
                return "not found"
            new = [c for c in o["contents"] if c not in entity["observations"]]
            entity["observations"] += new
            results.append({"entityName": o["entityName"], "addedObservations": new})
        self.entities = staged
        return results

    def delete_entities(self, names: list[str]) -> None:
        self.entities = [e for e in self.entities if e["name"] not in names]
        self.relations = [
            r for r in self.relations if r["from"] not in names and r["to"] not in names
        ]

    def delete_observations(self, deletions: list[dict[str, Any]]) -> None:
        for d in deletions:
            for e in self.entities:
                if e["name"] == d["entityName"]:
                    e["observations"] = [o for o in e["observations"] if o not in d["observations"]]

    def delete_relations(self, relations: list[dict[str, str]]) -> None:
        self.relations = [r for r in self.relations if r not in relations]

    def search_nodes(self, query: str) -> dict[str, Any]:
        q = query.lower()
        found = [
            e
            for e in self.entities
            if q in e["name"].lower()
            or q in e["entityType"].lower()
            or any(q in o.lower() for o in e["observations"])
        ]
        return self._with_relations(found)

    def open_nodes(self, names: list[str]) -> dict[str, Any]:
        return self._with_relations([e for e in self.entities if e["name"] in names])

    def _with_relations(self, found: list[dict[str, Any]]) -> dict[str, Any]:
        names = {e["name"] for e in found}
        rels = [r for r in self.relations if r["from"] in names or r["to"] in names]
        return {"entities": found, "relations": rels}


NAMES = st.sampled_from(["Ann", "Bob", "cat", "Dé", ""])
TEXTS = st.sampled_from(["likes tea", "Likes TEA", "x", "", "ann's"])
ENTITY = st.builds(lambda n, t, o: _e(n, *o, type_=t), NAMES, TEXTS, st.lists(TEXTS, max_size=3))
RELATION = st.builds(_r, NAMES, st.sampled_from(["knows", "owns"]), NAMES)
OPS = st.one_of(
    st.tuples(st.just("create_entities"), st.lists(ENTITY, max_size=3)),
    st.tuples(st.just("create_relations"), st.lists(RELATION, max_size=3)),
    st.tuples(
        st.just("add_observations"),
        st.lists(
            st.fixed_dictionaries({"entityName": NAMES, "contents": st.lists(TEXTS, max_size=3)}),
            max_size=3,
        ),
    ),
    st.tuples(st.just("delete_entities"), st.lists(NAMES, max_size=2)),
    st.tuples(
        st.just("delete_observations"),
        st.lists(
            st.fixed_dictionaries(
                {"entityName": NAMES, "observations": st.lists(TEXTS, max_size=2)}
            ),
            max_size=2,
        ),
    ),
    st.tuples(st.just("delete_relations"), st.lists(RELATION, max_size=2)),
    st.tuples(st.just("search_nodes"), TEXTS),
    st.tuples(st.just("open_nodes"), st.lists(NAMES, max_size=3)),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=12))
@example(ops=[("create_entities", [_e("Bob", "likes tea")]), ("search_nodes", "Likes TEA")])
@example(
    ops=[
        ("create_entities", [_e("Bob", "x", "likes tea", "ann's")]),
        ("delete_observations", [{"entityName": "Bob", "observations": ["x", "ann's"]}]),
        ("create_relations", [_r("Bob", "knows", "Ann"), _r("Ann", "knows", "Bob")]),
        ("delete_entities", ["Ann"]),
        ("create_entities", [_e("Ann"), _e("Ann")]),
        (
            "add_observations",
            [
                {"entityName": "Bob", "contents": ["y", "y"]},
                {"entityName": "Bob", "contents": ["y", "z"]},
            ],
        ),
    ]
)
def test_every_sequence_of_calls_answers_as_the_reference_does(ops: list[Any]) -> None:
    async def go() -> None:
        ref = Reference()
        async with await tether.open_store("memory://") as store:
            kg = KnowledgeGraph(store, "n", scope="user:ada")
            before: list[dict[str, Any]] = []  # the graph before each call that changed it
            for name, arg in ops:
                was = copy.deepcopy({"entities": ref.entities, "relations": ref.relations})
                want = getattr(ref, name)(copy.deepcopy(arg))
                try:
                    got = await getattr(kg, name)(copy.deepcopy(arg))
                except EntityNotFound:
                    got = "not found"
                except InvalidArguments:
                    got = None
                if isinstance(got, Graph):
                    got = got.to_dict()
                assert got == want, (name, arg)
                now = {"entities": ref.entities, "relations": ref.relations}
                assert (await kg.read_graph()).to_dict() == now
                if now != was:
                    before.append(was)
            # and undo walks back through every one of those graphs, to the empty one
            for was in reversed(before):
                await kg.undo()
                assert (await kg.read_graph()).to_dict() == was
            with pytest.raises(NothingToUndo):
                await kg.undo()

    asyncio.run(go())
