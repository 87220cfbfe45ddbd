"""tether (SQLite) against the floor, as issue 40 defines it: two floors in bare Python.

    python benchmarks/floor.py                 # 1,000 turns, 200 x 20 threads, 3 repeats
    python benchmarks/floor.py --quick         # a smoke run, a few seconds
    python benchmarks/floor.py --json out.json --markdown

The systems, each in its own process, on the same SQLite settings (WAL, the same
``wal_autocheckpoint`` as tether's store sets at each level, synchronous FULL and NORMAL):

* **plain floor**: the rows a hand-written app would store for the turn: one table
  ``(thread, seq, payload)`` keyed by ``(thread, seq)``, the payload ``orjson.dumps`` of
  the message dict, two INSERTs and a COMMIT; its cold load opens the file, selects the
  thread and ``orjson.loads`` every payload (a TEXT column nobody parses is not a read);
* **identity floor**: the plain floor plus the identity rule's own work per node, in bare
  Python: the payload's canonical JSON (``orjson`` with sorted keys, which is RFC 8785 for
  these string-only payloads), the body ``{"kind","parents","payload"}`` around it and its
  SHA-256; the 12-byte id is stored in the row (no index) and read back by the load;
* **tether**: one ``tether.Transaction`` per turn, a goal and an answer node (the bench's
  adapter, ``systems/_tether.py``); its cold load ``open_store`` + ``store.nodes`` pages of
  1,000 (full ``CausalNode``s); ``store.payloads`` beside it, and the thread's whole
  conversation as a model is sent it (``conversation_view``: the messages built).

Figures: write latency per turn (wall, the median of the turns in 1-10 / 91-100 /
991-1000 of one thread, then the median over ``--repeats`` processes); throughput over
T threads x K turns round-robin (turns/s, the best of the processes, and turns per
second of CPU time, which a busy machine does not change); a cold open +
read of the 2,000-message thread in a fresh process (the least of ``--load-runs``).
Best and least, not medians, where a whole process is timed: on a shared machine
other work only ever slows a run.

tether's time is split, in separate instrumented processes, into **SQL** (every execute
on the store's connection and cursor, the fsync included at FULL), **codec** (orjson of
the payloads: encode on a write, decode on a read), **identity** (canonical JSON and the
hash: ``tether.core.graph.canonical_payload`` and ``_identity``) and **own Python** (the
time less those three), over the turns no other process held up (those at or under
the median turn). For the cold read, SQL is tether's own SELECTs
stepped by bare sqlite3 in a fresh process, codec the ``orjson.loads`` of the payloads.
Times on a shared machine are noisy: compare rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import gc
import hashlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from workload import MESSAGE_BYTES, THREAD_A, thread_name, turn_messages  # noqa: E402

SYSTEMS = ("plain", "identity", "tether")
LABELS = {"plain": "plain floor", "identity": "identity floor", "tether": "tether (SQLite)"}
SYNCS = ("FULL", "NORMAL")
WAL_PAGES = {"FULL": 1000, "NORMAL": 1000}  # tether.store.sqlite._WAL_AUTOCHECKPOINT
SEGMENTS = ((1, 10), (91, 100), (991, 1000))
NAMESPACE = "bench"
SPLIT = ("sql", "codec", "identity")


# --- the floors ------------------------------------------------------------------------------


class Plain:
    """Two INSERTs and a COMMIT a turn; the payload is the message dict as JSON."""

    identity = False

    def __init__(self, path: Path, sync: str) -> None:
        self.conn = c = sqlite3.connect(path, isolation_level=None)
        c.execute("PRAGMA journal_mode=WAL")
        c.execute(f"PRAGMA synchronous={sync}")
        c.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES[sync]}")
        c.execute(
            "CREATE TABLE IF NOT EXISTS messages (thread TEXT NOT NULL, seq INTEGER NOT NULL,"
            " id BLOB, payload BLOB NOT NULL, PRIMARY KEY (thread, seq))"
        )
        self.tail: dict[str, bytes] = {}

    async def write_turn(self, thread: str, turn: int, user: str, assistant: str) -> None:
        c = self.conn
        c.execute("BEGIN")
        for i, (kind, role, text) in enumerate(
            (("goal", "user", user), ("answer", "assistant", assistant))
        ):
            payload = {"role": role, "content": text}
            if self.identity:
                data = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
                prev = self.tail.get(thread)
                parents = b"" if prev is None else b'"cw_' + prev.hex().encode() + b'"'
                body = b"".join(
                    (
                        b'{"kind":"',
                        kind.encode(),
                        b'","parents":[',
                        parents,
                        b'],"payload":',
                        data,
                        b"}",
                    )
                )
                id_ = self.tail[thread] = hashlib.sha256(body).digest()[:12]
            else:
                data, id_ = orjson.dumps(payload), None
            c.execute(
                "INSERT INTO messages (thread, seq, id, payload) VALUES (?, ?, ?, ?)",
                (thread, 2 * turn + i, id_, data),
            )
        c.execute("COMMIT")

    async def load(self, thread: str) -> list[Any]:
        if self.identity:
            rows = self.conn.execute(
                "SELECT id, payload FROM messages WHERE thread = ? ORDER BY seq", (thread,)
            )
            return [(i, orjson.loads(p)) for i, p in rows]
        rows = self.conn.execute(
            "SELECT payload FROM messages WHERE thread = ? ORDER BY seq", (thread,)
        )
        return [orjson.loads(p) for (p,) in rows]

    async def close(self) -> None:
        self.conn.close()


class Identity(Plain):
    identity = True


class Tether:
    """The bench's adapter: a Transaction per turn, ``store.nodes`` pages for the load."""

    def __init__(self, store: Any) -> None:
        import tether

        self.store = store
        self.Transaction = tether.Transaction
        self.scope = tether.core.scopes.thread

    @classmethod
    async def open(cls, path: Path, sync: str) -> Tether:
        import tether

        return cls(await tether.open_store(f"sqlite:///{path}", durability=sync.lower()))

    async def write_turn(self, thread: str, turn: int, user: str, assistant: str) -> None:
        scope = self.scope(thread)
        txn = self.Transaction(self.store, NAMESPACE)
        await txn.append(scope, "goal", {"role": "user", "content": user})
        await txn.append(scope, "answer", {"role": "assistant", "content": assistant})
        await txn.commit()

    async def load(self, thread: str, read: str = "nodes") -> list[Any]:
        if read == "view":
            # the thread's conversation as a model is sent it: the whole buffer
            from tether.projections import conversation_view

            view = await conversation_view(self.store, NAMESPACE, thread)
            return view.messages
        scope, out, after = self.scope(thread), [], 0
        page_of = self.store.nodes if read == "nodes" else self.store.payloads
        while True:
            page = await page_of(NAMESPACE, scope, after=after, limit=1000)
            # every payload touched, as the floors' loads decode every one
            out.extend([n.payload for n in page] if read == "nodes" else page)
            if len(page) < 1000:
                return out
            after = page[-1].sequence if read == "nodes" else page[-1][0]

    async def close(self) -> None:
        await self.store.close()


async def open_system(system: str, workdir: Path, sync: str) -> Any:
    path = workdir / f"{system}.db"
    if system == "tether":
        return await Tether.open(path, sync)
    return (Identity if system == "identity" else Plain)(path, sync)


def workload(kind: str, turns: int, threads: int, per_thread: int) -> list[tuple[str, int]]:
    if kind == "single":
        return [(THREAD_A, i) for i in range(turns)]
    return [(thread_name(k), i) for i in range(per_thread) for k in range(threads)]


# --- instrumenting tether (the split) --------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.spent = dict.fromkeys(SPLIT, 0.0)


class _TimedCursor:
    """Stands in for the store's connection or cursor: times every execute (for a write,
    the statement runs to its end inside execute)."""

    def __init__(self, target: Any, clock: _Clock) -> None:
        self._t, self._clock = target, clock

    def execute(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._t.execute(*args)
        finally:
            self._clock.spent["sql"] += time.perf_counter() - t0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._t, name)


class _TimedOrjson:
    def __init__(self, clock: _Clock) -> None:
        self._clock = clock

    def dumps(self, *args: Any, **kw: Any) -> bytes:
        t0 = time.perf_counter()
        try:
            return orjson.dumps(*args, **kw)
        finally:
            self._clock.spent["codec"] += time.perf_counter() - t0

    def loads(self, data: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return orjson.loads(data)
        finally:
            self._clock.spent["codec"] += time.perf_counter() - t0

    def __getattr__(self, name: str) -> Any:
        return getattr(orjson, name)


def instrument(store: Any, clock: _Clock) -> None:
    import tether.core.graph as graph
    import tether.store.sqlite as tss

    store._conn = _TimedCursor(store._conn, clock)
    store._cur = _TimedCursor(store._cur, clock)
    tss.orjson = _TimedOrjson(clock)  # type: ignore[assignment]
    for name in ("canonical_payload", "_identity"):
        fn = getattr(graph, name)

        def timed(*args: Any, _fn: Any = fn, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _fn(*args, **kw)
            finally:
                clock.spent["identity"] += time.perf_counter() - t0

        setattr(graph, name, timed)


# --- workers (one per process) ---------------------------------------------------------------


async def w_write(a: argparse.Namespace) -> dict[str, Any]:
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    sys_ = await open_system(a.system, work, a.sync)
    clock = _Clock()
    if a.instrument:
        instrument(sys_.store, clock)
    seq = workload(a.workload, a.turns, a.threads, a.threads_turns)
    msgs = [turn_messages(t, k) for t, k in seq]
    lat: list[float] = []
    parts: list[tuple[float, ...]] = []
    spent = clock.spent
    gc.collect()
    c_all, t_all = time.process_time(), time.perf_counter()
    for (thread, k), (u, m) in zip(seq, msgs, strict=True):
        before = tuple(spent.values())
        t0 = time.perf_counter()
        await sys_.write_turn(thread, k, u, m)
        lat.append(time.perf_counter() - t0)
        parts.append(tuple(b - a for a, b in zip(before, spent.values(), strict=True)))
    wall, cpu = time.perf_counter() - t_all, time.process_time() - c_all
    await sys_.close()
    # The split over the turns no other process held up: the half of the turns at or
    # under the median (on a shared machine a turn descheduled in the middle would
    # put its wait in whichever part it was in).
    cut = statistics.median(lat)
    calm = [i for i, x in enumerate(lat) if x <= cut]
    return {
        "turns": len(seq),
        "latency_ms": [x * 1e3 for x in lat],
        "wall_s": wall,
        "cpu_s": cpu,
        "us_per_turn": sum(lat[i] for i in calm) / len(calm) * 1e6,
        "split_us": {
            k: sum(parts[i][j] for i in calm) / len(calm) * 1e6 for j, k in enumerate(SPLIT)
        },
    }


async def w_load(a: argparse.Namespace) -> dict[str, Any]:
    """A cold open and read of the single thread, in this fresh process."""
    work = Path(a.workdir)
    path = work / f"{a.system}.db"
    if a.variant == "sql":
        return _load_sql(path)
    if a.system == "tether":  # imports before the clock, as the bench's (C)
        import tether
        import tether.crypto._store
        import tether.projections.conversation
        import tether.store._sqlite_keys
        import tether.store.sqlite
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    if a.system == "tether":
        sys_: Any = Tether(await tether.open_store(f"sqlite:///{path}"))
    else:
        sys_ = await open_system(a.system, work, "FULL")
    t1 = time.perf_counter()
    rows = await (sys_.load(THREAD_A, a.variant) if a.system == "tether" else sys_.load(THREAD_A))
    c2, t2 = time.process_time(), time.perf_counter()
    await sys_.close()
    return {
        "rows": len(rows),
        "open_ms": (t1 - t0) * 1e3,
        "read_ms": (t2 - t1) * 1e3,
        # CPU time of open + read: a process descheduled on a busy machine waits in
        # wall time only
        "cpu_ms": (c2 - c0) * 1e3,
    }


def _load_sql(path: Path) -> dict[str, Any]:
    """tether's cold read without tether: its SELECT of ``store.nodes`` stepped by bare
    sqlite3 (SQL), then ``orjson.loads`` of the payloads (codec)."""
    import tether.store.sqlite as tss

    scope = f"thread:{THREAD_A}"
    gc.collect()
    conn = sqlite3.connect(path, isolation_level=None)
    c0 = time.process_time()
    t0 = time.perf_counter()
    (sid,) = conn.execute(
        "SELECT sid FROM tether_scopes WHERE ns = ? AND scope = ?", (NAMESPACE, scope)
    ).fetchone()
    payloads = [
        r[-1]
        for r in conn.execute(
            f"SELECT {tss._NODE_COLS} FROM tether_nodes WHERE k > ? AND k <= ? ORDER BY k",
            (sid << 32, (sid << 32) | 0xFFFFFFFF),
        )
    ]
    t1 = time.perf_counter()
    for p in payloads:
        orjson.loads(p)
    t2 = time.perf_counter()
    cpu = time.process_time() - c0
    conn.close()
    return {
        "rows": len(payloads),
        "sql_ms": (t1 - t0) * 1e3,
        "codec_ms": (t2 - t1) * 1e3,
        "cpu_ms": cpu * 1e3,
    }


WORKERS = {"write": w_write, "load": w_load}


# --- the driver ------------------------------------------------------------------------------


def _worker(kind: str, out: Path, **opts: Any) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--out", str(out)]
    for k, v in opts.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])
        ),
    }
    out.unlink(missing_ok=True)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if p.returncode != 0 or not out.exists():
        raise RuntimeError(f"floor worker {kind} {opts} failed: {(p.stderr or p.stdout)[-1500:]}")
    res: dict[str, Any] = json.loads(out.read_text())
    return res


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def run_all(
    *,
    turns: int,
    threads: int,
    threads_turns: int,
    repeats: int,
    load_runs: int,
    syncs: tuple[str, ...] = SYNCS,
    log: Any = lambda m: print(m, file=sys.stderr, flush=True),
) -> dict[str, Any]:
    started = time.perf_counter()
    load0 = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="tether-floor-"))
    wl = {"turns": turns, "threads": threads, "threads_turns": threads_turns}
    segs = [(lo, hi) for lo, hi in SEGMENTS if hi <= turns]
    res: dict[str, Any] = {"writes": {}, "threads": {}, "split": {}, "load": {}}
    try:
        for sync in syncs:
            single: dict[str, list[list[float]]] = {s: [] for s in SYSTEMS}
            many: dict[str, list[float]] = {s: [] for s in SYSTEMS}
            many_cpu: dict[str, list[float]] = {s: [] for s in SYSTEMS}
            for r in range(repeats):
                order = SYSTEMS if r % 2 == 0 else SYSTEMS[::-1]
                for s in order:
                    log(f"  floor: {s}, synchronous={sync} ({r + 1}/{repeats}) ...")
                    work = tmp / f"w.{s}.{sync}.{r}"
                    d = _worker(
                        "write",
                        tmp / "o.json",
                        system=s,
                        sync=sync,
                        workload="single",
                        workdir=work,
                        instrument=0,
                        **wl,
                    )
                    single[s].append(d["latency_ms"])
                    # the first run's files stay for the cold loads
                    if sync == syncs[0] and r == 0:
                        shutil.copytree(work, tmp / "load", dirs_exist_ok=True)
                    shutil.rmtree(work, ignore_errors=True)
                    d = _worker(
                        "write",
                        tmp / "o.json",
                        system=s,
                        sync=sync,
                        workload="many",
                        workdir=work,
                        instrument=0,
                        **wl,
                    )
                    many[s].append(d["turns"] / d["wall_s"])
                    many_cpu[s].append(d["turns"] / d["cpu_s"])
                    shutil.rmtree(work, ignore_errors=True)
            res["writes"][sync] = {
                s: {
                    f"{lo}-{hi}": _med([_med(run[lo - 1 : hi]) for run in single[s]])
                    for lo, hi in segs
                }
                | {"all": _med([_med(run) for run in single[s]])}
                for s in SYSTEMS
            }
            # the best of the processes: load on a shared machine only slows a run
            res["threads"][sync] = {s: max(many[s]) for s in SYSTEMS}
            # turns per second of the process's CPU time: what the machine's load does
            # not change (at FULL it leaves out the time waiting for each fsync)
            res.setdefault("threads_cpu", {})[sync] = {s: max(many_cpu[s]) for s in SYSTEMS}
            # the split of tether's time: instrumented processes beside one plain run each
            split: dict[str, Any] = {}
            for w in ("single", "many"):
                runs = []
                for r in range(repeats):
                    work = tmp / f"i.{sync}.{w}.{r}"
                    log(f"  floor: tether's split, {w}, synchronous={sync} ({r + 1}/{repeats}) ...")
                    runs.append(
                        _worker(
                            "write",
                            tmp / "o.json",
                            system="tether",
                            sync=sync,
                            workload=w,
                            workdir=work,
                            instrument=1,
                            **wl,
                        )
                    )
                    shutil.rmtree(work, ignore_errors=True)
                # each part from the same processes as the whole (their mean per turn):
                # the medians of the timed runs above would not add up with them
                parts = {k: _med([x["split_us"][k] for x in runs]) for k in SPLIT}
                parts["whole"] = _med([x["us_per_turn"] for x in runs])
                parts["own"] = parts["whole"] - sum(parts[k] for k in SPLIT)
                split[w] = parts
            res["split"][sync] = split
        log("  floor: cold loads ...")
        loads: dict[str, list[dict[str, Any]]] = {}
        variants = [
            ("plain", "nodes"),
            ("identity", "nodes"),
            ("tether", "nodes"),
            ("tether", "payloads"),
            ("tether", "view"),
            ("tether", "sql"),
        ]
        for r in range(load_runs):
            for s, v in variants if r % 2 == 0 else variants[::-1]:
                loads.setdefault(f"{s}.{v}", []).append(
                    _worker("load", tmp / "o.json", system=s, variant=v, workdir=tmp / "load", **wl)
                )
        ld: dict[str, Any] = {}
        for k, runs in loads.items():
            # the least of the processes: load on a shared machine only slows a run
            ld[k] = {f: min(x[f] for x in runs) for f in runs[0] if f != "rows"}
            ld[k]["rows"] = sorted({x["rows"] for x in runs})
            if "open_ms" in ld[k]:
                ld[k]["total_ms"] = min(x["open_ms"] + x["read_ms"] for x in runs)
        res["load"] = ld
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["meta"] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "sqlite": sqlite3.sqlite_version,
        "python": sys.version.split()[0],
        "message_bytes": MESSAGE_BYTES,
        **wl,
        "repeats": repeats,
        "load_runs": load_runs,
        "nproc": os.cpu_count(),
        "loadavg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    return res


# --- output ----------------------------------------------------------------------------------


def table(res: dict[str, Any]) -> list[str]:
    """Markdown: each figure for the three systems, tether's ratio to each floor."""
    m = res["meta"]
    lines = [
        f"| figure ({m['turns']:,} turns on 1 thread; {m['threads']} threads x "
        f"{m['threads_turns']} turns) | plain floor | identity floor | tether | "
        "tether / plain | tether / identity |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for sync, by in res["writes"].items():
        for seg in by["tether"]:
            if seg == "all":
                continue
            p, i, t = by["plain"][seg], by["identity"][seg], by["tether"][seg]
            lines.append(
                f"| write ms/turn @{seg}, {sync} | {p:.3f} | {i:.3f} | {t:.3f} | "
                f"{t / p:.2f}x | {t / i:.2f}x |"
            )
        th = res["threads"][sync]
        p, i, t = th["plain"], th["identity"], th["tether"]
        lines.append(
            f"| {m['threads']} threads, turns/s, {sync} | {p:,.0f} | {i:,.0f} | {t:,.0f} | "
            f"{p / t:.2f}x | {i / t:.2f}x |"
        )
        tc = res.get("threads_cpu", {}).get(sync)
        if tc:
            p, i, t = tc["plain"], tc["identity"], tc["tether"]
            lines.append(
                f"| {m['threads']} threads, turns per CPU second, {sync} | {p:,.0f} | {i:,.0f} | "
                f"{t:,.0f} | {p / t:.2f}x | {i / t:.2f}x |"
            )
    ld = res["load"]
    p, i, t = ld["plain.nodes"], ld["identity.nodes"], ld["tether.nodes"]
    q = ld["tether.payloads"]

    def cells(x: dict[str, Any]) -> str:
        return f"{x['total_ms']:.2f} ({x['cpu_ms']:.2f})"

    def ratios(x: dict[str, Any]) -> str:
        return " | ".join(
            f"{x['total_ms'] / f['total_ms']:.2f}x ({x['cpu_ms'] / f['cpu_ms']:.2f}x)"
            for f in (p, i)
        )

    lines.append(
        f"| cold load of {2 * m['turns']:,} messages, ms (open + read; CPU) | {cells(p)} | "
        f"{cells(i)} | {cells(t)} | {ratios(t)} |"
    )
    lines.append(
        f"| cold load, `store.payloads` instead of `store.nodes`, ms (CPU) | | | {cells(q)} | "
        f"{ratios(q)} |"
    )
    v = ld.get("tether.view")
    if v:  # (runs before issue 43's cold view have none)
        lines.append(
            "| cold load of the thread's conversation (`conversation_view`, whole buffer: "
            f"the messages built), ms (CPU) | | | {cells(v)} | {ratios(v)} |"
        )
    return lines


def split_lines(res: dict[str, Any]) -> list[str]:
    """Markdown: where tether's time goes."""
    m = res["meta"]
    lines = [
        "| tether's time | whole | SQL | codec | identity | own Python |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    names = {"single": "1 thread", "many": f"{m['threads']} threads"}
    for sync, by in res["split"].items():
        for w, d in by.items():
            lines.append(
                f"| write, us/turn, {names[w]}, {sync} | {d['whole']:.0f} | {d['sql']:.0f} | "
                f"{d['codec']:.0f} | {d['identity']:.0f} | {d['own']:.0f} |"
            )
    ld = res["load"]
    t, q = ld["tether.nodes"], ld["tether.sql"]
    own = t["cpu_ms"] - q["sql_ms"] - q["codec_ms"]
    lines.append(
        f"| cold load, ms of CPU (open + read) | {t['cpu_ms']:.2f} | {q['sql_ms']:.2f} | "
        f"{q['codec_ms']:.2f} | 0 | {own:.2f} |"
    )
    return lines


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="100 turns, 20 x 5 threads, one run")
    p.add_argument("--turns", type=int, default=None, help="turns on one thread [1000]")
    p.add_argument("--threads", type=int, default=None, help="threads [200]")
    p.add_argument("--threads-turns", type=int, default=None, help="turns per thread [20]")
    p.add_argument("--repeats", type=int, default=None, help="processes per figure [3]")
    p.add_argument("--load-runs", type=int, default=None, help="cold loads per system [5]")
    p.add_argument("--sync", default="FULL,NORMAL", help="synchronous levels [FULL,NORMAL]")
    p.add_argument(
        "--json", default=None, help="write the results here [benchmarks/out/floor.json]"
    )
    p.add_argument("--render", metavar="JSON", help="only re-print a saved run's tables")
    p.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--system", help=argparse.SUPPRESS)
    p.add_argument("--workload", help=argparse.SUPPRESS)
    p.add_argument("--variant", help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    p.add_argument("--instrument", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    q = a.quick
    a.turns = a.turns or (100 if q else 1000)
    a.threads = a.threads or (20 if q else 200)
    a.threads_turns = a.threads_turns or (5 if q else 20)
    a.repeats = max(1, a.repeats or (1 if q else 3))
    a.load_runs = max(1, a.load_runs or (1 if q else 5))
    a.sync = tuple(s.strip().upper() for s in a.sync.split(",") if s.strip())
    if a.worker and len(a.sync) == 1:
        a.sync = a.sync[0]
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(sys.argv[1:] if argv is None else argv)
    if a.worker:
        res = asyncio.run(WORKERS[a.worker](a))
        Path(a.out).write_text(json.dumps(res))
        return 0
    if a.render:
        res = json.loads(Path(a.render).read_text())
    else:
        res = run_all(
            turns=a.turns,
            threads=a.threads,
            threads_turns=a.threads_turns,
            repeats=a.repeats,
            load_runs=a.load_runs,
            syncs=a.sync,
        )
        res["meta"]["command"] = " ".join(
            ["python benchmarks/floor.py", *(argv if argv is not None else sys.argv[1:])]
        )
        out = Path(a.json) if a.json else BENCH / "out" / "floor.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1))
        print(f"results: {out}", file=sys.stderr)
    m = res["meta"]
    print(
        f"{m['date']}, SQLite {m['sqlite']}, Python {m['python']}, {m['nproc']} cores, "
        f"load average {m['loadavg_1m'][0]} -> {m['loadavg_1m'][1]}; `{m.get('command', '')}`\n"
    )
    print("\n".join(table(res)))
    print()
    print("\n".join(split_lines(res)))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
