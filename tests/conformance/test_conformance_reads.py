"""Reads: paging, lookups by id, resource heads and versions, listings, stats, round trips."""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from tether.core.graph import CausalNode, node_id, now_iso
from tether.store import Head, Store

from .backends import Backend
from .helpers import append, linear, node, write

Opener = Callable[..., AbstractAsyncContextManager[Store]]


async def test_paging_by_sequence_matches_slicing(store: Store, ns: str) -> None:
    nodes = await append(store, ns, "thread:p", [{"i": i} for i in range(25)])
    for after in (0, 1, 5, 24, 25, 30):
        for before in (None, 0, 1, 2, 10, 26, 100):
            for limit in (0, 1, 3, 100):
                for descending in (False, True):
                    want = [
                        n.sequence
                        for n in nodes
                        if after < n.sequence and (before is None or n.sequence < before)
                    ]
                    want = (want[::-1] if descending else want)[:limit]
                    got = await store.nodes(
                        ns,
                        "thread:p",
                        after=after,
                        before=before,
                        limit=limit,
                        descending=descending,
                    )
                    assert [n.sequence for n in got] == want, (after, before, limit, descending)


async def test_paging_through_a_long_scope_returns_every_node_once(store: Store, ns: str) -> None:
    head = Head()
    for batch in range(5):
        nodes = linear(head, [{"b": batch, "i": i} for i in range(100)])
        await store.commit(ns, [write("thread:long", head, nodes)])
        head = await store.head(ns, "thread:long")
    seen: list[int] = []
    after = 0
    while page := await store.nodes(ns, "thread:long", after=after, limit=64):
        seen.extend(n.sequence for n in page)
        after = page[-1].sequence
    assert seen == list(range(1, 501))
    tail = await store.nodes(ns, "thread:long", limit=3, descending=True)
    assert [n.sequence for n in tail] == [500, 499, 498]


async def test_get_nodes(store: Store, ns: str) -> None:
    a = await append(store, ns, "thread:a", [{"i": i} for i in range(5)])
    b = await append(store, ns, "thread:b", [{"only": "b"}])
    missing = "cw_" + "f" * 24
    got = await store.get_nodes(
        ns, "thread:a", [a[3].id, missing, a[0].id, b[0].id, a[3].id, "not-an-id", "cw_zz"]
    )
    assert set(got) == {a[0].id, a[3].id}
    assert got[a[3].id].to_dict() == a[3].to_dict()
    assert got[a[0].id].sequence == 1
    assert await store.get_nodes(ns, "thread:a", []) == {}
    many = await store.get_nodes(ns, "thread:a", [n.id for n in a] * 300)
    assert set(many) == {n.id for n in a}


async def _resource(store: Store, ns: str, scope: str, key: str, value: Any) -> CausalNode:
    """Append a resource version the way the core does: previous head as an extra parent."""
    head = await store.head(ns, scope)
    prev = await store.resource_head(ns, scope, key)
    parents = list(head.frontier)
    if prev is not None and prev.id not in parents:
        parents.append(prev.id)
    n = node("resource", {"value": value}, parents, seq=head.sequence + 1, rk=key)
    await store.commit(ns, [write(scope, head, [n])])
    return n


async def test_resource_heads_and_prefixes(store: Store, ns: str) -> None:
    s = "thread:r"
    await append(store, ns, s, [{"plain": True}])
    a1 = await _resource(store, ns, s, "var:a", 1)
    ab = await _resource(store, ns, s, "var:ab", "ab")
    a2 = await _resource(store, ns, s, "var:a", 2)
    b = await _resource(store, ns, s, "var:b", "b")
    mem = await _resource(store, ns, s, "semantic:memory:x", "m")
    assert a1.id in a2.parents

    assert (await store.resource_head(ns, s, "var:a")).to_dict() == a2.to_dict()  # type: ignore[union-attr]
    assert await store.resource_head(ns, s, "var:") is None
    assert await store.resource_head(ns, s, "var:zz") is None
    heads = await store.resource_heads(ns, s)
    assert {k: v.id for k, v in heads.items()} == {
        "var:a": a2.id,
        "var:ab": ab.id,
        "var:b": b.id,
        "semantic:memory:x": mem.id,
    }
    assert set(await store.resource_heads(ns, s, "var:a")) == {"var:a", "var:ab"}
    assert set(await store.resource_heads(ns, s, "var:ab")) == {"var:ab"}
    assert set(await store.resource_heads(ns, s, "var:")) == {"var:a", "var:ab", "var:b"}
    assert set(await store.resource_heads(ns, s, "semantic:")) == {"semantic:memory:x"}
    assert await store.resource_heads(ns, s, "zzz") == {}
    assert await store.resource_heads(ns, "thread:other", "var:") == {}


async def test_resource_heads_across_scopes(store: Store, ns: str) -> None:
    made: dict[tuple[str, str], CausalNode] = {}
    # Scope names chosen to sort by code point, not by length or locale.
    threads = ["thread:a", "thread:a:b", "thread:b", "thread:\u00e9", "thread:\U0010ffff"]
    for i, s in enumerate(threads):
        for key in ("task:r1", "task:r2"):
            made[(s, key)] = await _resource(store, ns, s, key, {"s": s, "i": i})
        await _resource(store, ns, s, "var:x", i)
    made[("thread:a", "task:r1")] = await _resource(store, ns, "thread:a", "task:r1", "v2")
    await _resource(store, ns, "app", "task:r1", "in app")
    await _resource(store, ns, "user:u", "task:r1", "in a user")
    await append(store, ns, "thread:plain", [{"no": "resources"}])
    await _resource(store, ns, "thread:gone", "task:r1", "reset")
    await store.reset_scope(ns, "thread:gone")
    await _resource(store, ns + "-other", "thread:a", "task:r1", "other namespace")

    want = sorted((s, k) for s, k in made)
    got = await store.resource_heads_across(ns, "task:")
    assert [(s, k) for s, k, _ in got] == want
    for s, k, n in got:  # the current head, payload decoded with its own scope
        assert n.to_dict() == made[(s, k)].to_dict()
        assert n.to_dict() == (await store.resource_head(ns, s, k)).to_dict()  # type: ignore[union-attr]
    assert [(s, k) for s, k, _ in await store.resource_heads_across(ns, "task:r2")] == [
        x for x in want if x[1] == "task:r2"
    ]
    assert [
        (s, k)
        for s, k, _ in await store.resource_heads_across(ns, "task:", scope_prefix="thread:a")
    ] == [x for x in want if x[0].startswith("thread:a")]
    everywhere = await store.resource_heads_across(ns, "task:", scope_prefix="")
    assert [(s, k) for s, k, _ in everywhere] == sorted(
        [*want, ("app", "task:r1"), ("user:u", "task:r1")]
    )
    assert await store.resource_heads_across(ns, "nothing:") == []
    assert await store.resource_heads_across(ns, "task:", limit=0) == []
    assert await store.resource_heads_across("never-written", "task:") == []
    # Paging: (scope, key) cursors, any page size, no row twice or missed.
    for size in (1, 2, 3, 7, 100):
        seen: list[tuple[str, str]] = []
        after: tuple[str, str] | None = None
        while True:
            page = await store.resource_heads_across(ns, "task:", after=after, limit=size)
            assert len(page) <= size
            seen += [(s, k) for s, k, _ in page]
            if len(page) < size:
                break
            after = (page[-1][0], page[-1][1])
        assert seen == want, size
    # A cursor that names no row (a key between two, a scope that is gone) still pages on.
    assert [
        (s, k)
        for s, k, _ in await store.resource_heads_across(
            ns, "task:", after=("thread:a", "task:r15")
        )
    ] == want[1:]
    assert [
        (s, k)
        for s, k, _ in await store.resource_heads_across(ns, "task:", after=("thread:az", ""))
    ] == want[4:]


async def test_resource_heads_across_from_any_cursor(store: Store, ns: str) -> None:
    """Whatever the cursor names (a row, a key outside the prefix, a scope that is gone,
    empty, outside the scope prefix, or never written), a page holds exactly the heads
    after it in (scope, key) order, and its keys' newest versions."""
    for i, s in enumerate(["thread:a", "thread:b", "thread:c", "thread:d\u00e9", "user:x"]):
        for key in ("task:1", "task:2", "tick", "var:z"):
            for v in range(2):
                await _resource(store, ns, s, key, {"s": s, "k": key, "v": v, "i": i})
    await append(store, ns, "thread:bb", [{"no": "keys"}])
    await _resource(store, ns, "thread:c0", "task:1", "reset")
    await store.reset_scope(ns, "thread:c0")
    cursors = [
        ("app", ""),
        ("thread:a", ""),
        ("thread:a", "task:1"),
        ("thread:a", "task:"),
        ("thread:a", "t"),
        ("thread:a", "zzz"),
        ("thread:b", "task:2"),
        ("thread:bb", "task:1"),
        ("thread:c0", "task:1"),
        ("thread:d", "a"),
        ("thread:d\u00e9", "task:2"),
        ("thread:z", ""),
        ("thread;", ""),
        ("user:x", "task:1"),
        ("zz", ""),
    ]
    for key_prefix in ("task:", "t", ""):
        for scope_prefix in ("thread:", "thread:c", ""):
            everything = await store.resource_heads_across(
                ns, key_prefix, scope_prefix=scope_prefix, limit=1000
            )
            rows = [(s, k) for s, k, _ in everything]
            assert rows == sorted(rows)
            assert all(s.startswith(scope_prefix) and k.startswith(key_prefix) for s, k in rows)
            for s, k, n in everything:  # the newest version, of its own scope and key
                assert {**n.payload["value"], "i": 0} == {"s": s, "k": k, "v": 1, "i": 0}
            for after in cursors:
                want = [r for r in rows if r > after]
                for limit in (1, 2, 1000):
                    got = await store.resource_heads_across(
                        ns, key_prefix, scope_prefix=scope_prefix, after=after, limit=limit
                    )
                    assert [(s, k) for s, k, _ in got] == want[:limit], (
                        key_prefix,
                        scope_prefix,
                        after,
                        limit,
                    )
    every = await store.resource_heads_across(ns, "", scope_prefix="", limit=1000)
    assert len(every) == 5 * 4


async def test_resource_prefixes_at_the_edges_of_unicode(store: Store, ns: str) -> None:
    s = "thread:u"
    keys = [
        "k\U0010ffff",
        "k\U0010ffffz",
        "l",
        "x\ud7ffa",
        "x\ue000",
        "é",
        "éa",
        "ê",
        "日本",
        "日本語",
    ]
    for k in keys:
        await _resource(store, ns, s, k, k)
    for prefix in ["k\U0010ffff", "k", "x\ud7ff", "x", "é", "日本", "日", ""]:
        want = {k for k in keys if k.startswith(prefix)}
        assert set(await store.resource_heads(ns, s, prefix)) == want, prefix


async def test_versions_oldest_first(store: Store, ns: str) -> None:
    s = "user:v"
    made = [await _resource(store, ns, s, "var:count", i) for i in range(4)]
    await _resource(store, ns, s, "var:other", "x")
    got = await store.versions(ns, s, "var:count")
    assert [n.id for n in got] == [n.id for n in made]
    assert [n.payload["value"] for n in got] == [0, 1, 2, 3]
    assert [n.id for n in await store.versions(ns, s, "var:count", limit=2)] == [
        made[0].id,
        made[1].id,
    ]
    assert await store.versions(ns, s, "var:none") == []
    assert await store.versions(ns, "user:none", "var:count") == []


async def test_list_namespaces_pages_and_skips_empty_ones(store: Store, ns: str) -> None:
    names = [f"{ns}-{c}" for c in "abcde"]
    for n in names:
        await append(store, n, "thread:t", [{"ns": n}])
    await store.reset_scope(names[2], "thread:t")  # c is now empty: not listed
    await store.reset_scope(f"{ns}-only-reset", "thread:t")
    live = [n for n in names if n != names[2]]
    mine = [n for n in await store.list_namespaces(after=ns, limit=1000) if n.startswith(ns)]
    assert mine == live
    assert await store.list_namespaces(after=ns, limit=2) == live[:2]
    assert await store.list_namespaces(after=live[1], limit=2) == live[2:4]
    assert await store.list_namespaces(after=live[3], limit=1) != [live[3]]
    assert await store.list_namespaces(after=ns, limit=0) == []
    everything = await store.list_namespaces(limit=100_000)
    assert everything == sorted(everything)
    assert set(live) <= set(everything)


async def test_list_scopes_pages_filters_and_skips_empty_ones(store: Store, ns: str) -> None:
    scopes = ["app", "thread:a", "thread:b", "thread:c", "thread:d", "user:a", "user:b"]
    for i, s in enumerate(scopes):
        await append(store, ns, s, [{"i": j} for j in range(i + 1)])
    await store.reset_scope(ns, "thread:c")
    await store.reset_scope(ns, "thread:never")
    await append(store, ns, "thread:d", [{"more": 1}])
    live = [s for s in scopes if s != "thread:c"]

    infos = await store.list_scopes(ns)
    assert [i.scope for i in infos] == live
    by = {i.scope: i for i in infos}
    assert by["thread:a"].sequence == 2 and by["thread:a"].generation == 0
    assert by["thread:d"].sequence == 6
    assert [i.scope for i in await store.list_scopes(ns, prefix="thread:")] == [
        "thread:a",
        "thread:b",
        "thread:d",
    ]
    assert [i.scope for i in await store.list_scopes(ns, prefix="thread:", limit=2)] == [
        "thread:a",
        "thread:b",
    ]
    assert [i.scope for i in await store.list_scopes(ns, prefix="thread:", after="thread:b")] == [
        "thread:d"
    ]
    assert [i.scope for i in await store.list_scopes(ns, prefix="thread:", after="a")] == [
        "thread:a",
        "thread:b",
        "thread:d",
    ]
    assert await store.list_scopes(ns, prefix="thread:", after="u") == []
    assert [i.scope for i in await store.list_scopes(ns, after="thread:d", limit=5)] == [
        "user:a",
        "user:b",
    ]
    assert await store.list_scopes(ns, prefix="nope") == []
    assert await store.list_scopes(ns, limit=0) == []
    await append(store, ns, "thread:c", [{"back": True}])
    c = [i for i in await store.list_scopes(ns, prefix="thread:c")]
    assert [(i.scope, i.generation, i.sequence) for i in c] == [("thread:c", 1, 1)]


async def test_stats(store: Store, ns: str) -> None:
    assert (await store.stats(ns, "thread:s")).nodes == 0
    made = await append(store, ns, "thread:s", [{"i": i, "pad": "x" * i} for i in range(4)])
    head = await store.head(ns, "thread:s")
    extra = [
        node("inference", {"c": "é" * 10}, head.frontier, seq=5),
    ]
    await store.commit(ns, [write("thread:s", head, extra)])
    st = await store.stats(ns, "thread:s")
    assert st.nodes == 5
    assert st.kinds == {"goal": 4, "inference": 1}
    assert st.payload_bytes == sum(
        len(store.codec.encode(ns, "thread:s", n.payload)) for n in [*made, *extra]
    )


PAYLOADS: dict[str, Any] = {
    "unicode": {"t": 'héllo wörld ✓ 日本語 🎉 \u2028 \u0000 \\ " \n\t', "é": ["ü", "ß"]},
    "emoji_keys": {"🎉": 1, "a": {"日本": None}},
    "nested": {"a": [{"b": [{"c": [1, [2, [3, {"d": {}}]]]}]}], "e": [], "f": {}},
    "deep": {"x": [[[[[[[[[[[[[[[[[[[[["deep"]]]]]]]]]]]]]]]]]]]]]},
    "floats": [0.1, 1e-300, 1.7976931348623157e308, -0.0, 5e-324, 1.0, -2.5, 1e21, 123456.789],
    "ints": [0, -1, 2**53 - 1, -(2**53 - 1), 10**15],
    "scalars": [True, False, None, "", "0", 0],
    "string": "just a string",
    "null": None,
    "large": {"blob": "x" * 200_000, "n": list(range(1000))},
}


@pytest.mark.parametrize("name", sorted(PAYLOADS))
async def test_payloads_round_trip_exactly(store: Store, ns: str, name: str) -> None:
    payload = PAYLOADS[name]
    head = await store.head(ns, "thread:rt")
    n = node("tool_result", payload, seq=1, rk="var:rt")
    await store.commit(ns, [write("thread:rt", head, [n])])
    reads = [
        (await store.nodes(ns, "thread:rt"))[0],
        (await store.get_nodes(ns, "thread:rt", [n.id]))[n.id],
        await store.resource_head(ns, "thread:rt", "var:rt"),
        (await store.resource_heads(ns, "thread:rt"))["var:rt"],
        (await store.versions(ns, "thread:rt", "var:rt"))[0],
    ]
    for back in reads:
        assert back is not None
        assert _typed(back.payload) == _typed(payload)
        # Identity recomputed from what was read equals the stored id: nothing drifted.
        assert node_id(back.kind, back.parents, back.payload, back.resource_key) == n.id
        assert back.to_dict() == n.to_dict()


def _typed(v: Any) -> Any:
    """A structure that tells 1 from 1.0 from True and -0.0 from 0.0."""
    if isinstance(v, dict):
        return {k: _typed(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_typed(x) for x in v]
    if isinstance(v, float):
        return ("float", v, math.copysign(1, v))
    return (type(v).__name__, v)


@pytest.mark.parametrize(
    "created_at",
    [
        "2024-02-29T23:59:59.999Z",
        "1970-01-01T00:00:00.000Z",
        "1969-12-31T23:59:59.999Z",
        "0001-01-01T00:00:00.000Z",
        "9999-12-31T23:59:59.999Z",
        "2024-01-01T00:00:00Z",
        "2024-01-01T00:00:00.123456+02:00",
        "2024-01-01T00:00:00.000+00:00",
        "2024-06-01T12:00:00.5Z",
    ],
)
async def test_created_at_is_kept_verbatim(store: Store, ns: str, created_at: str) -> None:
    n = node("goal", {"t": created_at}, seq=1, created_at=created_at)
    m = node("goal", {"now": True}, [n.id], seq=2, created_at=now_iso())
    await store.commit(ns, [write("thread:c", Head(), [n, m])])
    got = await store.nodes(ns, "thread:c")
    assert [g.created_at for g in got] == [created_at, m.created_at]


class RecordingCodec:
    """Reverses the JSON bytes and prefixes a tag: stored bytes are not plain JSON."""

    def __init__(self) -> None:
        self.encoded: list[tuple[str, str]] = []
        self.decoded: list[tuple[str, str]] = []

    def encode(self, namespace: str, scope: str, payload: Any) -> bytes:
        import orjson

        self.encoded.append((namespace, scope))
        return b"T1" + orjson.dumps(payload)[::-1]

    def decode(self, namespace: str, scope: str, data: bytes) -> Any:
        import orjson

        assert data[:2] == b"T1", "the store handed back bytes the codec did not write"
        self.decoded.append((namespace, scope))
        return orjson.loads(data[2:][::-1])


async def test_payloads_go_through_the_codec(
    backend: Backend, open_backend: Opener, ns: str
) -> None:
    if not backend.accepts_codec:
        pytest.skip(f"{backend.name} brings its own codec")
    codec = RecordingCodec()
    async with open_backend(codec=codec) as store:
        made = await append(store, ns, "thread:c", [{"secret": "s3"}, {"k": [1, 2]}])
        assert set(codec.encoded) == {(ns, "thread:c")}
        got = await store.nodes(ns, "thread:c")
        assert [g.payload for g in got] == [{"secret": "s3"}, {"k": [1, 2]}]
        assert codec.decoded and set(codec.decoded) == {(ns, "thread:c")}
        st = await store.stats(ns, "thread:c")
        assert st.payload_bytes == sum(len(codec.encode(ns, "thread:c", n.payload)) for n in made)
