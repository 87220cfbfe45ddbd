"""Scale-out benchmark (issue 17): agent turns per second with 1, 2, 4 worker processes,
on one namespace versus one namespace per worker, on PostgreSQL and SQLite.

    .venv/bin/python benchmarks/scale.py --postgres postgresql://postgres@127.0.0.1/db
    .venv/bin/python benchmarks/scale.py --workers 1,2 --seconds 10 --no-sqlite --postgres URL

Each worker is a fresh process with its own store; it runs ``--concurrency`` threads
(conversations) at once with ``asyncio.gather``, each calling ``Agent.step`` with a
``ScriptedModel`` that answers at once, for ``--seconds`` after a common start time.
``shared``: every worker uses namespace ``scale-<run>``; ``separate``: worker i uses
``scale-<run>-i``. Reported: turns/s summed over workers, the ratio shared/separate,
and errors (a turn that raised). Results go to ``--json`` (default
benchmarks/out/scale.json). Not done yet: per-turn latency and memory with 10^3..10^6
threads in the store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


async def _worker(
    url: str, namespace: str, tag: str, conc: int, start: float, seconds: float
) -> dict[str, Any]:
    import tether

    store = await tether.open_store(url)
    model = tether.ScriptedModel([tether.models.Rule(match=None, answer="ok")])
    agent = tether.Agent(tether.Spec.single(), model, store=store, namespace=namespace)
    turns = errors = 0
    first_error = ""
    await asyncio.sleep(max(0.0, start - time.time()))
    end = start + seconds

    async def conversation(c: int) -> None:
        nonlocal turns, errors, first_error
        k = 0
        while time.time() < end:
            try:
                r = await agent.step(f"hello {k}", thread=f"t-{tag}-{c}")
                model.requests.clear()
                if r.answer != "ok":
                    raise AssertionError(r)
                turns += 1
            except Exception as e:  # a turn that raised is counted, not hidden
                errors += 1
                first_error = first_error or f"{type(e).__name__}: {e}"
            k += 1

    await asyncio.gather(*(conversation(c) for c in range(conc)))
    await store.close()
    return {"turns": turns, "errors": errors, "first_error": first_error}


def _proc(args: tuple[Any, ...], out: Any) -> None:
    out.put(asyncio.run(_worker(*args)))


def measure(url: str, workers: int, shared: bool, conc: int, seconds: float) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    start = time.time() + 3.0  # every process imported and connected by then
    procs = []
    for i in range(workers):
        ns = f"scale-{run}" if shared else f"scale-{run}-{i}"
        p = ctx.Process(target=_proc, args=((url, ns, f"{run}-{i}", conc, start, seconds), q))
        p.start()
        procs.append(p)
    results = [q.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    turns = sum(r["turns"] for r in results)
    return {
        "workers": workers,
        "namespaces": "one" if shared else "separate",
        "turns_per_s": round(turns / seconds, 1),
        "errors": sum(r["errors"] for r in results),
        "first_error": next((r["first_error"] for r in results if r["first_error"]), ""),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--postgres", metavar="URL", help="PostgreSQL to benchmark")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--concurrency", type=int, default=8, help="threads per worker at once")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "out" / "scale.json")
    a = ap.parse_args()
    targets: list[tuple[str, str]] = []
    tmp = tempfile.mkdtemp(prefix="tether-scale-")
    if not a.no_sqlite:
        targets.append(("sqlite", f"sqlite:///{tmp}/scale.db"))
    if a.postgres:
        targets.append(("postgres", a.postgres))
    rows = []
    for name, url in targets:
        for w in [int(x) for x in a.workers.split(",")]:
            for shared in (True, False):
                r = {"backend": name, **measure(url, w, shared, a.concurrency, a.seconds)}
                rows.append(r)
                print(json.dumps(r), flush=True)
    print(
        "\n| backend | workers | one namespace turns/s | separate turns/s | one / separate | errors |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, _ in targets:
        for w in [int(x) for x in a.workers.split(",")]:
            one = next(
                r
                for r in rows
                if r["backend"] == name and r["workers"] == w and r["namespaces"] == "one"
            )
            sep = next(
                r
                for r in rows
                if r["backend"] == name and r["workers"] == w and r["namespaces"] == "separate"
            )
            ratio = one["turns_per_s"] / sep["turns_per_s"] if sep["turns_per_s"] else float("nan")
            print(
                f"| {name} | {w} | {one['turns_per_s']} | {sep['turns_per_s']} | {ratio:.2f} | {one['errors'] + sep['errors']} |"
            )
    a.json.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": " ".join(sys.argv),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
    }
    a.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
