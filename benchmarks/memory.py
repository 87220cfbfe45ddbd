"""Benchmark: loading the conversation view of a long thread before and after compaction.

    .venv/bin/python benchmarks/memory.py                    # 10,000 turns, memory://
    .venv/bin/python benchmarks/memory.py --turns 2000 --url sqlite:///tmp/bench.db

Writes a thread of N completed turns (goal, inference, answer: 3 nodes each, one
commit per turn, the way the runtime commits), then times ``load_conversation``
with the window (10), tokens (4000) and buffer policies, compacts once (summary
strategy, extractive, keeping 10 messages) and times them again; then adds 1,000
more turns and times once more. "nodes read" counts what the store returned.
The window and tokens views read from the tail, so they cost about the same at
any length; buffer reads everything after the latest summary.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Sequence
from typing import Any

from tether import open_store, transact
from tether.core import scopes
from tether.core.graph import CausalNode
from tether.projections import Buffer, EstimateCounter, Tokens, Window, compact, load_conversation
from tether.store.base import Head, ScopeInfo, ScopeStats, ScopeWrite, Store


class Counting(Store):
    """Delegates to a real store and counts the nodes its reads return."""

    def __init__(self, inner: Store) -> None:
        super().__init__(codec=inner.codec)
        self.inner = inner
        self.read = 0

    async def _do_commit(self, namespace: str, writes: Sequence[ScopeWrite]) -> None:
        await self.inner.commit(namespace, writes)

    async def _do_reset_scope(self, namespace: str, scope: str) -> Head:
        return await self.inner.reset_scope(namespace, scope)

    async def _do_delete_namespace(self, namespace: str) -> int:
        return await self.inner.delete_namespace(namespace)

    async def head(self, namespace: str, scope: str) -> Head:
        return await self.inner.head(namespace, scope)

    async def nodes(self, namespace: str, scope: str, **kw: Any) -> list[CausalNode]:
        out = await self.inner.nodes(namespace, scope, **kw)
        self.read += len(out)
        return out

    async def get_nodes(
        self, namespace: str, scope: str, ids: Sequence[str]
    ) -> dict[str, CausalNode]:
        return await self.inner.get_nodes(namespace, scope, ids)

    async def resource_head(self, namespace: str, scope: str, key: str) -> CausalNode | None:
        return await self.inner.resource_head(namespace, scope, key)

    async def resource_heads(
        self, namespace: str, scope: str, prefix: str = ""
    ) -> dict[str, CausalNode]:
        return await self.inner.resource_heads(namespace, scope, prefix)

    async def versions(
        self, namespace: str, scope: str, key: str, *, limit: int = 1000
    ) -> list[CausalNode]:
        return await self.inner.versions(namespace, scope, key, limit=limit)

    async def list_namespaces(self, *, after: str | None = None, limit: int = 100) -> list[str]:
        return await self.inner.list_namespaces(after=after, limit=limit)

    async def list_scopes(
        self, namespace: str, *, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[ScopeInfo]:
        return await self.inner.list_scopes(namespace, prefix=prefix, after=after, limit=limit)

    async def stats(self, namespace: str, scope: str) -> ScopeStats:
        return await self.inner.stats(namespace, scope)

    async def close(self) -> None:
        await self.inner.close()


async def write_turns(store: Store, ns: str, thread: str, start: int, n: int) -> None:
    scope = scopes.thread(thread)
    for i in range(start, start + n):
        run = f"run_{i:06d}"

        async def turn(txn: Any, run: str = run, i: int = i) -> None:
            await txn.append(
                scope,
                "goal",
                {
                    "run": run,
                    "input": f"question {i}: what about item {i}?",
                    "llm": "agent",
                    "metadata": {},
                },
            )
            await txn.append(
                scope,
                "inference",
                {
                    "run": run,
                    "llm": "agent",
                    "content": f"answer {i}: item {i} is fine.",
                    "tool_calls": [],
                    "usage": {},
                },
            )
            await txn.append(scope, "answer", {"run": run, "output": None})

        await transact(store, ns, turn)


async def timed(
    store: Counting, ns: str, thread: str, policy: Any, repeat: int
) -> tuple[float, float, int, int]:
    times = []
    for _ in range(repeat):
        store.read = 0
        t0 = time.perf_counter()
        msgs = await load_conversation(store, ns, thread, policy=policy)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), min(times), store.read, len(msgs)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--more", type=int, default=1_000, help="turns added after compaction")
    ap.add_argument("--url", default="memory://")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()

    store = Counting(await open_store(args.url))
    ns, thread = "bench_" + uuid.uuid4().hex[:8], "long"
    counter = EstimateCounter()
    policies = {
        "window(10)": Window(size=10),
        "tokens(4000)": Tokens(max_tokens=4000, preserve_recent=6, counter=counter),
        "buffer": Buffer(),
    }
    try:
        t0 = time.perf_counter()
        await write_turns(store, ns, thread, 0, args.turns)
        write_s = time.perf_counter() - t0
        head = await store.head(ns, scopes.thread(thread))
        print(
            f"store {args.url}: {args.turns} turns, {head.sequence} nodes written in {write_s:.1f} s "
            f"({write_s / args.turns * 1e3:.2f} ms/turn)"
        )
        print(
            f"{'phase':<28}{'policy':<14}{'median ms':>10}{'min ms':>9}{'nodes read':>12}{'messages':>10}"
        )

        async def report(phase: str, repeat: int) -> None:
            for name, pol in policies.items():
                med, best, read, n = await timed(
                    store, ns, thread, pol, repeat if name != "buffer" else max(3, repeat // 5)
                )
                print(f"{phase:<28}{name:<14}{med:>10.2f}{best:>9.2f}{read:>12}{n:>10}")

        await report("before compaction", args.repeat)
        t0 = time.perf_counter()
        r = await compact(
            store, ns, thread, strategy="summary", preserve_recent=10, counter=counter
        )
        print(
            f"compact(summary): {(time.perf_counter() - t0) * 1000:.0f} ms, covered {r.covered} messages, "
            f"through sequence {r.through}"
        )
        await report("after compaction", args.repeat)
        await write_turns(store, ns, thread, args.turns, args.more)
        await report(f"+{args.more} turns after it", args.repeat)
    finally:
        await store.inner.delete_namespace(ns)
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
