"""What encryption at rest costs per turn: the same workload with and without ``cipher=``.

    .venv/bin/python benchmarks/crypto.py [--turns 500] [--rounds 3] [--postgres URL]

Workload (the turn of benchmarks/workload.py): one thread bound to a user, each turn
one commit of two nodes (the user message as a ``goal``, the reply as an ``answer``,
200 bytes each), durable before the next turn starts. SQLite with
``durability="full"`` (WAL, fsync at every commit), the embedded default. Also
printed: SQLite with ``durability="normal"`` (no fsync, so the cipher's share of
the rest shows), the in-memory store (no I/O at all: the cipher's CPU cost), and
encryption with ``cache_ttl=60`` (the key table is not re-read on every
operation, at the price of seeing other processes' erasures up to 60 s late).
Configurations alternate round by round, so drift of the machine hits all alike;
figures are medians over rounds of each round's median turn.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import turn_messages

from tether import Transaction, open_store
from tether.crypto import Cipher, MasterKey, bind_thread
from tether.store import Store

NS = "bench"
THREAD = "thread-a"
WARMUP = 20


async def _turns(store: Store, turns: int) -> list[float]:
    await bind_thread(store, NS, THREAD, "user-a")  # no-op without a cipher
    scope = "thread:" + THREAD
    out = []
    for i in range(WARMUP + turns):
        user, assistant = turn_messages(THREAD, i)
        t = time.perf_counter()
        txn = Transaction(store, NS)
        await txn.append(scope, "goal", {"run": f"r{i}", "input": user, "llm": "agent"})
        await txn.append(scope, "answer", {"run": f"r{i}", "output": assistant})
        await txn.commit()
        if i >= WARMUP:
            out.append(time.perf_counter() - t)
    return out


async def _load(store: Store) -> float:
    t = time.perf_counter()
    after, n = 0, 0
    while page := await store.nodes(NS, "thread:" + THREAD, after=after, limit=1000):
        n += len(page)
        after = page[-1].sequence
    return time.perf_counter() - t


Opener = Callable[[Path], Awaitable[Store]]


async def _drop_schema(store: Store) -> None:
    """PostgreSQL runs get a schema of their own; leave nothing behind on the server."""
    schema = getattr(store, "schema", None)
    if not isinstance(schema, str) or not schema.startswith("bench_crypto_"):
        return
    import asyncpg

    conn = await asyncpg.connect(store.url.split("?", 1)[0])
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def configs(postgres: str | None) -> dict[str, Opener]:
    key = MasterKey.generate()

    def sqlite(cipher: Any, durability: str = "full") -> Opener:
        async def open_(d: Path) -> Store:
            url = f"sqlite:///{d / 'bench.db'}"
            return await open_store(url, durability=durability, cipher=cipher)

        return open_

    def memory(cipher: Any) -> Opener:
        async def open_(d: Path) -> Store:
            return await open_store("memory://", cipher=cipher)

        return open_

    out: dict[str, Opener] = {
        "sqlite durable, plain": sqlite(None),
        "sqlite durable, encrypted": sqlite(key),
        "sqlite durable, encrypted, cache_ttl=60": sqlite(Cipher(masters=(key,), cache_ttl=60)),
        "sqlite normal (no fsync), plain": sqlite(None, "normal"),
        "sqlite normal (no fsync), encrypted": sqlite(key, "normal"),
        "memory, plain": memory(None),
        "memory, encrypted": memory(key),
    }
    if postgres:

        def pg(cipher: Any) -> Opener:
            async def open_(d: Path) -> Store:
                schema = f"bench_crypto_{d.name.lower().strip('_')}"[:63]
                sep = "&" if "?" in postgres else "?"
                return await open_store(f"{postgres}{sep}schema={schema}", cipher=cipher)

            return open_

        out["postgres, plain"] = pg(None)
        out["postgres, encrypted"] = pg(key)
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--postgres", help="also measure PostgreSQL at this URL (a schema per run)")
    args = ap.parse_args()
    cfgs = configs(args.postgres)
    medians: dict[str, list[float]] = {k: [] for k in cfgs}
    p95s: dict[str, list[float]] = {k: [] for k in cfgs}
    loads: dict[str, list[float]] = {k: [] for k in cfgs}
    for _ in range(args.rounds):
        for name, open_ in cfgs.items():
            with tempfile.TemporaryDirectory() as d:
                store = await open_(Path(d))
                try:
                    lat = await _turns(store, args.turns)
                    loads[name].append(await _load(store))
                finally:
                    await store.close()
                    await _drop_schema(store)
            medians[name].append(statistics.median(lat))
            p95s[name].append(statistics.quantiles(lat, n=20)[-1])
    print(f"{args.turns} turns x {args.rounds} rounds, 2 nodes of 200 bytes per turn")
    print(f"{'configuration':<42} {'median µs/turn':>15} {'p95 µs/turn':>12} {'load ms':>8}")
    for name in cfgs:
        print(
            f"{name:<42} {statistics.median(medians[name]) * 1e6:>15.0f} "
            f"{statistics.median(p95s[name]) * 1e6:>12.0f} "
            f"{statistics.median(loads[name]) * 1e3:>8.1f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
