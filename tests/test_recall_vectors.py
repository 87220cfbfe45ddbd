"""The recall index's search paths agree exactly: sqlite-vec in SQLite, the numpy scan of
a SQLite file (the fallback when the extension cannot load), the in-process table, and a
brute-force reference (every row's exact score, sorted): same keys, nodes, order and
scores, bit for bit, with filters, near-ties, duplicates and zero vectors; the Redis and
PostgreSQL stores' tables too where their servers are configured."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from tether.models.embeddings import HashingEmbedder
from tether.projections import recall, remember
from tether.projections.recall_index import vector_table
from tether.store import open_store
from tether.store._sqlite_vectors import SQLiteVectorTable
from tether.store.vectors import (
    Mark,
    MemoryVectorTable,
    VectorEntry,
    VectorHit,
    VectorTable,
    exact_scores,
)

np = pytest.importorskip("numpy")
NS, SCOPE, SPACE = "default", "user:alice", "test-space"


def _unit(rng: random.Random, dim: int) -> list[float]:
    v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


def _pack(v: list[float]) -> bytes:
    return struct.pack(f"<{len(v)}f", *v)


def _entries(rng: random.Random, n: int, dim: int) -> list[VectorEntry]:
    out: list[VectorEntry] = []
    base = _unit(rng, dim)
    for i in range(n):
        r = rng.random()
        if r < 0.1 and out:  # an exact duplicate of an earlier vector: a tie, broken by key
            v = out[rng.randrange(len(out))].vector
        elif r < 0.3:  # a near-tie: the base vector nudged in its last bits
            v = _pack([x + rng.choice((-1, 0, 1)) * 1e-7 for x in base])
        elif r < 0.32:
            v = _pack([0.0] * dim)  # a zero vector scores 0 everywhere
        else:
            v = _pack(_unit(rng, dim))
        out.append(VectorEntry(key=f"semantic:{rng.choice('ab')}:{i:05d}", node=f"n{i}", vector=v))
    return out


def _reference(
    entries: list[VectorEntry], query: bytes, k: int, prefix: str | None
) -> list[VectorHit]:
    rows = [e for e in entries if prefix is None or e.key.startswith(prefix)]
    if not rows:
        return []
    matrix = np.frombuffer(b"".join(e.vector for e in rows), dtype="<f4").reshape(len(rows), -1)
    scores = exact_scores(matrix, query)
    order = sorted(range(len(rows)), key=lambda i: (-scores[i], rows[i].key))[:k]
    return [VectorHit(key=rows[i].key, node=rows[i].node, score=scores[i]) for i in order]


def _server_urls() -> list[str]:
    """The Redis and PostgreSQL servers the tests are given (TETHER_TEST_*_URL)."""
    import os

    return [
        url
        for url in (
            os.environ.get(v) for v in ("TETHER_TEST_REDIS_URL", "TETHER_TEST_POSTGRES_URL")
        )
        if url
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_every_search_path_returns_the_exact_top_k(
    tmp_path: Path, seed: int, request: pytest.FixtureRequest, ns: str
) -> None:
    pytest.importorskip("sqlite_vec")
    rng = random.Random(seed)
    dim = rng.choice([8, 64, 256])
    entries = _entries(rng, rng.randrange(50, 1500), dim)
    vec = SQLiteVectorTable(str(tmp_path / "v.db"), use_sqlite_vec=True, hold_bytes=0)
    held = SQLiteVectorTable(str(tmp_path / "h.db"), use_sqlite_vec=True)
    fallback = SQLiteVectorTable(str(tmp_path / "s.db"), use_sqlite_vec=False)
    memory = MemoryVectorTable()
    tables: list[VectorTable] = [vec, held, fallback, memory]
    local = len(tables)
    stores = []
    for url in _server_urls():
        store = await open_store(url)
        stores.append(store)
        table = store.vector_table()
        assert table is not None
        tables.append(table)
    try:
        for t in tables:
            await t.apply(
                ns, SCOPE, SPACE, upserts=entries, deletes=[], mark=Mark(generation=0, sequence=1)
            )
        assert (vec.engine, held.engine, fallback.engine) == ("sqlite-vec", "sqlite-vec", "scan")
        base = np.frombuffer(entries[0].vector, dtype="<f4").tolist()
        for trial in range(25):
            if trial in (8, 16):  # a write between searches: held parts move in place
                gone = [e.key for e in rng.sample(entries, 7)]
                changed = [
                    VectorEntry(key=e.key, node=e.node + "'", vector=_pack(_unit(rng, dim)))
                    for e in rng.sample(entries, 5)
                ] + [
                    VectorEntry(key=f"semantic:a:new{trial}{i}", node="x", vector=_pack(base))
                    for i in range(3)
                ]
                for t in tables:
                    await t.apply(
                        ns, SCOPE, SPACE, upserts=changed, deletes=gone,
                        mark=Mark(generation=0, sequence=1 + trial),
                    )  # fmt: skip
                by_key = {e.key: e for e in entries if e.key not in gone}
                by_key.update((e.key, e) for e in changed)
                entries = sorted(by_key.values(), key=lambda e: e.key)
            if trial % 3 == 0:  # a query on top of the near-ties
                query = _pack([x + rng.gauss(0, 1e-6) for x in base])
            else:
                query = _pack(_unit(rng, dim))
            k = rng.choice([1, 3, 5, 10, 40, 5000])
            prefix = rng.choice([None, "semantic:a:", "semantic:b:0", "semantic:zz"])
            where = None if prefix is None else (lambda key, p=prefix: key.startswith(p))
            want = _reference(entries, query, k, prefix)
            for t in tables:
                got = await t.search(ns, SCOPE, SPACE, query, k=k, where=where)
                assert got == want, (type(t).__name__, k, prefix)
        assert (vec.searched_by, held.searched_by) == ("sqlite-vec", "held scan")
        for t in tables:
            assert await t.entries(ns, SCOPE, SPACE) == {e.key: e for e in entries}
        for t in tables[local:]:
            await t.drop(ns)
    finally:
        for t in tables[:local]:
            await t.close()
        for store in stores:
            await store.close()


async def test_a_sqlite_store_searches_with_sqlite_vec_and_falls_back_to_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("sqlite_vec")
    e = HashingEmbedder(64)
    found = []
    for setting, engine in (("1", "sqlite-vec"), ("0", "scan")):
        monkeypatch.setenv("TETHER_RECALL_SQLITE_VEC", setting)
        store = await open_store(f"sqlite:///{tmp_path / f'{engine}.db'}")
        try:
            for i in range(40):
                await remember(store, NS, SCOPE, "memory", f"m{i}", f"memory number {i} of {i % 7}")
            found.append(await recall(store, NS, SCOPE, "number 3 of 3", embedder=e, k=7))
            table = vector_table(store)
            assert isinstance(table, SQLiteVectorTable) and table.engine == engine
        finally:
            await store.close()
    # same memories, same results (the node ids differ between the two files)
    assert [(r.key, r.score) for r in found[0]] == [(r.key, r.score) for r in found[1]]
