"""A writer process for the store race and crash tests (tests/test_store_processes.py).

    python tests/store_worker.py threads URL NS PREFIX THREADS TURNS
    python tests/store_worker.py same    URL NS THREAD TURNS TAG
    python tests/store_worker.py crash   URL NS START

Each mode opens the store, prints ``ready`` and waits for a line on stdin, so that
the parent can start several writers at the same instant. ``crash`` commits turns
forever (a goal and an answer in the thread, a resource in the user scope, one
atomic commit) and prints each turn's number after its commit returned; the parent
kills it with SIGKILL mid-loop.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import tether
from tether import Conflict, Transaction, transact


async def _ready(url: str) -> tether.Store:
    store = await tether.open_store(url)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return store


async def threads(url: str, ns: str, prefix: str, n_threads: int, turns: int) -> None:
    store = await _ready(url)
    try:
        for i in range(turns):  # round robin: every thread grows while the other writer works
            for t in range(n_threads):
                scope = f"thread:{prefix}-{t}"
                txn = Transaction(store, ns)
                await txn.append(scope, "goal", {"p": prefix, "t": t, "i": i})
                await txn.append(scope, "answer", {"p": prefix, "t": t, "i": i})
                await txn.commit()  # each thread has one writer: never a conflict
    finally:
        await store.close()
    print("done", flush=True)


async def same(url: str, ns: str, thread: str, turns: int, tag: str) -> None:
    store = await _ready(url)
    conflicts = 0
    try:
        for i in range(turns):

            async def turn(txn: Transaction, i: int = i) -> None:
                await txn.append(thread, "goal", {"tag": tag, "i": i})
                await txn.append(thread, "answer", {"tag": tag, "i": i})

            while True:
                try:
                    await transact(store, ns, turn, attempts=3)
                    break
                except Conflict:
                    conflicts += 1  # transact's own backoff grew; start it over
    finally:
        await store.close()
    print("done", conflicts, flush=True)


async def crash(url: str, ns: str, start: int) -> None:
    store = await _ready(url)
    i = start
    while True:
        txn = Transaction(store, ns)
        await txn.append("thread:c", "goal", {"i": i, "pad": "x" * 300})
        await txn.append("thread:c", "answer", {"i": i, "pad": "y" * 300})
        await txn.append("user:c", "resource", {"i": i}, resource_key="var:last")
        await txn.commit()
        print(i, flush=True)
        i += 1


def main() -> None:
    mode, url, ns, *rest = sys.argv[1:]
    if mode == "threads":
        asyncio.run(threads(url, ns, rest[0], int(rest[1]), int(rest[2])))
    elif mode == "same":
        asyncio.run(same(url, ns, rest[0], int(rest[1]), rest[2]))
    elif mode == "crash":
        asyncio.run(crash(url, ns, int(rest[0])))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
