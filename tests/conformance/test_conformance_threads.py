"""One store shared by OS threads, each running its own event loop (issue 17).

Sync wrappers and test suites (the OpenAI SDK's, for one) call async code from
several threads, each with ``asyncio.run``. A backend either works there (every
call succeeds and is durable, or raises and wrote nothing) or refuses at once,
on the first call of a foreign loop, with ``StoreError(code="wrong_event_loop")``
and writes nothing. SQLite and memory must work; asyncpg and redis-py pools belong
to one loop, so PostgreSQL and Redis refuse.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from tether.core.errors import Conflict, StoreError
from tether.store import Store

from .backends import Backend
from .helpers import node, write

THREADS = 5
CALLS = 30


def _must_work(backend: Backend) -> bool:
    return not any(b in backend.name for b in ("postgres", "redis"))


async def _one_call(store: Store, ns: str, t: int, i: int) -> None:
    """Append one node to the shared scope and one to the thread's own, in one commit."""
    for _ in range(500):
        shared = await store.head(ns, "thread:shared")
        own = await store.head(ns, f"thread:own-{t}")
        a = node("goal", {"t": t, "i": i}, list(shared.frontier), seq=shared.sequence + 1)
        b = node("goal", {"t": t, "i": i}, list(own.frontier), seq=own.sequence + 1)
        try:
            await store.commit(
                ns, [write("thread:shared", shared, [a]), write(f"thread:own-{t}", own, [b])]
            )
            return
        except Conflict:
            await asyncio.sleep(0)
    raise AssertionError("500 conflicts in a row")


def _worker(store: Store, ns: str, t: int, out: dict[int, list[tuple[int, Any]]]) -> None:
    async def run() -> list[tuple[int, Any]]:
        got: list[tuple[int, Any]] = []
        for i in range(CALLS):
            try:
                await _one_call(store, ns, t, i)
                got.append((i, None))
            except Exception as e:
                got.append((i, e))
        return got

    out[t] = asyncio.run(run())


async def test_threads_with_own_loops_share_one_store(
    store: Store, ns: str, backend: Backend
) -> None:
    # The store is opened (and its pool, if any, bound) on this test's loop; a first
    # write here makes the namespace exist before the threads start.
    await _one_call(store, ns, -1, 0)
    out: dict[int, list[tuple[int, Any]]] = {}
    threads = [threading.Thread(target=_worker, args=(store, ns, t, out)) for t in range(THREADS)]
    for th in threads:
        th.start()
    await asyncio.to_thread(lambda: [th.join() for th in threads])
    assert sorted(out) == list(range(THREADS))

    ok: dict[int, set[int]] = {t: {i for i, e in out[t] if e is None} for t in out}
    errors = [e for t in out for _, e in out[t] if e is not None]
    if _must_work(backend):
        assert errors == [], errors[:3]
    else:
        # Refused at once: every call of a foreign loop, with the stable code.
        assert all(isinstance(e, StoreError) and e.code == "wrong_event_loop" for e in errors), (
            errors[:3]
        )
        assert all(not ok[t] for t in ok), "a foreign loop's call went through half the time"

    # Durable exactly when it returned: the stored nodes are those of the calls that
    # succeeded, no more (a raised call wrote nothing) and no fewer (none was lost).
    shared = await store.nodes(ns, "thread:shared", limit=10_000)
    seen = [(n.payload["t"], n.payload["i"]) for n in shared]
    assert len(seen) == len(set(seen))
    assert set(seen) == {(-1, 0)} | {(t, i) for t in ok for i in ok[t]}
    assert [n.sequence for n in shared] == list(range(1, len(shared) + 1))
    for t in range(THREADS):
        own = await store.nodes(ns, f"thread:own-{t}", limit=10_000)
        assert {n.payload["i"] for n in own} == ok[t]
        assert len(own) == len(ok[t])
