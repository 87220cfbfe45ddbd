"""Several ``tether serve`` processes on one PostgreSQL database: the way to scale the
service before sharding (docs/scaling.md). Writers race on the same threads through
different servers; every step a server acknowledged is in the store exactly once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest

import tether
from _server_helpers import TOKEN, serve
from conftest import drop_pg_schema

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

WORKERS, STEPS = 4, 8


async def test_two_servers_on_one_database_lose_no_step(postgres_url: str, tmp_path: Path) -> None:
    schema = f"tether_serve_{uuid.uuid4().hex[:10]}"
    url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
    store = await tether.open_store(url)  # the schema, once, before the servers start
    await store.close()
    agent = ("--agent", "_server_helpers:demo_agent")
    acked: list[tuple[str, str, str]] = []  # (thread, input, run)
    refused: Counter[int] = Counter()
    try:
        with (
            serve(url, tmp_path / "a.log", *agent) as a,  # type: ignore[arg-type]
            serve(url, tmp_path / "b.log", *agent) as b,  # type: ignore[arg-type]
        ):
            auth = {"Authorization": f"Bearer {TOKEN}"}

            async def worker(w: int) -> None:
                # Worker w goes through server w % 2 to thread (w // 2) % 2: each thread
                # gets steps from both servers at once.
                base, thread = (a, b)[w % 2].url, f"t{(w // 2) % 2}"
                async with httpx.AsyncClient(base_url=base, headers=auth, timeout=60) as c:
                    for i in range(STEPS):
                        text = f"step {w}-{i}"
                        r = await c.post(
                            f"/v1/ns/default/threads/{thread}/step",
                            json={"input": text, "user": "u"},
                        )
                        if r.status_code == 200 and r.json()["status"] == "completed":
                            acked.append((thread, text, r.json()["run_id"]))
                        else:
                            refused[r.status_code] += 1

            await asyncio.gather(*(worker(w) for w in range(WORKERS)))
        store = await tether.open_store(url)
        try:
            stored: Counter[tuple[str, str]] = Counter()
            answers: set[str] = set()
            switches = 0  # consecutive steps of a thread that came from different servers
            for t in ("t0", "t1"):
                last = None
                for n in await store.nodes("default", f"thread:{t}", limit=100_000):
                    if n.kind == "goal":
                        stored[(t, n.payload["input"])] += 1
                        server = int(n.payload["input"].split()[1].split("-")[0]) % 2
                        switches += last is not None and server != last
                        last = server
                    elif n.kind == "answer":
                        answers.add(n.payload["run"])
        finally:
            await store.close()
    finally:
        await drop_pg_schema(postgres_url, schema)
    print(f"\ntwo servers: {len(acked)} acked, refused {dict(refused)}, {switches} switches")
    assert switches >= 2  # the servers really interleaved their steps on each thread
    assert len(acked) > WORKERS * STEPS // 2, (len(acked), refused)
    lost = [x for x in acked if stored[(x[0], x[1])] == 0 or x[2] not in answers]
    duplicated = [k for k, c in stored.items() if c > 1]
    assert (lost, duplicated) == ([], [])
    # A step the servers refused wrote no goal either.
    assert sum(stored.values()) == len(acked)
