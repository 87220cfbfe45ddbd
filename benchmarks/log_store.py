"""A store built on a LogBackend (docs/storage.md, "Your own backend") beside SQLite.

One thread of N goals of ~200 bytes, in commits of 100; then the mean of 20 head reads
and of 10 appends through ``transact`` (a head read, a commit), and a cold head read (a
new store on the same storage: a process's first read), in ms. What it shows: a
``LogStore`` loads the whole log on every read and parses what it has not parsed yet,
so a cold read grows with N, and so does a read through a backend whose load is O(N).

    .venv/bin/python benchmarks/log_store.py 100 1000 5000
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import tether
from tether import Transaction, transact
from tether.store import LogStore, Store
from tether.store.examples import DictBackend, DirectoryBackend

PAYLOAD = {"role": "user", "content": "x" * 200}


async def fill(store: Store, n: int) -> None:
    for i in range(0, n, 100):

        async def batch(txn: Transaction, i: int = i) -> None:
            for k in range(min(100, n - i)):
                await txn.append("thread:t", "goal", {**PAYLOAD, "i": i + k})

        await transact(store, "ns", batch)


async def mean_ms(fn: Callable[[], Awaitable[Any]], reps: int) -> float:
    t = time.perf_counter()
    for _ in range(reps):
        await fn()
    return (time.perf_counter() - t) / reps * 1000


async def main(sizes: list[int]) -> None:
    root = Path(tempfile.mkdtemp(prefix="tether-log-bench-"))
    print("N       store              head ms   append ms   cold head ms")
    for n in sizes:
        stores: list[tuple[str, Store]] = [
            ("sqlite", await tether.open_store(f"sqlite:///{root / f'{n}.db'}")),
            ("DictBackend", LogStore(DictBackend())),
            ("DirectoryBackend", LogStore(DirectoryBackend(root / f"dir-{n}"))),
        ]
        for name, store in stores:
            await fill(store, n)

            async def append(store: Store = store) -> None:
                await transact(
                    store, "ns", lambda txn: txn.append("thread:t", "goal", {**PAYLOAD, "x": 1})
                )

            head = await mean_ms(lambda store=store: store.head("ns", "thread:t"), 20)  # type: ignore[misc]
            app = await mean_ms(append, 10)
            if isinstance(store, LogStore):
                cold = await mean_ms(lambda s=store: LogStore(s.backend).head("ns", "thread:t"), 3)  # type: ignore[misc]
            else:  # a new SQLite store on the file: its first head read is one SELECT
                fresh = await tether.open_store(f"sqlite:///{root / f'{n}.db'}")
                cold = await mean_ms(lambda s=fresh: s.head("ns", "thread:t"), 1)  # type: ignore[misc]
                await fresh.close()
            print(f"{n:<7} {name:<18} {head:8.2f}  {app:9.2f}  {cold:12.2f}")
            await store.close()


if __name__ == "__main__":
    asyncio.run(main([int(a) for a in sys.argv[1:]] or [100, 1000, 5000]))
