"""``Store.payloads``: the ``(sequence, kind, payload)`` of what ``nodes()`` returns."""

from __future__ import annotations

import tether
from tether.store.txn import transact


async def test_payloads_match_nodes(store: tether.Store, ns: str) -> None:
    async def fn(txn: tether.Transaction) -> None:
        for i in range(7):
            await txn.append("thread:t", "goal" if i % 2 else "inference", {"i": i, "s": "x" * i})

    await transact(store, ns, fn)
    for kw in (
        {},
        {"descending": True},
        {"after": 2, "limit": 3},
        {"before": 5, "descending": True},
    ):
        nodes = await store.nodes(ns, "thread:t", **kw)  # type: ignore[arg-type]
        got = await store.payloads(ns, "thread:t", **kw)  # type: ignore[arg-type]
        assert got == [(n.sequence, n.kind, n.payload) for n in nodes]
    assert await store.payloads(ns, "thread:none") == []
    assert await store.payloads(ns, "thread:t", limit=0) == []
