"""Writes tests/data/sqlite_release.db and .json: a small SQLite file as a released tether
wrote it, and what it holds, for tests/test_store_sqlite_release.py.

Run with the released code, not the code under test (the file must be the release's):

    git worktree add /tmp/rel <release commit> && cd /tmp/rel
    PYTHONPATH=src python /path/to/tests/data/make_sqlite_release_db.py OUT_DIR

The file was made at main 5c422fc (SQLite schema 3) on 2026-12-07. It holds what the
layout stores in more than one way: chains and forks, a frontier of two nodes and an
empty one, resource versions, a semantic memory, a reset scope written again (a
generation above 0), a createdAt that is not tether's own form (stored as text),
non-ASCII text, floats and large integers, and two namespaces. The JSON is every
node (``to_dict``), every head, and each resource head, read back by the same code.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import tether
from tether.core.graph import make_node
from tether.store import Head, ScopeWrite


async def main(out: Path) -> None:
    db = out / "sqlite_release.db"
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        p.unlink(missing_ok=True)
    store = await tether.open_store(f"sqlite:///{db}")
    ns = "acme"
    for i in range(12):  # a conversation
        txn = tether.Transaction(store, ns)
        await txn.append("thread:t1", "goal", {"role": "user", "content": f"question {i} é ✓"})
        await txn.append(
            "thread:t1", "answer", {"role": "assistant", "content": f"answer {i}", "n": i * 1.5}
        )
        await txn.commit()
    txn = tether.Transaction(store, ns)  # resource versions and a semantic memory
    for v in range(3):
        await txn.append(
            "thread:t1", "resource", {"v": v, "big": 2**53 - 1 - v}, resource_key="var:x"
        )
    await txn.append("thread:t1", "resource", {"y": None}, resource_key="var:y")
    await txn.semantic("user:u", "preference", "likes", {"tea": True, "ratio": 0.1})
    await txn.commit()
    # a fork: two nodes on the same parent, left as a frontier of two
    head = await store.head(ns, "thread:t1")
    a = make_node("inference", {"branch": "a"}, head.frontier, sequence=head.sequence + 1)
    b = make_node("inference", {"branch": "b"}, head.frontier, sequence=head.sequence + 2)
    await store.commit(
        ns,
        [
            ScopeWrite(
                scope="thread:t1",
                expected_generation=head.generation,
                expected_sequence=head.sequence,
                nodes=(a, b),
                frontier=(a.id, b.id),
            )
        ],
    )
    # a createdAt in another form (an imported snapshot's), and an empty frontier
    root = make_node(
        "system", {"prompt": "be brief"}, [], sequence=1, created_at="2024-02-29T12:00:00+00:00"
    )
    await store.commit(
        ns,
        [
            ScopeWrite(
                scope="thread:t2",
                expected_generation=0,
                expected_sequence=0,
                nodes=(root,),
                frontier=(),
            )
        ],
    )
    # a scope reset, then written again
    txn = tether.Transaction(store, ns)
    await txn.append("thread:gone", "goal", {"lost": True})
    await txn.commit()
    await store.reset_scope(ns, "thread:gone")
    txn = tether.Transaction(store, ns)
    await txn.append("thread:gone", "goal", {"again": [1, 2, {"deep": "x"}]})
    await txn.commit()
    txn = tether.Transaction(store, "other")  # a second namespace
    await txn.append("app", "tool_call", {"name": "f", "args": {"q": '\u0000 "quoted"'}})
    await txn.commit()

    expected: dict[str, dict[str, object]] = {}
    for n in ("acme", "other"):
        for info in await store.list_scopes(n):
            head = await store.head(n, info.scope)
            nodes = await store.nodes(n, info.scope)
            heads = await store.resource_heads(n, info.scope)
            expected[f"{n}/{info.scope}"] = {
                "head": [head.generation, head.sequence, list(head.frontier)],
                "nodes": [x.to_dict() for x in nodes],
                "resource_heads": {k: v.id for k, v in heads.items()},
            }
    await store.close()
    assert Head  # the write shapes above
    (out / "sqlite_release.json").write_text(json.dumps(expected, indent=1, sort_keys=True))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
