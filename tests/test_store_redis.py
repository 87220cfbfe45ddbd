"""The Redis backend against a real server: the store contract, checked against MemoryStore.

Every test gets its own key prefix in db 15 (TETHER_TEST_REDIS_URL) and deletes its
keys afterwards with SCAN + UNLINK: other engineers' tests share the server. Every test
that takes ``redis_url`` runs twice: on that server, and on the session's local Redis
Cluster (3 masters), reached by a plain URL to one of its nodes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from _wire import RoundTrips, commit_round_trips
from tether import Conflict, InvalidNode, InvalidRequest, StoreError, Transaction, transact
from tether.core.graph import make_node
from tether.store import DuplicateNodes, Head, ScopeWrite, Store, open_store
from tether.store import redis as redis_mod
from tether.store.in_memory import MemoryStore
from tether.store.redis import RedisStore

pytestmark = pytest.mark.redis

_CLUSTER_URLS: set[str] = set()


@pytest.fixture(params=["server", "cluster"])
def redis_url(request: pytest.FixtureRequest) -> str:
    """The shared server (TETHER_TEST_REDIS_URL), then the local cluster."""
    if request.param == "cluster":
        url: str = request.getfixturevalue("redis_cluster_url")
        _CLUSTER_URLS.add(url)
        return url
    from conftest import server_url

    return server_url("TETHER_TEST_REDIS_URL")


SRC = Path(__file__).resolve().parents[1] / "src" / "tether" / "store"


def _prefix() -> str:
    return f"tt-{uuid.uuid4().hex[:12]}:"


async def _open(url: str, **options: Any) -> RedisStore:
    s = await open_store(url, **options)
    assert isinstance(s, RedisStore)
    return s


async def _raw(redis_url: str) -> Any:
    if redis_url in _CLUSTER_URLS:
        return RedisCluster.from_url(redis_url, decode_responses=False)
    return aioredis.Redis.from_url(redis_url, decode_responses=False)


async def _keys_under(redis_url: str, prefix: str) -> list[bytes]:
    r = await _raw(redis_url)
    try:
        return [k async for k in r.scan_iter(match=prefix.encode() + b"*", count=1000)]
    finally:
        await r.aclose()


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[RedisStore]:
    s = await _open(redis_url, prefix=_prefix())
    try:
        yield s
    finally:
        if s._closed:
            s = await _open(redis_url, prefix=s.prefix)
        await s.drop_prefix()
        await s.close()


async def _write(store: Store, ns: str, scope: str, kinds: list[str], **kw: Any) -> list[Any]:
    """Append nodes of these kinds to one scope in one transaction; return them."""
    txn = Transaction(store, ns)
    out = [await txn.append(scope, k, {"i": i, **kw}) for i, k in enumerate(kinds)]
    await txn.commit()
    return out


def _write_of(head: Head, scope: str, payloads: list[Any]) -> ScopeWrite:
    nodes, frontier = [], list(head.frontier)
    for i, p in enumerate(payloads):
        n = make_node("goal", p, frontier, sequence=head.sequence + i + 1)
        nodes.append(n)
        frontier = [n.id]
    return ScopeWrite(
        scope=scope,
        expected_generation=head.generation,
        expected_sequence=head.sequence,
        nodes=tuple(nodes),
        frontier=tuple(frontier),
    )


# -- opening ----------------------------------------------------------------------


async def test_open_takes_prefix_from_url_and_option(redis_url: str) -> None:
    p = _prefix()
    sep = "&" if "?" in redis_url else "?"
    s = await _open(f"{redis_url}{sep}prefix={p}")
    try:
        assert s.prefix == p
        await _write(s, "ns", "thread:t", ["goal"])
        keys = await _keys_under(redis_url, p)
        assert keys and all(k.startswith(p.encode()) for k in keys)
    finally:
        await s.drop_prefix()
        await s.close()
    assert await _keys_under(redis_url, p) == []


@pytest.mark.parametrize("bad", ["", "a b:", "x{y}:", "a*:", "p?", "[x]"])
async def test_bad_prefix_is_refused(redis_url: str, bad: str) -> None:
    with pytest.raises(InvalidRequest) as e:
        await open_store(redis_url, prefix=bad)
    assert e.value.code == "invalid_request"


async def test_unknown_option_is_refused(redis_url: str) -> None:
    with pytest.raises(InvalidRequest, match="unknown Redis store option"):
        await open_store(redis_url, durability="full")


async def test_unreachable_server_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="connect"):
        await open_store("redis://127.0.0.1:1/0", socket_connect_timeout=1)


async def test_closed_store_refuses_work(store: RedisStore) -> None:
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.head("ns", "app")


# -- commit, conflicts, duplicates ------------------------------------------------


async def test_commit_is_atomic_across_scopes(store: RedisStore) -> None:
    await _write(store, "ns", "thread:a", ["goal"])
    stale_a = await store.head("ns", "thread:a")
    await _write(store, "ns", "thread:a", ["answer"])  # moves thread:a
    head_b = await store.head("ns", "user:u")
    writes = [
        _write_of(head_b, "user:u", [{"pref": 1}]),
        _write_of(stale_a, "thread:a", [{"x": 1}]),
    ]
    with pytest.raises(Conflict) as e:
        await store.commit("ns", writes)
    assert e.value.code == "conflict"
    assert e.value.details["scope"] == "thread:a"
    assert e.value.details["expected"] == [0, 1] and e.value.details["actual"] == [0, 2]
    # The valid write to user:u did not land either.
    assert await store.head("ns", "user:u") == Head()
    assert await store.nodes("ns", "user:u") == []
    assert (await store.head("ns", "thread:a")).sequence == 2


async def test_commit_writes_every_scope_and_frontier(store: RedisStore) -> None:
    txn = Transaction(store, "ns")
    g = await txn.append("thread:a", "goal", {"q": 1})
    m = await txn.semantic("user:u", "preference", "lang", "fr")
    a = await txn.append("app", "system", {"s": 1})
    await txn.commit()
    for scope, node in (("thread:a", g), ("user:u", m), ("app", a)):
        head = await store.head("ns", scope)
        assert head == Head(generation=0, sequence=1, frontier=(node.id,))
        assert await store.nodes("ns", scope) == [node]


async def test_duplicate_nodes_write_nothing_and_name_the_ids(store: RedisStore) -> None:
    first = await _write(store, "ns", "thread:a", ["goal", "answer"])
    head = await store.head("ns", "thread:a")
    again = dataclasses.replace(first[1], sequence=3)
    fresh = make_node("goal", {"new": 1}, [first[1].id], sequence=4)
    w = ScopeWrite(
        scope="thread:a",
        expected_generation=0,
        expected_sequence=2,
        nodes=(again, fresh),
        frontier=(fresh.id,),
    )
    other = _write_of(await store.head("ns", "app"), "app", [{"a": 1}])
    with pytest.raises(DuplicateNodes) as e:
        await store.commit("ns", [other, w])
    assert e.value.ids == [first[1].id] and e.value.code == "duplicate_nodes"
    assert isinstance(e.value, Conflict)
    assert await store.head("ns", "thread:a") == head
    assert await store.head("ns", "app") == Head()
    assert await store.get_nodes("ns", "thread:a", [fresh.id]) == {}


async def test_transaction_resolves_duplicates_idempotently(store: RedisStore) -> None:
    n1 = (await _write(store, "ns", "thread:a", ["goal"]))[0]
    # A second writer computes the same node against the same (empty) head.
    txn = Transaction(store, "ns")
    await txn.head("thread:a")  # reads the head after the first write: seq 1
    n2 = await txn.append("thread:a", "goal", {"i": 0}, parents=[])
    assert n2.id == n1.id  # content identity: same body, same id
    # Append is idempotent: the existing node is returned and nothing is written.
    await txn.commit()
    assert (await store.head("ns", "thread:a")).sequence == 1


async def test_generation_fence_after_reset(store: RedisStore) -> None:
    await _write(store, "ns", "thread:a", ["goal", "answer"])
    stale = await store.head("ns", "thread:a")
    assert await store.reset_scope("ns", "thread:a") == Head(generation=1)
    # Rebuild to the same sequence under the new generation: only the generation differs.
    await _write(store, "ns", "thread:a", ["goal", "answer"], again=True)
    assert (await store.head("ns", "thread:a")).sequence == stale.sequence
    with pytest.raises(Conflict) as e:
        await store.commit("ns", [_write_of(stale, "thread:a", [{"late": 1}])])
    assert e.value.details["expected"] == [0, 2] and e.value.details["actual"] == [1, 2]
    nodes = await store.nodes("ns", "thread:a")
    assert [n.payload.get("again") for n in nodes] == [True, True]
    # A writer that computed against the empty scope after the reset also fails once moved.
    with pytest.raises(Conflict):
        await store.commit("ns", [_write_of(Head(generation=1), "thread:a", [{"x": 1}])])


async def test_reset_deletes_everything_of_the_scope_only(store: RedisStore) -> None:
    txn = Transaction(store, "ns")
    await txn.semantic("thread:a", "memory", "k", "v")
    await txn.append("thread:b", "goal", {"x": 1})
    await txn.commit()
    await store.reset_scope("ns", "thread:a")
    assert await store.nodes("ns", "thread:a") == []
    assert await store.resource_heads("ns", "thread:a") == {}
    assert await store.versions("ns", "thread:a", "semantic:memory:k") == []
    assert await store.stats("ns", "thread:a") == (await MemoryStore().stats("ns", "x"))
    assert [s.scope for s in await store.list_scopes("ns")] == ["thread:b"]
    assert (await store.head("ns", "thread:b")).sequence == 1


async def test_reset_leaves_only_the_generation(store: RedisStore, redis_url: str) -> None:
    await _write(store, "ns", "thread:a", ["goal"])
    await store.reset_scope("ns", "thread:a")
    keys = [k for k in await _keys_under(redis_url, store.prefix) if k.endswith(b":thread:a")]
    assert len(keys) == 1 and b":h:" in keys[0]
    r = await _raw(redis_url)
    try:
        assert await r.hgetall(keys[0]) == {b"g": b"1", b"s": b"0", b"f": b""}
    finally:
        await r.aclose()


async def test_write_with_wrong_sequences_is_refused(store: RedisStore) -> None:
    n = make_node("goal", {"x": 1}, [], sequence=5)
    w = ScopeWrite(
        scope="app", expected_generation=0, expected_sequence=0, nodes=(n,), frontier=(n.id,)
    )
    with pytest.raises(InvalidNode) as e:
        await store.commit("ns", [w])
    assert e.value.code == "sequence"
    with pytest.raises(InvalidRequest, match="twice"):
        await store.commit("ns", [_write_of(Head(), "app", [1]), _write_of(Head(), "app", [2])])
    assert await store.head("ns", "app") == Head()


async def test_a_write_without_nodes_only_asserts_the_head(
    store: RedisStore, redis_url: str
) -> None:
    await _write(store, "ns", "thread:a", ["goal"])
    read = await store.head("ns", "thread:a")
    assertion = ScopeWrite(
        scope="thread:a", expected_generation=0, expected_sequence=1, nodes=(), frontier=()
    )
    empty = ScopeWrite(
        scope="user:u", expected_generation=0, expected_sequence=0, nodes=(), frontier=()
    )
    before = sorted(await _keys_under(redis_url, store.prefix))
    await store.commit("ns", [assertion, empty])
    assert await store.head("ns", "thread:a") == read  # frontier not cleared
    assert sorted(await _keys_under(redis_url, store.prefix)) == before
    # The assertion is a read dependency: a moved head fails the whole commit.
    await _write(store, "ns", "thread:a", ["answer"])
    with pytest.raises(Conflict):
        await store.commit("ns", [_write_of(Head(), "user:u", [1]), assertion])
    assert await store.head("ns", "user:u") == Head()


async def test_bad_names_are_refused(store: RedisStore) -> None:
    with pytest.raises(InvalidRequest):
        await store.commit("", [_write_of(Head(), "app", [1])])
    with pytest.raises(InvalidRequest):
        await store.commit("ns", [_write_of(Head(), "bad\nscope", [1])])
    with pytest.raises(InvalidRequest):
        await store.reset_scope("ns", "x" * 300)


# -- reads --------------------------------------------------------------------------


async def _twin(store: RedisStore) -> MemoryStore:
    """The same nodes in a MemoryStore: the reference every read is compared with."""
    mem = MemoryStore()
    for scope in [s.scope for s in await store.list_scopes("ns", limit=1000)]:
        nodes = await store.nodes("ns", scope, limit=10_000)
        head = await store.head("ns", scope)
        await mem.commit(
            "ns",
            [
                ScopeWrite(
                    scope=scope,
                    expected_generation=0,
                    expected_sequence=0,
                    nodes=tuple(nodes),
                    frontier=head.frontier,
                )
            ],
        )
    return mem


async def test_node_paging_matches_the_reference_everywhere(store: RedisStore) -> None:
    await _write(store, "ns", "thread:a", ["goal", "inference", "tool_call"])
    await _write(store, "ns", "thread:a", ["tool_result", "answer"])
    await _write(store, "ns", "thread:a", ["goal", "answer"])
    mem = await _twin(store)
    total = 7
    checked = 0
    for after in range(-1, total + 2):
        for before in [None, *range(-1, total + 3)]:
            for limit in (-1, 0, 1, 2, 3, total + 5):
                for desc in (False, True):
                    kw: dict[str, Any] = dict(
                        after=after, before=before, limit=limit, descending=desc
                    )
                    got = await store.nodes("ns", "thread:a", **kw)
                    assert got == await mem.nodes("ns", "thread:a", **kw), kw
                    checked += bool(got)
    assert checked > 300  # the grid really reads nodes, not only empty pages
    tail = await store.nodes("ns", "thread:a", limit=2, descending=True)
    assert [n.sequence for n in tail] == [7, 6]
    assert await store.nodes("ns", "thread:missing") == []


async def test_get_nodes_leaves_missing_ids_out(store: RedisStore) -> None:
    a, b = await _write(store, "ns", "thread:a", ["goal", "answer"])
    missing = "cw_" + "0" * 24
    got = await store.get_nodes("ns", "thread:a", [b.id, missing, a.id])
    assert got == {a.id: a, b.id: b}
    assert await store.get_nodes("ns", "thread:b", [a.id]) == {}
    assert await store.get_nodes("ns", "thread:a", []) == {}


# Keys that trip up naive lex ranges: prefixes of each other, NUL, non-ASCII, brackets.
TRICKY_KEYS = ["var:a", "var:ab", "var:a\x00b", "var:a\x00", "var:é", "var:zz", "var:[x", "w:a"]


async def test_resource_heads_by_prefix_and_versions(store: RedisStore) -> None:
    for round_ in range(3):
        txn = Transaction(store, "ns")
        for k in TRICKY_KEYS[: len(TRICKY_KEYS) - round_]:
            await txn.append("user:u", "resource", {"v": round_, "k": k}, resource_key=k)
        await txn.commit()
    mem = await _twin(store)
    prefixes = ["", "var:", "var:a", "var:a\x00", "var:é", "var:[", "w", "nope", "var:a\x00b\x00"]
    for p in prefixes:
        got = await store.resource_heads("ns", "user:u", p)
        want = await mem.resource_heads("ns", "user:u", p)
        assert got == want, p
        assert list(got) == sorted(got)
    assert (await store.resource_heads("ns", "user:u", "var:a"))["var:a"].payload["v"] == 2
    for k in TRICKY_KEYS:
        head = await store.resource_head("ns", "user:u", k)
        assert head == await mem.resource_head("ns", "user:u", k)
        vs = await store.versions("ns", "user:u", k)
        assert vs == await mem.versions("ns", "user:u", k)
        assert all(v.resource_key == k for v in vs) and vs[-1] == head
        assert [v.sequence for v in vs] == sorted(v.sequence for v in vs)
        assert await store.versions("ns", "user:u", k, limit=1) == vs[:1]
    assert await store.resource_head("ns", "user:u", "var:") is None
    assert await store.versions("ns", "user:u", "var:") == []
    assert len(await store.versions("ns", "user:u", "var:a")) == 3
    assert len(await store.versions("ns", "user:u", "w:a")) == 1


async def test_semantic_memory_successors(store: RedisStore) -> None:
    for v in ("a", "b", "c"):
        txn = Transaction(store, "ns")
        await txn.semantic("user:u", "memory", "name", v)
        await txn.commit()
    vs = await store.versions("ns", "user:u", "semantic:memory:name")
    assert [v.payload["content"] for v in vs] == ["a", "b", "c"]
    assert vs[1].id in vs[2].parents and vs[0].id in vs[1].parents
    heads = await store.resource_heads("ns", "user:u", "semantic:")
    assert list(heads) == ["semantic:memory:name"] and heads["semantic:memory:name"] == vs[2]


async def test_listing_namespaces_and_scopes_pages_like_the_reference(store: RedisStore) -> None:
    mem = MemoryStore()
    namespaces = ["b", "a", "{tag}", "%7B", "ns:x", "é", "z"]
    scopes = ["app", "thread:1", "thread:10", "thread:2", "user:a", "user:b", "thread:é"]
    for s_ in (store, mem):
        for ns in namespaces:
            txn = Transaction(s_, ns)
            for sc in scopes:
                await txn.append(sc, "goal", {"ns": ns})
            await txn.commit()
        await s_.reset_scope("a", "user:b")  # empty scopes are not listed
        await s_.delete_namespace("z")  # nor empty namespaces
        await s_.reset_scope("b", "never-written")
    for after in [None, "", "a", "b", "é", "zz"]:
        for limit in (0, 1, 2, 100):
            got = await store.list_namespaces(after=after, limit=limit)
            assert got == await mem.list_namespaces(after=after, limit=limit)
    # Page through with after= the last item, as callers do.
    seen: list[str] = []
    after_ns: str | None = None
    while page := await store.list_namespaces(after=after_ns, limit=2):
        seen += page
        after_ns = page[-1]
    assert seen == sorted(set(namespaces) - {"z"})
    for ns in ("a", "{tag}"):
        for prefix in ("", "thread:", "thread:1", "user:", "zzz"):
            for after in [None, "", "app", "thread:", "thread:10", "user:a", "zz"]:
                for limit in (0, 1, 3, 100):
                    kw: dict[str, Any] = dict(prefix=prefix, after=after, limit=limit)
                    infos = await store.list_scopes(ns, **kw)
                    assert infos == await mem.list_scopes(ns, **kw), (ns, kw)
    assert await store.list_scopes("z") == []


async def test_stats_count_nodes_bytes_and_kinds(store: RedisStore) -> None:
    await _write(store, "ns", "thread:a", ["goal", "inference", "tool_call"])
    await _write(store, "ns", "thread:a", ["tool_result", "answer", "goal"])
    mem = await _twin(store)
    got = await store.stats("ns", "thread:a")
    assert got == await mem.stats("ns", "thread:a")
    assert got.nodes == 6 and got.kinds["goal"] == 2
    assert got.payload_bytes == sum(
        len(orjson.dumps(n.payload)) for n in await store.nodes("ns", "thread:a")
    )
    assert (await store.stats("ns", "nothing")).nodes == 0


async def test_delete_namespace_bumps_every_generation(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_mod, "DELETE_BATCH", 3)  # several script batches
    txn = Transaction(store, "ns")
    for i in range(10):
        await txn.append(f"thread:{i}", "goal", {"i": i})
    await txn.commit()
    await store.reset_scope("ns", "thread:0")  # generation 1, empty
    await _write(store, "other", "thread:0", ["goal"])
    heads = {i: await store.head("ns", f"thread:{i}") for i in range(10)}
    assert await store.delete_namespace("ns") == 9  # scopes that held nodes
    for i in range(10):
        assert await store.head("ns", f"thread:{i}") == Head(generation=heads[i].generation + 1)
    assert await store.list_scopes("ns") == []
    assert await store.list_namespaces() == ["other"]
    assert (await store.head("other", "thread:0")).sequence == 1
    with pytest.raises(Conflict):
        await store.commit("ns", [_write_of(heads[5], "thread:5", [1])])
    assert await store.delete_namespace("ns") == 0
    assert await store.delete_namespace("never") == 0


# -- payload codec ------------------------------------------------------------------


class XorCodec:
    """Stands in for the encryption codec: opaque bytes, bound to namespace and scope."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, str]] = set()

    def _key(self, namespace: str, scope: str) -> int:
        return (sum(f"{namespace}/{scope}".encode()) % 250) + 1

    def encode(self, namespace: str, scope: str, payload: Any) -> bytes:
        self.seen.add((namespace, scope))
        k = self._key(namespace, scope)
        return bytes(b ^ k for b in orjson.dumps(payload)) + b"\n\x00\xff"

    def decode(self, namespace: str, scope: str, data: bytes) -> Any:
        assert data.endswith(b"\n\x00\xff")
        k = self._key(namespace, scope)
        return orjson.loads(bytes(b ^ k for b in data[:-3]))


async def test_payloads_go_through_the_codec(redis_url: str) -> None:
    codec = XorCodec()
    s = await _open(redis_url, prefix=_prefix(), codec=codec)
    try:
        txn = Transaction(s, "ns")
        g = await txn.append("thread:a", "goal", {"secret": "plaintext-marker"})
        await txn.semantic("user:u", "memory", "k", "plaintext-marker")
        await txn.commit()
        assert codec.seen == {("ns", "thread:a"), ("ns", "user:u")}
        assert (await s.nodes("ns", "thread:a"))[0] == g
        assert (await s.resource_head("ns", "user:u", "semantic:memory:k")) is not None
        r = await _raw(redis_url)
        try:
            for k in await _keys_under(redis_url, s.prefix):
                if await r.type(k) == b"hash":
                    for v in (await r.hgetall(k)).values():
                        assert b"plaintext-marker" not in v
        finally:
            await r.aclose()
    finally:
        await s.drop_prefix()
        await s.close()


# -- scale, concurrency and the key layout -------------------------------------------


async def test_large_commit_crosses_the_script_chunks(store: RedisStore) -> None:
    txn = Transaction(store, "ns")
    for i in range(1200):
        await txn.append("thread:big", "resource", {"i": i}, resource_key=f"var:{i % 700}")
    await txn.commit()
    assert (await store.head("ns", "thread:big")).sequence == 1200
    assert len(await store.nodes("ns", "thread:big", limit=5000)) == 1200
    heads = await store.resource_heads("ns", "thread:big", "var:")
    assert len(heads) == 700 and heads["var:5"].payload == {"i": 705}
    nodes = await store.nodes("ns", "thread:big", limit=5000)
    got = await store.get_nodes("ns", "thread:big", [n.id for n in nodes])
    assert len(got) == 1200
    with pytest.raises(DuplicateNodes) as e:
        await store.commit(
            "ns",
            [
                ScopeWrite(
                    scope="thread:big",
                    expected_generation=0,
                    expected_sequence=1200,
                    nodes=tuple(
                        dataclasses.replace(n, sequence=1200 + i + 1) for i, n in enumerate(nodes)
                    ),
                    frontier=(),
                )
            ],
        )
    assert len(e.value.ids) == 1200


async def test_concurrent_writers_lose_nothing(store: RedisStore, redis_url: str) -> None:
    other = await open_store(redis_url, prefix=store.prefix)
    try:

        async def turn(s: Store, w: int, i: int) -> None:
            async def fn(txn: Transaction) -> None:
                await txn.append("thread:hot", "goal", {"w": w, "i": i})
                await txn.append("user:u", "resource", {"w": w, "i": i}, resource_key="var:last")

            await transact(s, "ns", fn, attempts=200)

        await asyncio.gather(
            *(turn((store, other)[w % 2], w, i) for w in range(4) for i in range(15))
        )
    finally:
        await other.close()
    nodes = await store.nodes("ns", "thread:hot")
    assert sorted((n.payload["w"], n.payload["i"]) for n in nodes) == [
        (w, i) for w in range(4) for i in range(15)
    ]
    assert [n.sequence for n in nodes] == list(range(1, 61))
    assert all(n.parents == (p.id,) for p, n in itertools.pairwise(nodes))
    assert len(await store.versions("ns", "user:u", "var:last")) == 60


async def test_every_key_of_a_namespace_shares_one_cluster_slot(
    store: RedisStore, redis_url: str
) -> None:
    for ns in ("acme", "we{ird}ns", "%7B"):
        txn = Transaction(store, ns)
        await txn.append("thread:a", "goal", {"x": 1})
        await txn.semantic("user:u", "memory", "k", "v")
        await txn.commit()
        await store.reset_scope(ns, "thread:z")
    keys = [k for k in await _keys_under(redis_url, store.prefix) if b"{" in k]
    by_tag: dict[bytes, set[int]] = {}
    for k in keys:
        tag = k[k.index(b"{") + 1 : k.index(b"}")]
        by_tag.setdefault(tag, set()).add(key_slot(k))
    assert set(by_tag) == {b"acme", b"we%7Bird%7Dns", b"%257B"}
    assert all(len(slots) == 1 for slots in by_tag.values())
    # Only the namespace index lives outside the namespaces' tags.
    assert [k for k in await _keys_under(redis_url, store.prefix) if b"{" not in k] == [
        store.prefix.encode() + b"namespaces"
    ]


def test_no_keys_command_in_any_code_path() -> None:
    src = (SRC / "redis.py").read_text() + (SRC / "_redis_lua.py").read_text()
    assert re.findall(r"redis\.call\(\s*['\"](\w+)", src)  # the scan below sees calls
    assert not re.search(r"redis\.call\(\s*['\"](KEYS|FLUSHDB|FLUSHALL)['\"]", src, re.I)
    assert not re.search(r"\._r\.(keys|flushdb|flushall)\(", src)


async def test_store_runs_as_a_user_denied_keys_and_flush(redis_url: str) -> None:
    """The proof behind "no KEYS": a Redis ACL user without KEYS/FLUSH* runs everything."""
    admin = await _raw(redis_url)
    # On a cluster, the user is made on every node (ACLs are per node).
    every: dict[str, Any] = (
        {"target_nodes": RedisCluster.ALL_NODES} if redis_url in _CLUSTER_URLS else {}
    )
    user, password = f"tether-test-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    await admin.acl_setuser(
        user,
        enabled=True,
        passwords=[f"+{password}"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-keys", "-flushdb", "-flushall"],
        **every,
    )
    prefix = _prefix()
    try:
        url = redis_url.replace("redis://", f"redis://{user}:{password}@", 1)
        s = await _open(url, prefix=prefix)
        try:
            r = await _raw(url)
            try:
                with pytest.raises(Exception, match="permission"):
                    await r.keys("*")
            finally:
                await r.aclose()
            await _write(s, "ns", "thread:a", ["goal", "answer"])
            txn = Transaction(s, "ns")
            await txn.semantic("user:u", "memory", "k", "v")
            await txn.commit()
            await s.nodes("ns", "thread:a", descending=True)
            await s.get_nodes("ns", "thread:a", ["cw_" + "0" * 24])
            await s.resource_heads("ns", "user:u", "semantic:")
            await s.versions("ns", "user:u", "semantic:memory:k")
            await s.list_namespaces()
            await s.list_scopes("ns", prefix="thread:")
            await s.stats("ns", "thread:a")
            await s.reset_scope("ns", "thread:a")
            assert await s.delete_namespace("ns") == 1
            await s.persistence()
            await s.drop_prefix()
        finally:
            await s.close()
    finally:
        await admin.acl_deluser(user, **every)
        p = await _open(redis_url, prefix=prefix)
        await p.drop_prefix()
        await p.close()
        await admin.aclose()
    assert await _keys_under(redis_url, prefix) == []


async def test_persistence_reports_the_server_settings(store: RedisStore, redis_url: str) -> None:
    got = await store.persistence()
    r = await _raw(redis_url)
    try:
        want: dict[Any, Any] = await r.config_get("appendonly")
    finally:
        await r.aclose()
    value = want.get("appendonly", want.get(b"appendonly"))
    assert got["appendonly"] == (value.decode() if isinstance(value, bytes) else value)
    assert set(got) == {"appendonly", "appendfsync", "save", "maxmemory-policy"}
    assert "unknown" not in got.values()  # the test server allows CONFIG GET


async def test_drop_prefix_touches_nothing_else(redis_url: str) -> None:
    a = await _open(redis_url, prefix=_prefix())
    b = await _open(redis_url, prefix=_prefix())
    try:
        await _write(a, "ns", "thread:a", ["goal"])
        await _write(b, "ns", "thread:a", ["goal"])
        assert await a.drop_prefix() > 0
        assert await _keys_under(redis_url, a.prefix) == []
        assert (await b.head("ns", "thread:a")).sequence == 1
        assert await a.head("ns", "thread:a") == Head()
    finally:
        await b.drop_prefix()
        await a.close()
        await b.close()


async def test_a_commit_is_one_round_trip(redis_url: str) -> None:
    # Counted on the wire (a proxy between the store and the server): every commit,
    # however many scopes and nodes, a head only asserted, a stale head refused, is
    # one request and one answer (the script and the namespace index, pipelined) once
    # the server holds the script.
    if redis_url in _CLUSTER_URLS:
        pytest.skip(
            "one server only: a cluster client reaches every node directly, not through one "
            "proxy, and on a cluster the script and the namespace index are two calls"
        )
    async with RoundTrips(redis_url) as wire:
        s = await _open(wire.url, prefix=_prefix())
        try:
            trips = await commit_round_trips(s, wire)
        finally:
            await s.drop_prefix()
            await s.close()
    assert len(trips) == 4 and set(trips.values()) == {1}, trips


async def test_a_commit_loads_its_script_again_when_the_server_lost_it(store: RedisStore) -> None:
    # A server restarted or flushed answers NOSCRIPT to the commit's EVALSHA before it
    # runs anything; the store loads the script and sends the commit again. (A sha the
    # server never saw stands in for a flush, which would touch every client of it.)
    real = store._commit.sha
    store._commit.sha = "0" * 40
    [a, b] = await _write(store, "ns", "thread:t", ["goal", "answer"])
    assert store._commit.sha == real
    assert [n.id for n in await store.nodes("ns", "thread:t")] == [a.id, b.id]
