"""Writes: atomic commits, optimistic concurrency, duplicates, resets, namespace deletion."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from tether import Conflict, InvalidNode, InvalidRequest
from tether.core.graph import CausalNode
from tether.store import DuplicateNodes, Head, ScopeWrite, Store

from .backends import Backend
from .helpers import append, linear, node, write

Opener = Callable[..., AbstractAsyncContextManager[Store]]


async def test_unknown_scope_has_the_empty_head(store: Store, ns: str) -> None:
    assert await store.head(ns, "thread:nobody") == Head()
    assert await store.nodes(ns, "thread:nobody") == []
    assert await store.get_nodes(ns, "thread:nobody", ["cw_" + "0" * 24]) == {}
    assert await store.resource_heads(ns, "thread:nobody") == {}


async def test_commit_moves_the_head_and_nodes_read_back(store: Store, ns: str) -> None:
    nodes = await append(store, ns, "thread:a", [{"i": 1}, {"i": 2}, {"i": 3}])
    head = await store.head(ns, "thread:a")
    assert head == Head(generation=0, sequence=3, frontier=(nodes[-1].id,))
    assert [n.to_dict() for n in await store.nodes(ns, "thread:a")] == [n.to_dict() for n in nodes]
    more = await append(store, ns, "thread:a", [{"i": 4}])
    assert more[0].parents == (nodes[-1].id,)
    assert (await store.head(ns, "thread:a")).sequence == 4


async def test_stale_sequence_conflicts_and_writes_nothing(store: Store, ns: str) -> None:
    await append(store, ns, "thread:a", [{"i": 1}])
    head = await store.head(ns, "thread:a")
    mine = write("thread:a", head, linear(head, [{"mine": 1}]))
    await append(store, ns, "thread:a", [{"theirs": 1}])  # another writer moves the head
    with pytest.raises(Conflict) as e:
        await store.commit(ns, [mine])
    assert e.value.code == "conflict"
    assert not isinstance(e.value, DuplicateNodes)
    assert e.value.details["expected"] == [0, 1]
    assert e.value.details["actual"] == [0, 2]
    assert e.value.details["scope"] == "thread:a"
    assert [n.payload for n in await store.nodes(ns, "thread:a")] == [{"i": 1}, {"theirs": 1}]


async def test_new_scope_written_against_a_nonzero_head_conflicts(store: Store, ns: str) -> None:
    ghost = Head(generation=0, sequence=3, frontier=())
    nodes = [node("goal", {"x": 1}, seq=4)]
    with pytest.raises(Conflict):
        await store.commit(ns, [write("thread:new", ghost, nodes)])
    with pytest.raises(Conflict):
        await store.commit(ns, [write("thread:new", Head(generation=2), linear(Head(), [1]))])
    assert await store.head(ns, "thread:new") == Head()
    assert await store.list_scopes(ns) == []


async def test_multi_scope_commit_is_all_or_nothing(store: Store, ns: str) -> None:
    await append(store, ns, "user:u", [{"pref": 0}])
    h_thread = await store.head(ns, "thread:t")
    h_user = await store.head(ns, "user:u")
    h_app = await store.head(ns, "app")
    writes = [
        write("thread:t", h_thread, linear(h_thread, [{"msg": "hi"}])),
        write("user:u", h_user, linear(h_user, [{"pref": 1}])),
        write("app", h_app, linear(h_app, [{"app": 1}])),
    ]
    await append(store, ns, "user:u", [{"pref": "moved"}])  # only the user scope is stale
    with pytest.raises(Conflict) as e:
        await store.commit(ns, writes)
    assert e.value.details["scope"] == "user:u"
    assert await store.head(ns, "thread:t") == Head()
    assert await store.head(ns, "app") == Head()
    assert (await store.head(ns, "user:u")).sequence == 2
    assert [s.scope for s in await store.list_scopes(ns)] == ["user:u"]

    # Recomputed against the fresh heads, the same commit lands everywhere at once.
    h_user = await store.head(ns, "user:u")
    writes[1] = write("user:u", h_user, linear(h_user, [{"pref": 1}]))
    await store.commit(ns, writes)
    assert [(s.scope, s.sequence) for s in await store.list_scopes(ns)] == [
        ("app", 1),
        ("thread:t", 1),
        ("user:u", 3),
    ]


async def test_duplicate_ids_raise_and_write_nothing_anywhere(store: Store, ns: str) -> None:
    first = await append(store, ns, "thread:a", [{"i": 1}, {"i": 2}])
    head = await store.head(ns, "thread:a")
    # A node with the identity of an existing one (same kind, parents, payload) at a
    # new sequence: the scope already holds that id.
    again = dataclasses.replace(first[1], sequence=3, created_at="2020-01-01T00:00:00.000Z")
    fresh = node("goal", {"i": 3}, [first[1].id], seq=4)
    other_head = await store.head(ns, "thread:b")
    other = write("thread:b", other_head, linear(other_head, [{"b": 1}]))
    with pytest.raises(DuplicateNodes) as e:
        await store.commit(ns, [other, write("thread:a", head, [again, fresh])])
    assert isinstance(e.value, Conflict)
    assert e.value.code == "duplicate_nodes"
    assert e.value.ids == [first[1].id]
    assert await store.head(ns, "thread:a") == head
    assert await store.head(ns, "thread:b") == Head()
    assert await store.get_nodes(ns, "thread:a", [fresh.id]) == {}


async def test_a_duplicate_in_a_one_scope_commit_raises_and_writes_nothing(
    store: Store, ns: str
) -> None:
    # The common commit (one scope the store knows, a few nodes): nothing of it lands,
    # not the new node before the duplicate, not the resource head after it.
    first = await append(store, ns, "thread:a", [{"i": 1}, {"i": 2}])
    head = await store.head(ns, "thread:a")
    fresh = node("goal", {"i": 3}, [first[1].id], seq=3)
    again = dataclasses.replace(first[0], sequence=4, created_at="2020-01-01T00:00:00.000Z")
    keyed = node("resource", {"v": 1}, [fresh.id], seq=5, rk="var:x")
    with pytest.raises(DuplicateNodes) as e:
        await store.commit(ns, [write("thread:a", head, [fresh, again, keyed])])
    assert e.value.ids == [first[0].id]
    assert await store.head(ns, "thread:a") == head
    assert await store.get_nodes(ns, "thread:a", [fresh.id, keyed.id]) == {}
    assert await store.resource_head(ns, "thread:a", "var:x") is None
    # and the scope takes the same write without the duplicate
    keyed = node("resource", {"v": 1}, [fresh.id], seq=4, rk="var:x")
    await store.commit(ns, [write("thread:a", head, [fresh, keyed])])
    assert await store.resource_head(ns, "thread:a", "var:x") == keyed


async def test_a_stale_generation_conflicts_and_moves_no_resource_head(
    store: Store, ns: str
) -> None:
    await append(store, ns, "thread:a", [{"i": 1}])
    head = await store.head(ns, "thread:a")
    keyed = node("resource", {"v": 1}, head.frontier, seq=2, rk="var:x")
    await store.reset_scope(ns, "thread:a")
    await append(store, ns, "thread:a", [{"after": 1}])  # sequence 1 again, generation 1
    with pytest.raises(Conflict) as e:
        await store.commit(ns, [write("thread:a", head, [keyed])])
    assert e.value.details["expected"] == [0, 1]
    assert e.value.details["actual"] == [1, 1]
    assert await store.resource_head(ns, "thread:a", "var:x") is None
    assert [n.payload for n in await store.nodes(ns, "thread:a")] == [{"after": 1}]


async def test_one_node_may_live_in_two_scopes(store: Store, ns: str) -> None:
    a = await append(store, ns, "thread:a", [{"same": True}])
    b = await append(store, ns, "thread:b", [{"same": True}])
    assert a[0].id == b[0].id
    assert (await store.get_nodes(ns, "thread:b", [a[0].id]))[a[0].id].sequence == 1


async def test_a_write_without_nodes_asserts_the_head(store: Store, ns: str) -> None:
    await append(store, ns, "user:u", [{"v": 1}])
    h_user = await store.head(ns, "user:u")
    h_thread = await store.head(ns, "thread:t")
    check = ScopeWrite(
        scope="user:u",
        expected_generation=h_user.generation,
        expected_sequence=h_user.sequence,
        nodes=(),
        frontier=(),  # ignored: nothing is written to the user scope
    )
    await store.commit(ns, [write("thread:t", h_thread, linear(h_thread, [1])), check])
    assert await store.head(ns, "user:u") == h_user
    assert (await store.head(ns, "thread:t")).sequence == 1

    await append(store, ns, "user:u", [{"v": 2}])
    h_thread = await store.head(ns, "thread:t")
    with pytest.raises(Conflict):
        await store.commit(ns, [write("thread:t", h_thread, linear(h_thread, [2])), check])
    assert (await store.head(ns, "thread:t")).sequence == 1
    # Asserting the empty head of a scope that never existed is fine and creates nothing.
    empty = ScopeWrite(
        scope="thread:none", expected_generation=0, expected_sequence=0, nodes=(), frontier=()
    )
    await store.commit(ns, [empty])
    assert [s.scope for s in await store.list_scopes(ns)] == ["thread:t", "user:u"]


@pytest.mark.parametrize(
    "frontier",
    ["last", "empty", "two", "two_reversed", "first"],
)
async def test_the_frontier_is_stored_exactly_as_given(
    store: Store, ns: str, frontier: str
) -> None:
    a = node("goal", {"n": 1}, seq=1)
    b = node("tool_call", {"n": 2}, [a.id], seq=2)
    c = node("tool_call", {"n": 3}, [a.id], seq=3)
    given = {
        "last": (c.id,),
        "empty": (),
        "two": (b.id, c.id),
        "two_reversed": (c.id, b.id),
        "first": (a.id,),
    }[frontier]
    w = ScopeWrite(
        scope="thread:f",
        expected_generation=0,
        expected_sequence=0,
        nodes=(a, b, c),
        frontier=given,
    )
    await store.commit(ns, [w])
    assert (await store.head(ns, "thread:f")).frontier == given


async def test_branch_and_join_frontier(store: Store, ns: str) -> None:
    inf = node("inference", {"calls": 2}, seq=1)
    c1 = node("tool_call", {"c": 1}, [inf.id], seq=2)
    c2 = node("tool_call", {"c": 2}, [inf.id], seq=3)
    await store.commit(ns, [write("thread:t", Head(), [inf, c1, c2])])
    head = await store.head(ns, "thread:t")
    assert head.frontier == (c1.id, c2.id)
    join = node("inference", {"join": True}, head.frontier, seq=4)
    await store.commit(ns, [write("thread:t", head, [join])])
    assert (await store.head(ns, "thread:t")).frontier == (join.id,)


def _bad_writes() -> dict[str, Callable[[CausalNode], Any]]:
    def w(**kw: Any) -> ScopeWrite:
        base: dict[str, Any] = dict(
            scope="thread:x", expected_generation=0, expected_sequence=0, nodes=(), frontier=()
        )
        base.update(kw)
        return ScopeWrite(**base)

    return {
        "sequence_gap": lambda n: [w(nodes=(dataclasses.replace(n, sequence=2),))],
        "sequence_zero": lambda n: [w(nodes=(dataclasses.replace(n, sequence=0),))],
        "id_shape": lambda n: [w(nodes=(dataclasses.replace(n, id="cw_xyz"),))],
        "id_upper": lambda n: [w(nodes=(dataclasses.replace(n, id=n.id.upper()),))],
        "id_newline": lambda n: [w(nodes=(dataclasses.replace(n, id=n.id + "\n"),))],
        "parent_newline": lambda n: [w(nodes=(dataclasses.replace(n, parents=(n.id + "\n",)),))],
        "kind": lambda n: [w(nodes=(dataclasses.replace(n, kind="note"),))],
        "parents": lambda n: [w(nodes=(dataclasses.replace(n, parents=("nope",)),))],
        "frontier": lambda n: [w(nodes=(n,), frontier=("bad",))],
        "parent_unhashable": lambda n: [w(nodes=(dataclasses.replace(n, parents=([n.id],)),))],
        "frontier_unhashable": lambda n: [w(nodes=(n,), frontier=([n.id],))],
        "parents_list": lambda n: [w(nodes=(dataclasses.replace(n, parents=[n.id]),))],
        "twice_in_write": lambda n: [
            w(nodes=(n, dataclasses.replace(n, sequence=2)), frontier=(n.id,))
        ],
        "scope_twice": lambda n: [w(nodes=(n,), frontier=(n.id,)), w(nodes=(), frontier=())],
        "scope_name": lambda n: [w(scope="", nodes=(n,), frontier=(n.id,))],
        "scope_control_char": lambda n: [w(scope="thread:\n", nodes=(n,), frontier=(n.id,))],
        "negative_sequence": lambda n: [w(expected_sequence=-1)],
        "generation_type": lambda n: [w(expected_generation="0")],
        "created_at": lambda n: [w(nodes=(dataclasses.replace(n, created_at=5),))],
        "resource_key": lambda n: [w(nodes=(dataclasses.replace(n, resource_key=""),))],
        "not_a_write": lambda n: [{"scope": "thread:x"}],
    }


@pytest.mark.parametrize("case", sorted(_bad_writes()))
async def test_malformed_writes_are_refused_and_write_nothing(
    store: Store, ns: str, case: str
) -> None:
    good_head = await store.head(ns, "thread:ok")
    good = write("thread:ok", good_head, linear(good_head, [{"ok": 1}]))
    n = node("goal", {"x": 1}, seq=1)
    with pytest.raises((InvalidRequest, InvalidNode)):
        await store.commit(ns, [good, *_bad_writes()[case](n)])
    assert await store.head(ns, "thread:ok") == Head()
    assert await store.head(ns, "thread:x") == Head()


@pytest.mark.parametrize("bad", ["", "a\x00b", "x" * 257, 42])
async def test_bad_namespace_is_refused(store: Store, bad: Any) -> None:
    with pytest.raises(InvalidRequest):
        await store.commit(bad, [write("thread:a", Head(), linear(Head(), [1]))])
    with pytest.raises(InvalidRequest):
        await store.reset_scope(bad, "thread:a")
    with pytest.raises(InvalidRequest):
        await store.delete_namespace(bad)


# --- reset and namespace deletion ----------------------------------------------------------


async def test_reset_fences_a_late_writer_and_nothing_comes_back(store: Store, ns: str) -> None:
    old = await append(store, ns, "thread:a", [{"secret": 1}, {"secret": 2}])
    rk = node("resource", {"v": 1}, [old[-1].id], seq=3, rk="var:x")
    head = await store.head(ns, "thread:a")
    await store.commit(ns, [write("thread:a", head, [rk])])
    head = await store.head(ns, "thread:a")
    late = write("thread:a", head, linear(head, [{"late": True}]))  # computed before the reset

    new_head = await store.reset_scope(ns, "thread:a")
    assert new_head == Head(generation=1, sequence=0, frontier=())
    assert await store.head(ns, "thread:a") == new_head
    with pytest.raises(Conflict) as e:
        await store.commit(ns, [late])
    assert e.value.details["actual"] == [1, 0]
    # Nothing of the old generation is readable, and the late write did not land.
    assert await store.nodes(ns, "thread:a") == []
    assert await store.get_nodes(ns, "thread:a", [n.id for n in old] + [rk.id]) == {}
    assert await store.resource_heads(ns, "thread:a") == {}
    assert await store.resource_head(ns, "thread:a", "var:x") is None
    assert await store.versions(ns, "thread:a", "var:x") == []
    assert await store.list_scopes(ns) == []
    assert ns not in await store.list_namespaces(after=ns[:-1], limit=1000)
    # A writer at generation 0, sequence 0 (as if the scope were new) is fenced too.
    with pytest.raises(Conflict):
        await store.commit(ns, [write("thread:a", Head(), linear(Head(), [{"secret": 1}]))])

    # The new generation starts at sequence 1 and may hold the very same content again.
    again = await append(store, ns, "thread:a", [{"secret": 1}])
    assert again[0].id == old[0].id
    assert again[0].sequence == 1
    assert (await store.head(ns, "thread:a")).generation == 1
    assert [s.generation for s in await store.list_scopes(ns)] == [1]
    assert await store.resource_heads(ns, "thread:a") == {}


async def test_reset_of_a_scope_that_never_existed_fences_new_writers(
    store: Store, ns: str
) -> None:
    assert await store.reset_scope(ns, "thread:new") == Head(generation=1)
    with pytest.raises(Conflict):
        await store.commit(ns, [write("thread:new", Head(), linear(Head(), [1]))])
    assert await store.reset_scope(ns, "thread:new") == Head(generation=2)
    assert (await store.head(ns, "thread:new")).generation == 2
    assert await store.list_scopes(ns) == []


async def test_delete_namespace_resets_every_scope_and_only_that_namespace(
    store: Store, ns: str
) -> None:
    other = ns + "-other"
    for scope in ("thread:a", "thread:b", "user:u"):
        await append(store, ns, scope, [{"s": scope}])
    await store.reset_scope(ns, "thread:b")  # generation 1, empty
    await append(store, other, "thread:a", [{"keep": True}])
    late_head = await store.head(ns, "thread:a")
    late = write("thread:a", late_head, linear(late_head, [{"late": 1}]))

    assert await store.delete_namespace(ns) == 2  # scopes that held nodes
    assert await store.head(ns, "thread:a") == Head(generation=1)
    assert await store.head(ns, "thread:b") == Head(generation=2)
    assert await store.head(ns, "user:u") == Head(generation=1)
    assert await store.list_scopes(ns) == []
    names = await store.list_namespaces(after=ns[:-1], limit=1000)
    assert ns not in names and other in names
    with pytest.raises(Conflict):
        await store.commit(ns, [late])
    assert [n.payload for n in await store.nodes(other, "thread:a")] == [{"keep": True}]
    assert await store.delete_namespace(ns) == 0
    assert await store.delete_namespace(ns + "-never") == 0


async def test_namespaces_are_isolated(store: Store, ns: str) -> None:
    a, b = ns + "-a", ns + "-b"
    na = await append(store, a, "thread:t", [{"who": "a"}])
    await append(store, b, "thread:t", [{"who": "b"}, {"who": "b2"}])
    assert (await store.head(a, "thread:t")).sequence == 1
    assert (await store.head(b, "thread:t")).sequence == 2
    assert await store.get_nodes(b, "thread:t", [na[0].id]) == {}
    await store.reset_scope(a, "thread:t")
    assert (await store.head(b, "thread:t")) == Head(
        generation=0, sequence=2, frontier=((await store.nodes(b, "thread:t"))[-1].id,)
    )
    assert [s.scope for s in await store.list_scopes(b)] == ["thread:t"]


# --- several stores on one target (processes sharing a file or database) -----------------


async def test_two_stores_on_one_target_see_each_other_and_conflict(
    backend: Backend, open_backend: Opener, ns: str
) -> None:
    if not backend.shared:
        pytest.skip(f"{backend.name}: each store holds its own data")
    async with open_backend() as s1, open_backend() as s2:
        await append(s1, ns, "thread:t", [{"from": 1}])
        head = await s2.head(ns, "thread:t")
        assert head.sequence == 1
        mine = write("thread:t", head, linear(head, [{"from": 2}]))
        await append(s1, ns, "thread:t", [{"from": "1b"}])
        with pytest.raises(Conflict):
            await s2.commit(ns, [mine])
        await s2.reset_scope(ns, "thread:t")
        assert (await s1.head(ns, "thread:t")).generation == 1
        with pytest.raises(Conflict):
            await append_at(s1, ns, "thread:t", Head(generation=0, sequence=2))


async def append_at(store: Store, ns: str, scope: str, head: Head) -> None:
    await store.commit(ns, [write(scope, head, linear(head, [{"at": head.sequence}]))])


async def test_data_survives_close_and_reopen(
    backend: Backend, open_backend: Opener, ns: str
) -> None:
    if not backend.persistent:
        pytest.skip(f"{backend.name} keeps nothing after close")
    async with open_backend() as s1:
        nodes = await append(s1, ns, "thread:t", [{"n": i} for i in range(5)])
        await s1.reset_scope(ns, "thread:gone")
    async with open_backend() as s2:
        assert [n.to_dict() for n in await s2.nodes(ns, "thread:t")] == [n.to_dict() for n in nodes]
        assert await s2.head(ns, "thread:t") == Head(sequence=5, frontier=(nodes[-1].id,))
        assert await s2.head(ns, "thread:gone") == Head(generation=1)


async def test_closed_store_refuses_calls_with_a_typed_error(
    backend: Backend, open_backend: Opener, ns: str
) -> None:
    if backend.name == "memory":
        pytest.skip("the memory store has nothing to close")
    from tether import TetherError

    async with open_backend() as s:
        pass
    with pytest.raises(TetherError):
        await s.head(ns, "thread:t")
    await s.close()  # closing twice is harmless
