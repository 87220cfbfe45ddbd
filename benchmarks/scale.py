"""Scale-out benchmark (issue 17): agent turns per second with 1, 2, 4 worker processes,
on one namespace versus one namespace per worker, on PostgreSQL and SQLite.

    .venv/bin/python benchmarks/scale.py --postgres postgresql://postgres@127.0.0.1/db
    .venv/bin/python benchmarks/scale.py --workers 1,2 --seconds 10 --no-sqlite --postgres URL

Each worker is a fresh process with its own store; it runs ``--concurrency`` threads
(conversations) at once with ``asyncio.gather``, each calling ``Agent.step`` with a
``ScriptedModel`` that answers at once, for ``--seconds`` after a common start time.
``shared``: every worker uses namespace ``scale-<run>``; ``separate``: worker i uses
``scale-<run>-i``. Reported: turns/s summed over workers, the ratio shared/separate,
and errors (a turn that raised). ``--repeat N`` interleaves the two N times and
reports medians (a shared machine's load drifts; interleaving keeps it out of the
ratio).

``--populate 1000,100000``: for each size, a fresh namespace gets that many threads
(each one finished run: goal, answer, its index entry) through ``Store.commit`` with
one ``ScopeWrite`` per thread, 1,000 threads a commit; then one fresh process runs
``--turns`` sequential turns (half on new threads, half on populated ones) and
reports per-turn latency (p50, p99), its RSS after the turns, and how long one
``runs(status="suspended")`` listing of the whole namespace takes (it reads every
entry: the listing, not the turn, grows with the store). Results go to ``--json``
(default benchmarks/out/scale.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


async def _worker(
    url: str, namespace: str, tag: str, conc: int, ready: Any, go: Any, seconds: float
) -> dict[str, Any]:
    import tether

    store = await tether.open_store(url)
    model = tether.ScriptedModel([tether.models.Rule(match=None, answer="ok")])
    agent = tether.Agent(tether.Spec.single(), model, store=store, namespace=namespace)
    turns = errors = 0
    first_error = ""
    # Every worker imported and connected, then all start together (a loaded machine
    # can take seconds to spawn one: a fixed start time would cut some workers short).
    ready.put(1)
    start = await asyncio.to_thread(go.get)
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
    q, ready, go = ctx.Queue(), ctx.Queue(), ctx.Queue()
    procs = []
    for i in range(workers):
        ns = f"scale-{run}" if shared else f"scale-{run}-{i}"
        args = (url, ns, f"{run}-{i}", conc, ready, go, seconds)
        p = ctx.Process(target=_proc, args=(args, q))
        p.start()
        procs.append(p)
    for _ in procs:
        ready.get(timeout=300)
    start = time.time() + 0.5
    for _ in procs:
        go.put(start)
    results = [q.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    turns = sum(r["turns"] for r in results)
    _drop(url, [f"scale-{run}"] if shared else [f"scale-{run}-{i}" for i in range(workers)])
    return {
        "workers": workers,
        "namespaces": "one" if shared else "separate",
        "turns_per_s": round(turns / seconds, 1),
        "errors": sum(r["errors"] for r in results),
        "first_error": next((r["first_error"] for r in results if r["first_error"]), ""),
    }


def _populate(url: str, namespace: str, threads: int) -> float:
    """``threads`` finished runs in ``namespace``, 1,000 threads per commit; seconds taken."""
    import tether
    from tether.core.graph import advance_frontier, make_node, now_iso
    from tether.store import ScopeWrite

    async def fill() -> float:
        store = await tether.open_store(url)
        t0 = time.perf_counter()
        at = now_iso()
        for base in range(0, threads, 1000):
            writes = []
            for i in range(base, min(threads, base + 1000)):
                run = f"run_{i:024x}"
                goal = make_node(
                    "goal",
                    {"run": run, "input": f"hello {i}", "llm": "agent", "metadata": {}},
                    (),
                    sequence=1,
                    created_at=at,
                )
                answer = make_node(
                    "answer", {"run": run, "output": "ok"}, (goal.id,), sequence=2, created_at=at
                )
                entry = make_node(
                    "resource",
                    {
                        "status": "completed",
                        "started_at": at,
                        "seq": 1,
                        "metadata": {},
                        "pending": [],
                        "updated_at": at,
                    },
                    (answer.id,),
                    sequence=3,
                    resource_key=f"task:{run}",
                    created_at=at,
                )
                frontier: list[str] = []
                for n in (goal, answer, entry):
                    frontier = advance_frontier(frontier, n)
                writes.append(
                    ScopeWrite(
                        scope=f"thread:p-{i}",
                        expected_generation=0,
                        expected_sequence=0,
                        nodes=(goal, answer, entry),
                        frontier=tuple(frontier),
                    )
                )
            await store.commit(namespace, writes)
        took = time.perf_counter() - t0
        await store.close()
        return took

    return asyncio.run(fill())


async def _latency(url: str, namespace: str, threads: int, turns: int) -> dict[str, Any]:
    import random

    import tether

    store = await tether.open_store(url)
    model = tether.ScriptedModel([tether.models.Rule(match=None, answer="ok")])
    agent = tether.Agent(tether.Spec.single(), model, store=store, namespace=namespace)
    times: list[float] = []
    errors = 0
    first_error = ""
    rnd = random.Random(7)
    for k in range(turns):
        thread = f"new-{k}" if k % 2 == 0 else f"p-{rnd.randrange(threads)}"
        t0 = time.perf_counter()
        try:
            r = await agent.step(f"hello {k}", thread=thread)
            model.requests.clear()
            if r.answer != "ok":
                raise AssertionError(r)
        except Exception as e:
            errors += 1
            first_error = first_error or f"{type(e).__name__}: {e}"
        times.append(time.perf_counter() - t0)
    # The turning process's memory, before the listing (which holds every entry it reads).
    rss = _rss_kib()
    t0 = time.perf_counter()
    listed = await agent.runs(status="suspended")
    list_s = time.perf_counter() - t0
    await store.close()
    times.sort()
    return {
        "turn_p50_ms": round(times[len(times) // 2] * 1000, 2),
        "turn_p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))] * 1000, 2),
        "rss_mib": round(rss / 1024, 1),
        "rss_after_list_mib": round(_rss_kib() / 1024, 1),
        "list_runs_s": round(list_s, 3),
        "listed_total": sum(listed.counts.values()),
        "errors": errors,
        "first_error": first_error,
    }


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmRSS:"))


def _latency_proc(args: tuple[Any, ...], out: Any) -> None:
    out.put(asyncio.run(_latency(*args)))


def measure_populated(url: str, threads: int, turns: int) -> dict[str, Any]:
    ns = f"pop-{uuid.uuid4().hex[:8]}"
    fill_s = _populate(url, ns, threads)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_latency_proc, args=((url, ns, threads, turns), q))
    p.start()
    r = q.get(timeout=3600)
    p.join()
    _drop(url, [ns])
    return {"threads": threads, "populate_s": round(fill_s, 1), **r}


def _drop(url: str, namespaces: list[str]) -> None:
    """Delete what a measurement wrote (a server's database outlives the benchmark)."""

    async def go() -> None:
        import tether

        store = await tether.open_store(url)
        for ns in namespaces:
            await store.delete_namespace(ns)
        await store.close()

    asyncio.run(go())


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--postgres", metavar="URL", help="PostgreSQL to benchmark")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--concurrency", type=int, default=8, help="threads per worker at once")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "out" / "scale.json")
    ap.add_argument("--repeat", type=int, default=1, help="interleaved runs; medians reported")
    ap.add_argument("--populate", default="", help="thread counts, e.g. 1000,100000")
    ap.add_argument("--turns", type=int, default=200, help="turns timed per populated store")
    ap.add_argument("--no-throughput", action="store_true", help="only the --populate part")
    a = ap.parse_args()
    targets: list[tuple[str, str]] = []
    tmp = tempfile.mkdtemp(prefix="tether-scale-")
    if not a.no_sqlite:
        targets.append(("sqlite", f"sqlite:///{tmp}/scale.db"))
    if a.postgres:
        targets.append(("postgres", a.postgres))
    rows = []
    for name, url in targets if not a.no_throughput else ():
        for w in [int(x) for x in a.workers.split(",")]:
            got: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
            for _ in range(a.repeat):
                for shared in (True, False):
                    r = {"backend": name, **measure(url, w, shared, a.concurrency, a.seconds)}
                    got[shared].append(r)
                    print(json.dumps(r), flush=True)
            for shared in (True, False):
                rs = got[shared]
                rows.append(
                    {
                        **rs[0],
                        "turns_per_s": round(_median([r["turns_per_s"] for r in rs]), 1),
                        "runs": [r["turns_per_s"] for r in rs],
                        "errors": sum(r["errors"] for r in rs),
                    }
                )
    populated = []
    for name, url in targets:
        for n in [int(float(x)) for x in a.populate.split(",") if x]:
            r = {"backend": name, **measure_populated(url, n, a.turns)}
            populated.append(r)
            print(json.dumps(r), flush=True)
    print(
        "\n| backend | workers | one namespace turns/s | separate turns/s | one / separate | errors |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, _ in targets if rows else ():
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
    if populated:
        print(
            "\n| backend | threads in store | turn p50 ms | turn p99 ms | RSS MiB"
            " | RSS after listing MiB | list all runs s | populate s | errors |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in populated:
            print(
                f"| {r['backend']} | {r['threads']:,} | {r['turn_p50_ms']} | {r['turn_p99_ms']}"
                f" | {r['rss_mib']} | {r['rss_after_list_mib']} | {r['list_runs_s']}"
                f" | {r['populate_s']} | {r['errors']} |"
            )
    shutil.rmtree(tmp, ignore_errors=True)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": " ".join(sys.argv),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
    }
    a.json.write_text(json.dumps({"meta": meta, "rows": rows, "populated": populated}, indent=1))


if __name__ == "__main__":
    main()
