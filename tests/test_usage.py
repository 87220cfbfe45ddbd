"""tether stats (issue 43): nodes, bytes and last activity per namespace and scope,
what each backend's own counts say, before and after a prune."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
from click.testing import CliRunner

import tether
from memory_helpers import Thread
from tether import control
from tether.projections import compact
from tether.store.base import Store


async def _fill(store: Store, ns: str) -> None:
    for thread, turns in (("a", 6), ("b", 2)):
        t = Thread(store, ns, thread)
        for i in range(turns):
            await t.turn(f"run_{thread}{i}", f"question {i} " * 20, f"answer {i} " * 20)
    await compact(store, ns, "a", strategy="recent", max_messages=2, preserve_recent=1)


async def test_usage_per_namespace_and_scope(store: Store, ns: str) -> None:
    await _fill(store, ns)
    report = await control.usage(store, ns)
    (n,) = report.namespaces
    assert n.namespace == ns and n.scopes == 2 == len(n.by_scope)
    by = {s.scope: s for s in n.by_scope}
    for scope in ("thread:a", "thread:b"):
        nodes = await store.nodes(ns, scope, limit=10_000)
        stats = await store.stats(ns, scope)
        assert by[scope].nodes == len(nodes) == stats.nodes
        assert by[scope].payload_bytes == stats.payload_bytes > 0
        assert by[scope].last_activity == nodes[-1].created_at
    assert n.nodes == sum(s.nodes for s in n.by_scope)
    assert n.payload_bytes == sum(s.payload_bytes for s in n.by_scope)
    assert n.last_activity == max(s.last_activity or "" for s in n.by_scope)
    # A prune shows: fewer nodes and bytes, and the record is the newest node.
    done = await control.prune(store, ns, thread="a")
    assert done.nodes > 0
    after = {s.scope: s for s in (await control.usage(store, ns)).namespaces[0].by_scope}
    assert after["thread:a"].nodes == by["thread:a"].nodes - done.nodes + 1
    assert after["thread:a"].payload_bytes < by["thread:a"].payload_bytes
    assert after["thread:b"] == by["thread:b"]
    record = (await store.nodes(ns, "thread:a", limit=1, descending=True))[0]
    assert after["thread:a"].last_activity == record.created_at


def test_tether_stats_cli(tmp_path: Path) -> None:
    from tether.cli import main

    path = str(tmp_path / "s.db")

    async def fill() -> None:
        async with await tether.open_store(path) as store:
            await _fill(store, "default")
            await _fill(store, "other")

    asyncio.run(fill())

    def cli(*args: str) -> dict:  # type: ignore[type-arg]
        r = CliRunner().invoke(main, ["--store", path, "--json", *args], catch_exceptions=False)
        assert r.exit_code == 0, r.stderr
        return orjson.loads(r.stdout)  # type: ignore[no-any-return]

    one = cli("stats")
    assert [n["namespace"] for n in one["namespaces"]] == ["default"]
    assert [s["scope"] for s in one["namespaces"][0]["by_scope"]] == ["thread:a", "thread:b"]
    every = cli("stats", "--all-namespaces")
    assert [n["namespace"] for n in every["namespaces"]] == ["default", "other"]
    assert all("by_scope" not in n for n in every["namespaces"])
    assert every["namespaces"][0]["nodes"] == one["namespaces"][0]["nodes"] > 0
    table = CliRunner().invoke(main, ["--store", path, "stats"], catch_exceptions=False)
    assert table.exit_code == 0 and "thread:a" in table.stdout
