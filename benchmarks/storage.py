"""Storage-only benchmark: tether's stores beside the floor, a plain loop doing the same I/O.

    .venv/bin/python benchmarks/storage.py               # SQLite, about a minute
    .venv/bin/python benchmarks/storage.py --quick       # smoke run, a few seconds
    .venv/bin/python benchmarks/storage.py --postgres postgresql://postgres@127.0.0.1/test
    .venv/bin/python benchmarks/storage.py --readme      # also rewrite README "## Storage performance"

What is measured (messages of 200 ASCII bytes; a turn = a user and an assistant message):

* **append latency** of one durable turn at history lengths 10, 100, 1,000 and 10,000:
  the median and p90 over ``--samples`` turns, each written at history H to 1.1 H (threads
  grown to H, then a window of H/10 turns timed; several threads for small H), after a
  warm-up so that the WAL file has stopped growing. tether's figure is the whole caller path: a ``Transaction`` reads the head,
  builds two nodes (canonical JSON, SHA-256 identity) and commits them; the time of the
  ``store.commit`` call alone is shown too;
* **throughput**: ``--threads`` threads x ``--thread-turns`` turns, round robin, turns/s;
* **cold load**: a fresh process (imports done) opens the store and reads a 2,000-message
  thread, every payload decoded;
* **bytes on disk per turn** after a checkpoint (WAL folded into the file).

The floor is a plain sqlite3 loop (or asyncpg, for PostgreSQL) that inserts the very same
payload bytes, one row per message, one transaction per turn, with the same durability
(WAL + synchronous=FULL; synchronous_commit=on). Each tether turn is paired with a floor
turn and their order alternates, so background load on the machine hits both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from precompile import compile_tether  # noqa: E402

import tether  # noqa: E402
from tether import Transaction  # noqa: E402

NS = "bench"
MESSAGE_BYTES = 200
_FILL = (
    "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor "
    "jugs. How vexingly quick daft zebras jump! Sphinx of black quartz, judge my vow. "
) * 3


def message(thread: str, turn: int, role: str) -> str:
    return (f"[{role} {thread} #{turn}] " + _FILL)[:MESSAGE_BYTES]


def payloads(thread: str, turn: int) -> tuple[dict[str, str], dict[str, str]]:
    return (
        {"role": "user", "content": message(thread, turn, "user")},
        {"role": "assistant", "content": message(thread, turn, "assistant")},
    )


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


# --- the systems -------------------------------------------------------------------------


class TetherSide:
    """tether through its public API: a Transaction per turn."""

    def __init__(self, store: tether.Store) -> None:
        self.store = store
        self.commit_times: list[float] = []
        self.turns = 0  # every turn written (the floor writes the same ones)

    async def turn(self, thread: str, i: int) -> None:
        self.turns += 1
        user, assistant = payloads(thread, i)
        scope = "thread:" + thread
        txn = Transaction(self.store, NS)
        await txn.append(scope, "goal", user)
        await txn.append(scope, "answer", assistant)
        t = time.perf_counter()
        await txn.commit()
        self.commit_times.append(time.perf_counter() - t)


class SqliteFloor:
    """The same bytes, the same durability, nothing else."""

    def __init__(self, path: Path, durability: str) -> None:
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={durability.upper()}")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS messages (thread TEXT NOT NULL, seq INTEGER NOT NULL,"
            " payload BLOB NOT NULL, PRIMARY KEY (thread, seq))"
        )

    async def turn(self, thread: str, i: int) -> None:
        user, assistant = payloads(thread, i)
        c = self.conn
        c.execute("BEGIN")
        c.execute("INSERT INTO messages VALUES (?, ?, ?)", (thread, 2 * i + 1, orjson.dumps(user)))
        c.execute(
            "INSERT INTO messages VALUES (?, ?, ?)", (thread, 2 * i + 2, orjson.dumps(assistant))
        )
        c.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


class PgFloor:
    def __init__(self, conn: Any, table: str) -> None:
        self.conn = conn
        self.table = table

    async def turn(self, thread: str, i: int) -> None:
        user, assistant = payloads(thread, i)
        # One statement, one round trip, one commit: the least a durable turn can cost.
        await self.conn.execute(
            f"INSERT INTO {self.table} VALUES ($1, $2, $3), ($1, $4, $5)",
            thread,
            2 * i + 1,
            orjson.dumps(user),
            2 * i + 2,
            orjson.dumps(assistant),
        )


Turn = Callable[[str, int], Awaitable[None]]


async def paired(a: Turn, b: Turn, thread: str, i: int, ta: list[float], tb: list[float]) -> None:
    """One turn of each; the order alternates so neither always runs right after the other."""
    first, second = ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta))
    for fn, acc in (first, second):
        t = time.perf_counter()
        await fn(thread, i)
        acc.append(time.perf_counter() - t)


# --- phases ------------------------------------------------------------------------------


async def latency(
    tet: TetherSide, floor: Any, marks: list[int], samples: int
) -> list[dict[str, Any]]:
    """Time ``samples`` turns at each history length H, every one at history H..1.1H.

    A thread is grown to H turns (untimed), then a window of at most H/10 turns is
    timed; small H use several threads to gather enough samples.
    """
    out = []
    for mark in marks:
        window = max(1, min(samples, mark // 10))
        ta: list[float] = []
        tb: list[float] = []
        tet.commit_times.clear()
        for t in range(-(-samples // window)):
            thread = f"h{mark}-{t}"
            for i in range(mark):
                await paired(tet.turn, floor.turn, thread, i, [], [])
            for i in range(mark, mark + window):
                await paired(tet.turn, floor.turn, thread, i, ta, tb)
        row = {
            "history": mark,
            "window": window,
            "samples": len(ta),
            "tether_median_ms": statistics.median(ta) * 1e3,
            "tether_p90_ms": pct(ta, 0.9) * 1e3,
            "commit_median_ms": statistics.median(tet.commit_times) * 1e3,
            "floor_median_ms": statistics.median(tb) * 1e3,
            "floor_p90_ms": pct(tb, 0.9) * 1e3,
        }
        row["ratio"] = row["tether_median_ms"] / row["floor_median_ms"]
        out.append(row)
        log(
            f"  history {mark:>6}: tether {row['tether_median_ms']:.3f} ms "
            f"(commit {row['commit_median_ms']:.3f}), floor {row['floor_median_ms']:.3f} ms, "
            f"x{row['ratio']:.2f}"
        )
    return out


async def warmup(tet: TetherSide, floor: Any, turns: int) -> None:
    for i in range(turns):
        await paired(tet.turn, floor.turn, "warmup", i, [], [])


async def throughput(tet: TetherSide, floor: Any, threads: int, turns: int) -> dict[str, Any]:
    ta: list[float] = []
    tb: list[float] = []
    for i in range(turns):
        for k in range(threads):
            await paired(tet.turn, floor.turn, f"tp{k:04d}", i, ta, tb)
    n = threads * turns
    row = {
        "threads": threads,
        "turns": n,
        "tether_turns_per_s": n / sum(ta),
        "floor_turns_per_s": n / sum(tb),
    }
    log(
        f"  throughput {threads}x{turns}: tether {row['tether_turns_per_s']:.0f}/s, "
        f"floor {row['floor_turns_per_s']:.0f}/s"
    )
    return row


COLD_TETHER = """
import asyncio, sys, time
sys.path.insert(0, {src!r})
# Imports are not load time: the backend, its driver and what open_store imports lazily.
import tether, tether.store.{backend}, tether.crypto._store
import tether.store._{backend}_keys
if {backend!r} == "postgres":
    import asyncpg
t0 = time.perf_counter()
async def main():
    store = await tether.open_store({url!r})
    n, after = 0, 0
    while True:
        page = await store.nodes({ns!r}, "thread:cold", after=after, limit=1000)
        if not page:
            break
        n += sum(1 for x in page if x.payload["content"])
        after = page[-1].sequence
    await store.close()
    return n
n = asyncio.run(main())
print(n, time.perf_counter() - t0)
"""

COLD_SQLITE = """
import sqlite3, sys, time
import orjson
t0 = time.perf_counter()
c = sqlite3.connect({path!r})
rows = c.execute("SELECT payload FROM messages WHERE thread = 'cold' ORDER BY seq").fetchall()
n = sum(1 for (p,) in rows if orjson.loads(p)["content"])
c.close()
print(n, time.perf_counter() - t0)
"""

COLD_PG = """
import asyncio, sys, time
import asyncpg, orjson
t0 = time.perf_counter()
async def main():
    c = await asyncpg.connect({url!r})
    rows = await c.fetch("SELECT payload FROM {table} WHERE thread = 'cold' ORDER BY seq")
    await c.close()
    return sum(1 for r in rows if orjson.loads(r[0])["content"])
n = asyncio.run(main())
print(n, time.perf_counter() - t0)
"""


def cold(script: str, runs: int, expect: int) -> float:
    times = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", script], check=True, capture_output=True, text=True
        ).stdout.split()
        if int(out[0]) != expect:
            raise SystemExit(f"cold load returned {out[0]} messages, expected {expect}")
        times.append(float(out[1]))
    return statistics.median(times)


def sqlite_bytes(path: Path) -> int:
    c = sqlite3.connect(path)
    try:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        c.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- drivers -----------------------------------------------------------------------------


async def run_sqlite(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    log(f"SQLite (durability={args.durability}) in {work}")
    tpath, fpath = work / "tether.db", work / "floor.db"
    store = await tether.open_store(f"sqlite:///{tpath}", durability=args.durability)
    tet, floor = TetherSide(store), SqliteFloor(fpath, args.durability)
    res: dict[str, Any] = {
        "backend": "sqlite",
        "durability": args.durability,
        "samples": args.samples,
    }
    try:
        await warmup(tet, floor, args.warmup)
        res["latency"] = await latency(tet, floor, args.marks, args.samples)
        res["throughput"] = await throughput(tet, floor, args.threads, args.thread_turns)
        for i in range(args.cold_turns):
            await paired(tet.turn, floor.turn, "cold", i, [], [])
    finally:
        await store.close()
        floor.close()
    turns = tet.turns
    tb, fb = sqlite_bytes(tpath), sqlite_bytes(fpath)
    res["bytes"] = {
        "turns": turns,
        "tether_per_turn": tb / turns,
        "floor_per_turn": fb / turns,
        "payload_per_turn": sum(len(orjson.dumps(p)) for p in payloads("latency", 0)),
    }
    log(f"  bytes/turn: tether {tb / turns:.0f}, floor {fb / turns:.0f}")
    msgs = 2 * args.cold_turns
    res["cold"] = {
        "messages": msgs,
        "tether_ms": 1e3
        * cold(
            COLD_TETHER.format(
                src=str(ROOT / "src"), url=f"sqlite:///{tpath}", ns=NS, backend="sqlite"
            ),
            args.cold_runs,
            msgs,
        ),
        "floor_ms": 1e3 * cold(COLD_SQLITE.format(path=str(fpath)), args.cold_runs, msgs),
    }
    log(f"  cold load of {msgs} messages: {res['cold']}")
    return res


async def run_postgres(args: argparse.Namespace) -> dict[str, Any]:
    import asyncpg

    schema = f"tether_bench_{os.getpid()}"
    url = args.postgres
    sep = "&" if "?" in url else "?"
    log(f"PostgreSQL schema {schema}")
    store = await tether.open_store(f"{url}{sep}schema={schema}")
    conn = await asyncpg.connect(url)
    table = f"{schema}.floor_messages"
    await conn.execute(
        f"CREATE TABLE {table} (thread text NOT NULL, seq bigint NOT NULL,"
        " payload bytea NOT NULL, PRIMARY KEY (thread, seq))"
    )
    tet, floor = TetherSide(store), PgFloor(conn, table)
    res: dict[str, Any] = {
        "backend": "postgres",
        "durability": "synchronous_commit=on",
        "samples": args.samples,
    }
    try:
        await warmup(tet, floor, args.warmup)
        res["latency"] = await latency(tet, floor, args.marks, args.samples)
        res["throughput"] = await throughput(tet, floor, args.threads, args.thread_turns)
        for i in range(args.cold_turns):
            await paired(tet.turn, floor.turn, "cold", i, [], [])
        await store.close()
        turns = tet.turns
        await conn.execute(f"VACUUM ANALYZE {table}")
        sizes = await conn.fetch(
            "SELECT c.relname, pg_total_relation_size(c.oid) AS size FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = $1 AND c.relkind = 'r'",
            schema,
        )
        tb = sum(r["size"] for r in sizes if r["relname"].startswith("tether"))
        fb = sum(r["size"] for r in sizes if r["relname"] == "floor_messages")
        res["bytes"] = {"turns": turns, "tether_per_turn": tb / turns, "floor_per_turn": fb / turns}
        log(f"  bytes/turn: tether {tb / turns:.0f}, floor {fb / turns:.0f}")
        msgs = 2 * args.cold_turns
        res["cold"] = {
            "messages": msgs,
            "tether_ms": 1e3
            * cold(
                COLD_TETHER.format(
                    src=str(ROOT / "src"),
                    url=f"{url}{sep}schema={schema}",
                    ns=NS,
                    backend="postgres",
                ),
                args.cold_runs,
                msgs,
            ),
            "floor_ms": 1e3 * cold(COLD_PG.format(url=url, table=table), args.cold_runs, msgs),
        }
        log(f"  cold load of {msgs} messages: {res['cold']}")
    finally:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await conn.close()
    return res


# --- report ------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    load = os.getloadavg()
    return {
        "date": dt.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Linux {platform.release()}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "load": f"{load[0]:.1f}",
    }


def _span(xs: list[float]) -> str:
    lo, hi = min(xs), max(xs)
    return f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}x"


def markdown(doc: dict[str, Any]) -> str:
    m = doc["meta"]
    lines = [
        "## Storage performance",
        "",
        f"`{m['command']}` on {m['date']}: {m['machine']} (load average {m['load']} at the "
        f"start: other work shared the machine), Python {m['python']}, SQLite {m['sqlite']}. "
        "The *floor* is a plain loop inserting the same payload bytes, one row per message "
        "and one transaction per turn, with the same durability; every tether turn is paired "
        "with a floor turn (alternating order), so background load hits both alike. *tether* "
        "is the whole caller path: a `Transaction` reads the head, builds and hashes two "
        "nodes, commits; *commit* is the `store.commit` call alone (the storage layer).",
        "",
    ]
    for r in doc["results"]:
        name = "SQLite" if r["backend"] == "sqlite" else "PostgreSQL"
        lat = r["latency"]
        commit_ratios = [x["commit_median_ms"] / x["floor_median_ms"] for x in lat]
        lines += [
            f"**{name}** ({r['durability']}): durable append of one turn (2 messages); "
            f"at each history length H, the median of {r.get('samples', '?')} or more turns, "
            "each written at history H to 1.1 H",
            "",
            "| history (turns) | tether ms | commit ms | floor ms | tether / floor "
            "| commit / floor | tether p90 ms | floor p90 ms |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for x, cr in zip(lat, commit_ratios, strict=True):
            lines.append(
                f"| {x['history']:,} | {x['tether_median_ms']:.3f} | "
                f"{x['commit_median_ms']:.3f} | {x['floor_median_ms']:.3f} | "
                f"{x['ratio']:.2f}x | {cr:.2f}x | {x['tether_p90_ms']:.3f} | "
                f"{x['floor_p90_ms']:.3f} |"
            )
        tp, by, co = r["throughput"], r["bytes"], r["cold"]
        lines += [
            "",
            f"From {lat[0]['history']:,} to {lat[-1]['history']:,} turns of history the "
            f"median goes from {lat[0]['tether_median_ms']:.3f} to "
            f"{lat[-1]['tether_median_ms']:.3f} ms (floor: {lat[0]['floor_median_ms']:.3f} "
            f"to {lat[-1]['floor_median_ms']:.3f}). The storage layer is "
            f"{_span(commit_ratios)} the floor; the whole path "
            f"{_span([x['ratio'] for x in lat])}.",
            "",
            "| | tether | floor |",
            "|---|---:|---:|",
            f"| throughput, {tp['threads']} threads x {tp['turns'] // tp['threads']} turns "
            f"(turns/s) | {tp['tether_turns_per_s']:,.0f} | {tp['floor_turns_per_s']:,.0f} |",
            f"| cold load of a {co['messages']:,}-message thread (ms, new process, after "
            f"imports) | {co['tether_ms']:.1f} | {co['floor_ms']:.1f} |",
            f"| bytes on disk per turn ({by['turns']:,} turns) | {by['tether_per_turn']:,.0f} | "
            f"{by['floor_per_turn']:,.0f} |",
            "",
        ]
    lines += [
        "Where the time goes. The storage layer's own gap to the floor is mostly the unique "
        "index on node ids that content addressing needs (ids are hashes, so each insert "
        "lands on a random index page: about 10% at 10,000 turns) and validating the write. "
        "The rest of the whole path is the core's work per turn, outside the store: reading "
        "the head, canonicalising and hashing two nodes, and the `Transaction`'s "
        "bookkeeping. On PostgreSQL the floor is one INSERT statement; tether makes two "
        "round trips (the head read, then one `tether_commit` call that checks and moves "
        "the head and inserts the nodes). The cold load decodes every row into a "
        "`CausalNode` (ids, parents, timestamp, payload); the floor only parses the JSON. "
        "Details: [docs/storage.md](docs/storage.md).",
        "",
    ]
    return "\n".join(lines)


def update_readme(section: str) -> None:
    path = ROOT / "README.md"
    text = path.read_text()
    head = "## Storage performance"
    if head in text:
        start = text.index(head)
        nxt = text.find("\n## ", start + len(head))
        end = len(text) if nxt == -1 else nxt + 1
        text = text[:start] + section.rstrip() + "\n" + ("\n" + text[end:] if nxt != -1 else "")
    else:
        text = text.rstrip() + "\n\n" + section.rstrip() + "\n"
    path.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few seconds: small figures")
    ap.add_argument("--marks", default="10,100,1000,10000", help="history lengths (turns)")
    ap.add_argument("--samples", type=int, default=200, help="turns timed at each mark")
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--thread-turns", type=int, default=10)
    ap.add_argument("--cold-turns", type=int, default=1000, help="turns of the cold thread")
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument(
        "--warmup",
        type=int,
        default=600,
        help="turns written (untimed) to another thread first, so the WAL has reached its "
        "steady size (a growing file costs every commit a metadata sync)",
    )
    ap.add_argument("--durability", choices=["full", "normal"], default="full")
    ap.add_argument("--postgres", metavar="URL", help="also benchmark PostgreSQL at URL")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--readme", action="store_true", help="rewrite README's storage section")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "out" / "storage.json")
    ap.add_argument(
        "--render", type=Path, metavar="JSON", help="only print (and --readme) a saved run"
    )
    args = ap.parse_args()
    if args.render:
        md = markdown(json.loads(args.render.read_text()))
        print(md)
        if args.readme:
            update_readme(md)
        return
    if args.quick:
        args.marks, args.samples, args.threads, args.thread_turns = "10,100", 30, 20, 3
        args.cold_turns, args.cold_runs, args.warmup = 100, 1, 20
    args.marks = [int(x) for x in str(args.marks).split(",")]
    meta = machine()
    meta["bytecode"] = compile_tether()
    results = []
    work = Path(tempfile.mkdtemp(prefix="tether-bench-"))
    try:
        if not args.no_sqlite:
            results.append(asyncio.run(run_sqlite(args, work)))
        if args.postgres:
            results.append(asyncio.run(run_postgres(args)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    shown: list[str] = []
    skip = False
    for a in sys.argv[1:]:  # the command as a reader would rerun it: no paths, no URLs
        if skip:
            skip = False
        elif a in ("--json", "--postgres"):
            skip = a == "--json"
            shown += [] if a == "--json" else ["--postgres", "URL"]
        elif a != "--readme" and "://" not in a and not a.startswith("--json="):
            shown.append(a)
    meta["command"] = " ".join(["python benchmarks/storage.py", *shown])
    doc = {"meta": meta, "results": results}
    md = markdown(doc)
    print(md)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2))
    if args.readme:
        update_readme(md)


if __name__ == "__main__":
    main()
