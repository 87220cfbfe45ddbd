"""Writers that keep committing turns while a test breaks the database under them.

Each writer appends turns (a goal and its answer, one ``transact``) to its thread and
counts what happened: a turn is *acked* when its commit returned. A ``StoreError`` is
counted by its code and the turn is tried again; after ``commit_unknown`` (the commit
was sent and its connection failed) the writer first reads the thread, once the store
answers, to learn whether the turn landed, as an application must. Anything else
that escapes (a raw driver exception) is recorded as ``untyped``: the tests assert
there is none.

``check`` reads every thread back: ``lost`` are acked turns that are not there,
``duplicated`` turns that are there twice; every answer must follow its goal.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tether import Transaction, transact
from tether.core.errors import Conflict, StoreError
from tether.store import Store

NS = "faults"


@dataclass
class Tally:
    acked: set[tuple[int, int]] = field(default_factory=set)
    resolved: int = 0  # commit_unknown turns found stored by the writer's read
    errors: Counter[str] = field(default_factory=Counter)  # StoreError code -> count
    untyped: list[str] = field(default_factory=list)
    samples: dict[str, str] = field(default_factory=dict)  # code -> one message
    ack_times: list[float] = field(default_factory=list)
    faults: list[float] = field(default_factory=list)  # when each fault ended

    def recovery(self) -> list[float]:
        """Seconds from the end of each fault to the next acked commit."""
        out = []
        for t in self.faults:
            after = [a for a in self.ack_times if a >= t]
            if after:
                out.append(min(after) - t)
        return out

    def figures(self, lost: int, duplicated: int) -> dict[str, Any]:
        rec = self.recovery()
        return {
            "acked": len(self.acked),
            "resolved_unknown": self.resolved,
            "lost": lost,
            "duplicated": duplicated,
            "errors": dict(self.errors),
            "untyped": len(self.untyped),
            "samples": self.samples,
            "faults": len(self.faults),
            "recovery_s_max": round(max(rec), 3) if rec else None,
        }


def _thread(w: int, threads: int) -> str:
    return f"thread:{w % threads}"


async def _landed(store: Store, scope: str, w: int, i: int, deadline: float) -> bool:
    while True:
        try:
            nodes = await store.nodes(NS, scope, limit=100_000)
        except StoreError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
            continue
        return any(n.kind == "goal" and n.payload == {"w": w, "i": i} for n in nodes)


async def writer(store: Store, w: int, threads: int, stop: asyncio.Event, tally: Tally) -> None:
    scope = _thread(w, threads)
    i = 0
    while not stop.is_set():

        async def turn(txn: Transaction, i: int = i) -> None:
            goal = await txn.append(scope, "goal", {"w": w, "i": i})
            await txn.append(scope, "answer", {"w": w, "i": i}, parents=[goal.id])

        try:
            await transact(store, NS, turn, attempts=50)
        except StoreError as e:
            tally.errors[e.code] += 1
            tally.samples.setdefault(e.code, e.message)
            if e.code == "commit_unknown":
                if not await _landed(store, scope, w, i, time.monotonic() + 30):
                    continue
                tally.resolved += 1
            else:
                await asyncio.sleep(0.02)
                continue
        except Conflict:
            tally.errors["conflict"] += 1
            continue
        except Exception as e:  # what the test is looking for
            tally.untyped.append(f"{type(e).__module__}.{type(e).__name__}: {e}")
            await asyncio.sleep(0.02)
            continue
        tally.acked.add((w, i))
        tally.ack_times.append(time.monotonic())
        i += 1


async def check(store: Store, threads: int, tally: Tally) -> tuple[int, int]:
    """(lost, duplicated) over every thread; asserts each answer follows its goal."""
    seen: Counter[tuple[int, int]] = Counter()
    for t in range(threads):
        nodes = await store.nodes(NS, f"thread:{t}", limit=1_000_000)
        assert [n.sequence for n in nodes] == list(range(1, len(nodes) + 1))
        for goal, answer in zip(nodes[::2], nodes[1::2], strict=True):
            assert (goal.kind, answer.kind) == ("goal", "answer")
            assert answer.payload == goal.payload and answer.parents == (goal.id,)
        for prev, nxt in itertools.pairwise(nodes):
            assert prev.id in nxt.parents
        seen.update((n.payload["w"], n.payload["i"]) for n in nodes[::2])
    lost = len(tally.acked - set(seen))
    duplicated = sum(c - 1 for c in seen.values() if c > 1)
    return lost, duplicated
