"""Where tether (SQLite) spends what the sqlite3 floor does not: a measured breakdown.

    python benchmarks/floor_gap.py              # full run, a minute or two
    python benchmarks/floor_gap.py --quick      # smoke run, a few seconds
    python benchmarks/floor_gap.py --json out.json

The bench's own workload and adapters (``systems/tether_sqlite.py``: one
``tether.Transaction`` per turn, a goal node and an answer node, one commit;
``systems/sqlite_floor.py``: two INSERTs and a COMMIT), 200-byte messages, one thread x
N turns and T threads x K turns round-robin. Every measurement runs in its own process
on this interpreter, on a temporary directory outside the source tree:

* **frames**: WAL frames (pages) written per commit, by table and index. Half way
  through the workload a TRUNCATE checkpoint empties the WAL and
  ``wal_autocheckpoint=0`` keeps it growing; before the store closes, its ``-wal`` file
  is copied and its frame headers parsed (32-byte WAL header with the page size,
  24-byte frame headers, commit frames carry the database size). Page numbers are
  mapped to tables and indexes (leaf, internal, overflow) with ``dbstat`` on a copy of
  the database and its WAL. In the same second half, SQLite's statement trace on the
  system's connection counts the **SQL statements per turn** (counts: exact).
* **cpu**: ``time.process_time`` (and wall time) over all the turns of the workload, at
  synchronous=NORMAL (no fsync: each system's own cost) and FULL (the bench's
  setting); the least CPU time of ``--repeats`` processes (load only adds to it), the
  median wall time. tether's CPU is split into *SQLite* and *Python* by replaying the exact
  calls tether made (recorded, with their pre-encoded parameters, in the frames run)
  through the raw sqlite3 module on an identical fresh file (**replay**): SQLite's part
  is the replay's CPU time (sqlite3's call overhead included), Python's the rest. The
  floor's calls are replayed the same way, a check of the method: its turn is nothing
  but those calls.
* **load**: a fresh process (imports done before the clock starts) opens the store and
  reads the thread: tether's ``open_store``; then one of: the SQL of
  ``store.nodes`` alone (its seven columns, stepped by sqlite3, nothing decoded),
  ``store.nodes`` (the rows decoded into ``CausalNode``s, as the bench's (C) reads) or
  ``store.payloads`` (three columns, what TetherSession and load_conversation read);
  the floor's connect + SELECT. Runs alternate tether and floor so that machine load
  hits both alike; the median of ``--load-runs`` processes each.

CPU times and wall times on a shared machine are noisy (medians and minima are both
kept in the JSON); frame and statement counts are not.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import gc
import json
import os
import pickle
import re
import shutil
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from sqltrace import untriggered  # noqa: E402
from workload import MESSAGE_BYTES, THREAD_A, thread_name, turn_messages  # noqa: E402

SYSTEMS = ("tether", "floor")
LABELS = {"tether": "tether (SQLite)", "floor": "sqlite3 loop (floor)"}
WORKLOADS = ("single", "many")
SYNCS = ("NORMAL", "FULL")
LOADS = ("tether_sql", "tether_nodes", "tether_payloads", "floor")
NAMESPACE = "bench"  # systems/_tether.py's
# The seven columns store.nodes reads (tether.store.sqlite._NODE_COLS), if it moves.
NODE_COLS = "k & 4294967295, id, kind, parents, created_at, rkey, payload"
# The WAL pages between checkpoints that tether's store sets at each synchronous level
# (tether.store.sqlite._WAL_AUTOCHECKPOINT, one for both); the floor and the replays set
# the same.
WAL_PAGES = {"FULL": 1000, "NORMAL": 1000}


# --- the systems, driven through the bench's own adapters ----------------------------------


def make(system: str, sync: str = "FULL") -> Any:
    """The bench adapter for ``system`` ("tether" or "floor") at ``sync``."""
    if system == "tether":
        from systems.tether_sqlite import TetherSqlite

        t = TetherSqlite()
        t.store_options = {"durability": sync.lower()}
        return t
    from systems.sqlite_floor import SqliteFloor

    return SqliteFloor()


async def setup(sys_: Any, system: str, workdir: Path, sync: str, *, fresh: bool) -> Any:
    """Open the system; return its sqlite3 connection (tether's one store connection)."""
    await sys_.setup(workdir, fresh=fresh)
    if system == "tether":
        return sys_.store._conn
    sys_.conn.execute(f"PRAGMA synchronous={sync}")
    sys_.conn.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES[sync]}")  # as tether's store
    return sys_.conn


def turns(workload: str, n: int, threads: int, per_thread: int) -> list[tuple[str, int]]:
    """The (thread, turn) sequence of a workload: one thread, or round-robin."""
    if workload == "single":
        return [(THREAD_A, i) for i in range(n)]
    return [(thread_name(k), i) for i in range(per_thread) for k in range(threads)]


def synchronous(conn: sqlite3.Connection) -> str:
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return names.get(conn.execute("PRAGMA synchronous").fetchone()[0], "?")


class Recorder:
    """Stands in for tether's connection (``store._conn``) or its own cursor
    (``store._cur``, where the store has one): records every execute/executemany (which
    object, the SQL, the parameters as tether bound them) in ``log``, then forwards it."""

    def __init__(self, target: Any, name: str, log: list[tuple[str, str, str, Any]]) -> None:
        self._target, self._name, self._log = target, name, log

    def execute(self, sql: str, params: Any = ()) -> Any:
        self._log.append((self._name, "execute", sql, tuple(params)))
        return self._target.execute(sql, params)

    def executemany(self, sql: str, seq: Any) -> Any:
        rows = [tuple(r) for r in seq]
        self._log.append((self._name, "executemany", sql, rows))
        return self._target.executemany(sql, rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


def record(store: Any, log: list[tuple[str, str, str, Any]]) -> Callable[[], None]:
    """Put recorders in place of the store's connection and cursor (tether's ``_conn``
    and ``_cur``, the floor adapter's ``conn``); returns the undo."""
    saved = {k: getattr(store, k) for k in ("_conn", "_cur", "conn") if hasattr(store, k)}
    for k, v in saved.items():
        setattr(store, k, Recorder(v, k, log))

    def undo() -> None:
        for k, v in saved.items():
            setattr(store, k, v)

    return undo


# --- the WAL and dbstat ----------------------------------------------------------------------


def wal_frames(path: Path) -> tuple[int, list[tuple[int, bool]]]:
    """(page size, [(page number, is commit frame)]) of the valid frames of a WAL file."""
    data = path.read_bytes()
    if len(data) < 32:
        return 0, []
    _magic, _version, page_size, _ckpt, salt1, salt2 = struct.unpack(">6I", data[:24])
    frames: list[tuple[int, bool]] = []
    off = 32
    while off + 24 + page_size <= len(data):
        pgno, dbsize, s1, s2 = struct.unpack(">4I", data[off : off + 16])
        if (s1, s2) != (salt1, salt2):
            break  # a frame left from before the WAL was last reset
        frames.append((pgno, dbsize != 0))
        off += 24 + page_size
    last = max((i for i, (_, c) in enumerate(frames) if c), default=-1)
    return page_size, frames[: last + 1]  # frames after the last commit are not valid


def page_objects(db: Path) -> dict[int, tuple[str, str]]:
    """page number -> (table or index, leaf/internal/overflow), from dbstat."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT pageno, name, pagetype FROM dbstat").fetchall()
    finally:
        conn.close()
    return {int(p): (str(n), str(t)) for p, n, t in rows}


_LITERAL = re.compile(r"[xX]'[0-9a-fA-F]*'|'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b|\bNULL\b")


def statement_shape(sql: str) -> str:
    """A traced (expanded) statement with its literals replaced by ``?``."""
    return " ".join(_LITERAL.sub("?", sql).split())


def _gc_count() -> int:
    """Garbage collections run so far in this process, every generation."""
    return sum(int(g["collections"]) for g in gc.get_stats())


# --- workers (one per process) ---------------------------------------------------------------


async def w_frames(a: argparse.Namespace) -> dict[str, Any]:
    """Frames per commit by object and statements per turn over the second half of the
    workload; tether's calls of the whole workload are recorded for the replay."""
    work = Path(a.workdir)
    sys_ = make(a.system)
    conn = await setup(sys_, a.system, work, "FULL", fresh=True)
    log: list[tuple[str, str, str, Any]] = []
    # tether's calls go through its store's connection and cursor, the floor's through
    # its adapter's connection.
    undo = record(sys_.store if a.system == "tether" else sys_, log)
    seq = turns(a.workload, a.turns, a.threads, a.threads_turns)
    half = len(seq) // 2 if a.workload == "single" else a.threads * (a.threads_turns // 2)
    recorded: list[list[tuple[str, str, str, Any]]] = []
    stmts: list[str] = []
    for i, (thread, k) in enumerate(seq):
        if i == half:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA wal_autocheckpoint=0")
            conn.set_trace_callback(stmts.append)
        u, m = turn_messages(thread, k)
        await sys_.write_turn(thread, k, u, m)
        recorded.append(log[:])
        log.clear()
    conn.set_trace_callback(None)
    db = work / ("tether.db" if a.system == "tether" else "floor.db")
    snap = work / "snapshot"
    snap.mkdir()
    shutil.copyfile(f"{db}-wal", snap / f"{db.name}-wal")
    shutil.copyfile(db, snap / db.name)
    sync = synchronous(conn)
    undo()
    await sys_.close()
    page_size, frames = wal_frames(snap / f"{db.name}-wal")
    objects = page_objects(snap / db.name)
    shutil.rmtree(snap)
    commits = sum(1 for _, c in frames if c)
    by: Counter[tuple[str, str]] = Counter(
        objects.get(p, ("(free or unmapped)", "")) for p, _ in frames
    )
    n = len(seq) - half
    stmts = untriggered(stmts)
    shapes = Counter(statement_shape(s) for s in stmts)
    kinds = Counter(s.split(None, 1)[0].upper() for s in stmts if s.strip())
    if a.record:
        Path(a.record).write_bytes(pickle.dumps(recorded))
    return {
        "synchronous": sync,
        "turns": n,
        "commits": commits,
        "page_size": page_size,
        "frames": len(frames),
        "frames_per_commit": len(frames) / commits if commits else None,
        "wal_bytes_per_commit": len(frames) * (page_size + 24) / commits if commits else None,
        "by_object": {
            f"{name} {kind}".strip(): v / commits
            for (name, kind), v in sorted(by.items(), key=lambda kv: -kv[1])
        }
        if commits
        else {},
        "statements_per_turn": len(stmts) / n,
        # What the replay will run, counted as the trace counts (each row of an
        # executemany is a statement): short of the trace, the recorder missed a call.
        "recorded_statements_per_turn": sum(
            len(params) if method == "executemany" else 1
            for turn in recorded[half:]
            for _target, method, _sql, params in turn
        )
        / n,
        "statements_by_keyword": {k: v / n for k, v in kinds.most_common()},
        "statements": {k: v / n for k, v in shapes.most_common()},
    }


async def w_cpu(a: argparse.Namespace) -> dict[str, Any]:
    """CPU and wall time over every turn of the workload, at ``--sync``."""
    sys_ = make(a.system, a.sync)
    conn = await setup(sys_, a.system, Path(a.workdir), a.sync, fresh=True)
    seq = turns(a.workload, a.turns, a.threads, a.threads_turns)
    msgs = [turn_messages(t, k) for t, k in seq]
    gc.collect()
    g0 = _gc_count()
    c0, t0 = time.process_time(), time.perf_counter()
    for (thread, k), (u, m) in zip(seq, msgs, strict=True):
        await sys_.write_turn(thread, k, u, m)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    collections = _gc_count() - g0
    sync = synchronous(conn)
    await sys_.close()
    return {
        "synchronous": sync,
        "turns": len(seq),
        "cpu_us": cpu / len(seq) * 1e6,
        "wall_us": wall / len(seq) * 1e6,
        "gc_collections": collections,
    }


async def w_replay(a: argparse.Namespace) -> dict[str, Any]:
    """A system's recorded calls, replayed by the bare sqlite3 module on a fresh file with
    the system's schema and pragmas. For tether: what SQLite (and sqlite3's calls) cost
    of its turn. For the floor, whose turn is nothing but those calls: a check of the
    method (the replay should cost what the floor's own run did)."""
    calls: list[list[tuple[str, str, str, Any]]] = pickle.loads(Path(a.record).read_bytes())
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    sys_ = make(a.system, a.sync)
    await setup(sys_, a.system, work, a.sync, fresh=True)
    await sys_.close()  # the schema, as the system creates it
    path = work / ("tether.db" if a.system == "tether" else "floor.db")
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=0.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={a.sync}")
    conn.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES[a.sync]}")  # as both set it
    if a.sync == "FULL" and a.system == "tether":
        conn.execute("PRAGMA fullfsync=ON")  # as tether sets it (a no-op off macOS)
    # Each call on the object it was made on: a connection (a cursor per call) or
    # tether's store's one cursor.
    on = {"_conn": conn, "conn": conn, "_cur": conn.cursor()}
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    for turn in calls:
        for target, method, sql, params in turn:
            if method == "executemany":
                on[target].executemany(sql, params)
            else:
                cur = on[target].execute(sql, params)
                if sql.lstrip()[:6].upper() == "SELECT":
                    cur.fetchone()
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    sync = synchronous(conn)
    conn.close()
    return {
        "synchronous": sync,
        "turns": len(calls),
        "cpu_us": cpu / len(calls) * 1e6,
        "wall_us": wall / len(calls) * 1e6,
    }


async def w_load(a: argparse.Namespace) -> dict[str, Any]:
    """A cold open and read of the single thread in this fresh process."""
    system = "floor" if a.variant == "floor" else "tether"
    sys_ = make(system)
    work = Path(a.workdir)
    read: Callable[[], Any]
    if system == "tether":
        import tether
        import tether.store.sqlite as tss

        cols = getattr(tss, "_NODE_COLS", NODE_COLS)

        scope = tether.core.scopes.thread(THREAD_A)

        async def read_sql() -> int:
            c = sys_.store._conn
            (sid,) = c.execute(
                "SELECT sid FROM tether_scopes WHERE ns = ? AND scope = ?", (NAMESPACE, scope)
            ).fetchone()
            lo, hi, n = sid << 32, (sid << 32) | 0xFFFFFFFF, 0
            while True:
                got = 0
                cur = c.execute(
                    f"SELECT {cols} FROM tether_nodes WHERE k > ? AND k <= ? ORDER BY k LIMIT ?",
                    (lo, hi, 1000),
                )
                for row in cur:
                    got += 1
                    last = row[0]
                n += got
                if got < 1000:
                    return n
                lo = (sid << 32) | last

        async def read_pages(read_page: Any, sequence: Any) -> int:
            # The public paging of a scope: pages of 1,000 after the last one's sequence.
            n, after = 0, 0
            while True:
                page = await read_page(NAMESPACE, scope, after=after, limit=1000)
                n += len(page)
                if len(page) < 1000:
                    return n
                after = sequence(page[-1])

        async def read_nodes() -> int:
            return await read_pages(sys_.store.nodes, lambda node: node.sequence)

        async def read_payloads() -> int:
            return await read_pages(sys_.store.payloads, lambda row: row[0])

        read = {
            "tether_sql": read_sql,
            "tether_nodes": read_nodes,
            "tether_payloads": read_payloads,
        }[a.variant]
    else:

        async def read_floor() -> int:
            return len(await sys_.load(THREAD_A))

        read = read_floor
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    await sys_.setup(work, fresh=False)
    c1, t1 = time.process_time(), time.perf_counter()
    g1 = _gc_count()
    rows = await read()
    c2, t2 = time.process_time(), time.perf_counter()
    collections = _gc_count() - g1
    await sys_.close()
    return {
        "variant": a.variant,
        "rows": rows,
        "open_ms": (t1 - t0) * 1e3,
        "read_ms": (t2 - t1) * 1e3,
        "total_ms": (t2 - t0) * 1e3,
        "open_cpu_ms": (c1 - c0) * 1e3,
        "read_cpu_ms": (c2 - c1) * 1e3,
        "read_gc_collections": collections,
    }


WORKERS = {"frames": w_frames, "cpu": w_cpu, "replay": w_replay, "load": w_load}


# --- the driver ------------------------------------------------------------------------------


def _worker(py: Path, kind: str, out: Path, **opts: Any) -> dict[str, Any]:
    cmd = [str(py), str(Path(__file__).resolve()), "--worker", kind, "--out", str(out)]
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
        raise RuntimeError(
            f"floor_gap worker {kind} {opts} failed: {(p.stderr or p.stdout)[-1500:]}"
        )
    res: dict[str, Any] = json.loads(out.read_text())
    return res


def _summary(runs: list[dict[str, Any]], *keys: str) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": len(runs)}
    for k in keys:
        xs = [float(r[k]) for r in runs]
        out[k] = statistics.median(xs)
        out[f"{k}_min"] = min(xs)
    return out


def run_all(
    *,
    turns: int = 1000,
    threads: int = 200,
    threads_turns: int = 20,
    repeats: int = 3,
    load_runs: int = 5,
    python: Path | None = None,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True),
) -> dict[str, Any]:
    """Every measurement, each in its own process on ``python`` (this interpreter)."""
    py = python or Path(sys.executable)
    started = time.perf_counter()
    load0 = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="tether-floor-gap-"))
    wl = {"turns": turns, "threads": threads, "threads_turns": threads_turns}
    try:
        # Frames and statements (counts); tether's calls recorded for the replay; the
        # single-thread stores stay for the cold loads.
        frames: dict[str, dict[str, Any]] = {w: {} for w in WORKLOADS}
        for w in WORKLOADS:
            for s in SYSTEMS:
                log(f"  floor gap: WAL frames and statements, {s}, {w} ...")
                rec = tmp / f"calls.{s}.{w}.pickle"
                frames[w][s] = _worker(
                    py,
                    "frames",
                    tmp / "out.json",
                    system=s,
                    workload=w,
                    workdir=tmp / f"frames.{s}.{w}",
                    record=rec,
                    **wl,
                )
                if w == "many":
                    shutil.rmtree(tmp / f"frames.{s}.{w}", ignore_errors=True)

        # CPU per turn: rounds alternate the systems; each run's replay follows it.
        cpu_runs: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for r in range(repeats):
            for sync in SYNCS:
                for w in WORKLOADS:
                    order = SYSTEMS if r % 2 == 0 else SYSTEMS[::-1]
                    for s in order:
                        log(
                            f"  floor gap: CPU, {s}, {w}, synchronous={sync} ({r + 1}/{repeats}) ..."
                        )
                        work = tmp / f"cpu.{s}"
                        cpu_runs.setdefault((sync, w, s), []).append(
                            _worker(
                                py,
                                "cpu",
                                tmp / "out.json",
                                system=s,
                                workload=w,
                                sync=sync,
                                workdir=work,
                                **wl,
                            )
                        )
                        shutil.rmtree(work, ignore_errors=True)
                        work = tmp / "replay"
                        cpu_runs.setdefault((sync, w, f"{s}_replay"), []).append(
                            _worker(
                                py,
                                "replay",
                                tmp / "out.json",
                                system=s,
                                sync=sync,
                                workload=w,
                                workdir=work,
                                record=tmp / f"calls.{s}.{w}.pickle",
                                **wl,
                            )
                        )
                        shutil.rmtree(work, ignore_errors=True)
        cpu: dict[str, dict[str, Any]] = {sync: {} for sync in SYNCS}
        for (sync, w, s), runs in cpu_runs.items():
            # CPU time: the least disturbed process (machine load only ever adds to it);
            # wall time: the median.
            xs, ws = [float(r["cpu_us"]) for r in runs], [float(r["wall_us"]) for r in runs]
            cpu[sync].setdefault(w, {})[s] = {
                "runs": len(runs),
                "cpu_us": min(xs),
                "cpu_us_median": statistics.median(xs),
                "cpu_us_all": xs,
                "wall_us": statistics.median(ws),
                "wall_us_min": min(ws),
                "gc_collections": max(int(r.get("gc_collections", 0)) for r in runs),
                "synchronous": sorted({r["synchronous"] for r in runs}),
            }
        for sync in SYNCS:
            for w in WORKLOADS:
                d = cpu[sync][w]
                # tether's SQLite part is its replay; Python's the rest, provided the
                # replay ran every statement tether did
                ft = frames[w]["tether"]
                whole = ft["recorded_statements_per_turn"] == ft["statements_per_turn"]
                d["replay_complete"] = whole
                d["tether_python_us"] = (
                    d["tether"]["cpu_us"] - d["tether_replay"]["cpu_us"] if whole else None
                )

        # Cold loads: each tether variant between two floor runs.
        load_runs_: dict[str, list[dict[str, Any]]] = {v: [] for v in LOADS}
        for r in range(load_runs):
            for v in LOADS[:3]:
                for variant in (v, "floor") if r % 2 == 0 else ("floor", v):
                    s = "floor" if variant == "floor" else "tether"
                    load_runs_[variant].append(
                        _worker(
                            py,
                            "load",
                            tmp / "out.json",
                            variant=variant,
                            workdir=tmp / f"frames.{s}.single",
                            **wl,
                        )
                    )
            log(f"  floor gap: cold loads, round {r + 1}/{load_runs}")
        load: dict[str, Any] = {"messages": 2 * turns}
        for v, runs in load_runs_.items():
            load[v] = {
                **_summary(runs, "open_ms", "read_ms", "total_ms", "open_cpu_ms", "read_cpu_ms"),
                "read_gc_collections": max(int(r["read_gc_collections"]) for r in runs),
                "rows": sorted({r["rows"] for r in runs}),
            }
        # tether's open is the same in its three variants: pooled, three times the samples.
        opens = [r for v in LOADS[:3] for r in load_runs_[v]]
        load["tether_open"] = _summary(opens, "open_ms", "open_cpu_ms")
        load["floor_open"] = _summary(load_runs_["floor"], "open_ms", "open_cpu_ms")
        load["decode_ms"] = load["tether_nodes"]["read_ms"] - load["tether_sql"]["read_ms"]
        load["decode_cpu_ms"] = (
            load["tether_nodes"]["read_cpu_ms"] - load["tether_sql"]["read_cpu_ms"]
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "meta": {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "sqlite": sqlite3.sqlite_version,
            "message_bytes": MESSAGE_BYTES,
            **wl,
            "repeats": repeats,
            "load_runs": load_runs,
            "nproc": os.cpu_count(),
            "loadavg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
            "elapsed_s": round(time.perf_counter() - started, 1),
        },
        "frames": frames,
        "cpu": cpu,
        "load": load,
    }


# --- output ----------------------------------------------------------------------------------


def _objects(f: dict[str, Any], top: int = 3) -> str:
    items = [(k, v) for k, v in (f.get("by_object") or {}).items() if v >= 0.05][:top]
    return ", ".join(f"{k} {v:.2f}" for k, v in items)


def table(res: dict[str, Any]) -> list[str]:
    """Markdown: each figure, tether beside the floor."""
    m = res["meta"]
    names = {"single": "1 thread", "many": f"{m['threads']} threads"}
    lines = [
        f"| ({m['turns']:,} turns on 1 thread; {m['threads']} threads x {m['threads_turns']} "
        "turns) | tether (SQLite) | sqlite3 loop (floor) |",
        "|---|---|---|",
    ]
    for w in WORKLOADS:
        fr = res["frames"][w]
        t, f = fr["tether"], fr["floor"]
        lines.append(
            f"| WAL frames per commit, {names[w]} (count) | {t['frames_per_commit']:.2f} "
            f"({_objects(t)}) | {f['frames_per_commit']:.2f} ({_objects(f)}) |"
        )
    t, f = res["frames"]["single"]["tether"], res["frames"]["single"]["floor"]
    lines.append(
        f"| SQL statements per turn (count) | {t['statements_per_turn']:g} "
        f"({_keywords(t)}) | {f['statements_per_turn']:g} ({_keywords(f)}) |"
    )
    least = "one process" if m["repeats"] == 1 else f"least of {m['repeats']}"
    for sync in SYNCS:
        for w in WORKLOADS:
            d = res["cpu"][sync][w]
            lines.append(
                f"| CPU us per turn, synchronous={sync}, {names[w]} ({least}; "
                "wall: median) | "
                f"{d['tether']['cpu_us']:.0f} ({_split(d)}wall {d['tether']['wall_us']:.0f}) | "
                f"{d['floor']['cpu_us']:.0f} (replayed: {d['floor_replay']['cpu_us']:.0f}; wall "
                f"{d['floor']['wall_us']:.0f}) |"
            )
    ld = res["load"]
    to, fo = ld["tether_open"], ld["floor_open"]
    t, q, p, f = ld["tether_nodes"], ld["tether_sql"], ld["tether_payloads"], ld["floor"]
    lines.append(
        f"| cold load of {ld['messages']:,} messages: open, ms (CPU) | {to['open_ms']:.2f} "
        f"({to['open_cpu_ms']:.2f}) | {fo['open_ms']:.2f} ({fo['open_cpu_ms']:.2f}) |"
    )
    lines.append(
        f"| cold load: read, ms (CPU) | store.nodes {t['read_ms']:.2f} ({t['read_cpu_ms']:.2f}) ="
        f" SQL {q['read_ms']:.2f} ({q['read_cpu_ms']:.2f}) + decode {ld['decode_ms']:.2f} "
        f"({ld['decode_cpu_ms']:.2f}); store.payloads {p['read_ms']:.2f} "
        f"({p['read_cpu_ms']:.2f}) | SELECT {f['read_ms']:.2f} ({f['read_cpu_ms']:.2f}) |"
    )
    return lines


def _split(d: dict[str, Any]) -> str:
    if d.get("tether_python_us") is None:  # the replay missed statements: no split
        return ""
    return f"SQLite {d['tether_replay']['cpu_us']:.0f} + Python {d['tether_python_us']:.0f}; "


def _keywords(f: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in (f.get("statements_by_keyword") or {}).items())


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="100 turns, 20 x 5 threads, one run each")
    p.add_argument("--turns", type=int, default=None, help="turns on one thread [1000]")
    p.add_argument("--threads", type=int, default=None, help="threads [200]")
    p.add_argument("--threads-turns", type=int, default=None, help="turns per thread [20]")
    p.add_argument("--repeats", type=int, default=None, help="CPU runs per figure [3; quick: 1]")
    p.add_argument(
        "--load-runs", type=int, default=None, help="cold loads per variant [5; quick: 1]"
    )
    p.add_argument("--render", metavar="JSON", help="only re-print a saved run's table")
    p.add_argument(
        "--json", default=None, help="write the results here [benchmarks/out/floor_gap.json]"
    )
    # a worker's options
    p.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--system", help=argparse.SUPPRESS)
    p.add_argument("--workload", help=argparse.SUPPRESS)
    p.add_argument("--sync", default="FULL", help=argparse.SUPPRESS)
    p.add_argument("--variant", help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    p.add_argument("--record", default="", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    q = a.quick
    a.turns = a.turns or (100 if q else 1000)
    a.threads = a.threads or (20 if q else 200)
    a.threads_turns = a.threads_turns or (5 if q else 20)
    a.repeats = max(1, a.repeats or (1 if q else 3))
    a.load_runs = max(1, a.load_runs or (1 if q else 5))
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(sys.argv[1:] if argv is None else argv)
    if a.worker:
        res = asyncio.run(WORKERS[a.worker](a))
        Path(a.out).write_text(json.dumps(res))
        return 0
    if a.render:
        print("\n".join(table(json.loads(Path(a.render).read_text()))))
        return 0
    res = run_all(
        turns=a.turns,
        threads=a.threads,
        threads_turns=a.threads_turns,
        repeats=a.repeats,
        load_runs=a.load_runs,
    )
    res["meta"]["command"] = " ".join(
        ["python benchmarks/floor_gap.py", *(argv if argv is not None else sys.argv[1:])]
    )
    out = Path(a.json) if a.json else BENCH / "out" / "floor_gap.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print("\n".join(table(res)))
    print(f"results: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
