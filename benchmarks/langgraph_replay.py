"""Where a LangGraph turn's checkpointer time goes: TetherSaver beside SqliteSaver,
each saver's own work alone, without LangGraph's threads.

    .venv/bin/python benchmarks/langgraph_replay.py                # 10 and 100 turns
    .venv/bin/python benchmarks/langgraph_replay.py --turns 10 --repeats 3
    .venv/bin/python benchmarks/langgraph_replay.py --turns 20 --threads 200   # make bench's (B)

``graph.invoke`` calls the checkpointer from LangGraph's background threads while its
own loop goes on, so in ``make bench`` a saver's time per turn also holds waits for
the GIL and for the other saver call in flight. Here a run of the bench's graph
(``systems/_langgraph.py``: an ``add_messages`` channel, one node, ``durability=
"sync"``) records every ``get_tuple``, ``put`` and ``put_writes`` call with its
arguments; the calls are then replayed one after the other, on one thread, on a
fresh saver of each kind (SQLite, WAL, ``synchronous=NORMAL``, so the disk's fsync is
out of the figure), and timed per method: the best of ``--repeats`` replays. For
TetherSaver the time its store spent in SQLite (``execute`` on the store's cursor)
is split out, per statement.

``--threads T`` records T threads of ``--turns`` turns each, one turn of each thread in
turn (round-robin, as ``make bench``'s phase B drives them): every figure is then per
turn over all threads.

Each replay also splits every saver's time into what no TetherSaver could skip and
the rest (``verdict.langgraph_bound``, also under ``make bench``'s table): LangGraph's
serializer (``dumps_typed``/``loads_typed``, which both savers call on what LangGraph
hands them), SQLite (each statement's
``execute`` on the store's cursor; for SqliteSaver every call on its connection's
cursors: ``execute``, ``executemany``, the fetches and ``commit``) and, for
TetherSaver, the identity rule (RFC 8785 JSON and SHA-256 of every node it builds,
``tether.core.graph.canonical_payload`` and ``_identity``). When TetherSaver's three
alone take longer than SqliteSaver's whole turn, no saver built on this store's rows
can match SqliteSaver however little else it does. The timers add a call's
overhead to each: a few microseconds a turn.

``--cold N`` measures a cold read instead: a thread of N turns written through the
bench's graph on each saver, then, in a fresh process per read (``--cold-runs``, the
median counts), one ``get_tuple`` of its latest checkpoint (what ``graph.get_state``
reads, as ``make bench``'s phase C does), split the same way: LangGraph's serializer,
SQLite (every statement and fetch, TetherSaver's reads included) and, for
TetherSaver, parsing its rows' JSON payloads (``cold_bound``).

``--wal`` adds one more replay of each saver with SQLite's automatic WAL checkpoints
off (``wal_autocheckpoint=0``): its time per turn beside the best one says what the
checkpoints (copying each changed page back into the database file) cost each saver,
and its WAL file, read frame by frame and mapped with ``dbstat`` as
``floor_gap.py`` does, gives the pages each commit writes, by table and index.

``--floor`` measures, in CPU time (``time.process_time``, which other processes on a
loaded machine barely move), what any layout of one node per checkpointer call would
cost on this store, against both savers' replays of the same turns: a turn's five
commits (3 puts, 2 put_writes) as five transactions of one 1 KB resource node each
(``tether.store.txn.transact``), and the same five nodes handed to ``store.commit``
directly (``make_node``, the scope's head kept by the caller, no ``Transaction``),
each without LangGraph's serializer (which both savers pay: the replay's figure).

Prints a table; ``--json PATH`` writes the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import gc
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "src"))

import orjson  # noqa: E402
from floor_gap import page_objects, wal_frames  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from systems import _langgraph as lg  # noqa: E402
from verdict import cold_bound, langgraph_bound  # noqa: E402
from workload import turn_messages  # noqa: E402

from tether.adapters.langgraph import TetherSaver  # noqa: E402
from tether.core import graph  # noqa: E402
from tether.store import sqlite as sqlite_store  # noqa: E402

METHODS = ("get_tuple", "put", "put_writes")
Call = tuple[str, tuple[Any, ...], dict[str, Any]]


def record(turns: int, folder: Path, threads: int = 1) -> list[Call]:
    """The checkpointer calls of ``turns`` turns of the bench's graph on each of
    ``threads`` threads (round-robin), arguments copied as they were at call time
    (LangGraph mutates its state between calls)."""
    calls: list[Call] = []
    saver = TetherSaver.from_url(f"sqlite:///{folder / 'record.db'}?durability=normal")
    for name in METHODS:
        real = getattr(saver, name)

        def wrapped(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            calls.append((_name, copy.deepcopy(a), copy.deepcopy(k)))
            return _real(*a, **k)

        setattr(saver, name, wrapped)
    graph = lg.build(saver)
    for i in range(turns):
        for t in range(threads):
            user, assistant = turn_messages("replay" if threads == 1 else f"replay-{t}", i)
            graph.invoke(lg.turn_input(user, assistant), lg.config(f"t{t}"), durability="sync")
    saver.close()
    return calls


class _TimedCursor(sqlite3.Cursor):
    """The store's cursor, timing each statement it runs."""

    spent: dict[str, list[float]]

    def execute(self, sql: str, *args: Any) -> Any:  # type: ignore[override]
        t = time.perf_counter()
        try:
            return super().execute(sql, *args)
        finally:
            self.spent.setdefault(" ".join(sql.split()[:4]), []).append(time.perf_counter() - t)


class _Clock:
    """Seconds spent in the calls wrapped with ``timed``."""

    def __init__(self) -> None:
        self.s = 0.0

    def timed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.s += time.perf_counter() - t

        return call


class _TimedSerde:
    """A saver's serializer, its ``dumps_typed`` and ``loads_typed`` timed."""

    def __init__(self, inner: Any, clock: _Clock) -> None:
        self._inner = inner
        self.dumps_typed = clock.timed(inner.dumps_typed)
        self.loads_typed = clock.timed(inner.loads_typed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _SqliteClockCursor(sqlite3.Cursor):
    """SqliteSaver's cursors: every call that steps SQLite, timed on ``clock``."""

    clock: _Clock

    def execute(self, *a: Any) -> Any:  # type: ignore[override]
        return self.clock.timed(super().execute)(*a)

    def executemany(self, *a: Any) -> Any:  # type: ignore[override]
        return self.clock.timed(super().executemany)(*a)

    def fetchone(self) -> Any:
        return self.clock.timed(super().fetchone)()

    def fetchall(self) -> Any:
        return self.clock.timed(super().fetchall)()

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        return self.clock.timed(super().__next__)()


class _SqliteClockConnection(sqlite3.Connection):
    """SqliteSaver's connection: its cursors and its commits timed on ``clock``."""

    clock: _Clock

    def cursor(self, factory: Any = None) -> Any:  # type: ignore[override]
        cur = super().cursor(_SqliteClockCursor)
        cur.clock = self.clock
        return cur

    def commit(self) -> None:
        self.clock.timed(super().commit)()


@contextlib.contextmanager
def _timed_identity(clock: _Clock) -> Iterator[None]:
    """The identity rule (canonical JSON, SHA-256) of every node built meanwhile, timed:
    ``make_node`` and ``node_id`` call both through the module's globals."""
    saved = graph.canonical_payload, graph._identity
    graph.canonical_payload = clock.timed(saved[0])  # type: ignore[assignment]
    graph._identity = clock.timed(saved[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        graph.canonical_payload, graph._identity = saved


class _ClockConnection:
    """TetherSaver's store connection for a cold read: every statement it runs through
    ``execute`` (how the store reads) on a ``_SqliteClockCursor``, so its fetches are
    timed too."""

    def __init__(self, conn: sqlite3.Connection, clock: _Clock) -> None:
        self._conn, self._clock = conn, clock

    def cursor(self) -> _SqliteClockCursor:
        cur = self._conn.cursor(_SqliteClockCursor)
        cur.clock = self._clock
        return cur

    def execute(self, *a: Any) -> _SqliteClockCursor:
        return self.cursor().execute(*a)  # what Connection.execute does

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class _ClockJson:
    """``orjson`` as the SQLite store sees it, ``loads`` timed (its rows' payloads)."""

    def __init__(self, clock: _Clock) -> None:
        self.loads = clock.timed(orjson.loads)

    def __getattr__(self, name: str) -> Any:
        return getattr(orjson, name)


def _saver(kind: str, folder: Path, n: int | str, sql: _Clock | None = None) -> Any:
    if kind == "tether":
        return TetherSaver.from_url(f"sqlite:///{folder / f't{n}.db'}?durability=normal")
    if sql is None:
        conn = sqlite3.connect(folder / f"s{n}.db", check_same_thread=False)
    else:
        conn = sqlite3.connect(
            folder / f"s{n}.db", check_same_thread=False, factory=_SqliteClockConnection
        )
        conn.clock = sql  # type: ignore[attr-defined]
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return SqliteSaver(conn)


def _conn(kind: str, saver: Any) -> sqlite3.Connection:
    conn: sqlite3.Connection = saver.store._conn if kind == "tether" else saver.conn
    return conn


def replay(
    kind: str, calls: list[Call], folder: Path, n: int, *, wal: bool = False
) -> dict[str, Any]:
    """One replay of ``calls`` on a fresh saver; ``wal``: with automatic checkpoints
    off, and the pages of every commit counted from the WAL file ("wal" in the result)."""
    sqlite_sql, serde, hashing = _Clock(), _Clock(), _Clock()
    saver = _saver(kind, folder, n, sqlite_sql)
    saver.serde = _TimedSerde(saver.serde, serde)
    if wal:  # the WAL from here on holds the replay's commits, and only them
        conn = _conn(kind, saver)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA wal_autocheckpoint=0")
    spent: dict[str, list[float]] = {}
    if kind == "tether":
        store = saver.store
        cur = store._conn.cursor(_TimedCursor)  # the store's statements go through _cur
        cur.spent = spent
        store._cur = cur
    args = [(m, copy.deepcopy(a), copy.deepcopy(k)) for m, a, k in calls]  # not timed
    per: dict[str, float] = dict.fromkeys(METHODS, 0.0)
    with _timed_identity(hashing) if kind == "tether" else contextlib.nullcontext():
        for method, a, k in args:
            t = time.perf_counter()
            getattr(saver, method)(*a, **k)
            per[method] += time.perf_counter() - t
    pages = _wal_pages(folder / f"{'t' if kind == 'tether' else 's'}{n}.db") if wal else None
    if kind == "tether":
        saver.close()
    else:
        saver.conn.close()
    out: dict[str, Any] = {
        "methods_s": per,
        "sql_s": {k: sum(v) for k, v in spent.items()},
        "sql_calls": {k: len(v) for k, v in spent.items()},
        "serde_s": serde.s,
        "sqlite_sql_s": sqlite_sql.s,  # SqliteSaver's (TetherSaver's are in sql_s)
        "identity_s": hashing.s,  # TetherSaver's
    }
    if pages is not None:
        out["wal"] = pages
    return out


def _wal_pages(db: Path) -> dict[str, Any]:
    """Commits and pages (WAL frames) of a database whose WAL was never checkpointed,
    read from a copy taken while its saver is open (closing checkpoints it)."""
    with tempfile.TemporaryDirectory() as tmp:
        snap = Path(tmp) / db.name
        shutil.copyfile(db, snap)
        shutil.copyfile(f"{db}-wal", f"{snap}-wal")
        page_size, frames = wal_frames(Path(f"{snap}-wal"))
        objects = page_objects(snap)
    commits = sum(1 for _, c in frames if c)
    by = Counter(" ".join(objects.get(p, ("(free or unmapped)", ""))).strip() for p, _ in frames)
    return {
        "commits": commits,
        "frames": len(frames),
        "page_size": page_size,
        "frames_per_commit": len(frames) / commits if commits else 0.0,
        "by_object": {k: v / commits for k, v in by.most_common()} if commits else {},
    }


def measure(turns: int, repeats: int, threads: int = 1, *, wal: bool = False) -> dict[str, Any]:
    """Figures per turn: ``turns`` turns on each of ``threads`` threads; ``wal``: and
    one replay of each saver without WAL checkpoints, its pages counted."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        calls = record(turns, folder, threads)
        runs: dict[str, list[dict[str, Any]]] = {"tether": [], "sqlite": []}
        for r in range(repeats):  # alternating, so background load hits both alike
            for kind in runs:
                runs[kind].append(replay(kind, calls, folder, r))
        walled = (
            {kind: replay(kind, calls, folder, repeats, wal=True) for kind in runs} if wal else {}
        )
    out: dict[str, Any] = {
        "turns": turns,
        "threads": threads,
        "repeats": repeats,
        "calls": len(calls),
    }
    n = turns * threads  # turns in all
    for kind, rs in runs.items():
        best = min(rs, key=lambda r: sum(r["methods_s"].values()))
        out[kind] = {
            "ms_per_turn": sum(best["methods_s"].values()) / n * 1e3,
            "median_ms_per_turn": statistics.median(sum(r["methods_s"].values()) for r in rs)
            / n
            * 1e3,
            "by_method_ms_per_turn": {m: v / n * 1e3 for m, v in best["methods_s"].items()},
            "serde_ms_per_turn": best["serde_s"] / n * 1e3,
        }
        if kind == "sqlite":
            out[kind]["sql_ms_per_turn"] = best["sqlite_sql_s"] / n * 1e3
        else:
            out[kind]["identity_ms_per_turn"] = best["identity_s"] / n * 1e3
        if kind in walled:
            w = walled[kind]
            out[kind]["no_checkpoint_ms_per_turn"] = sum(w["methods_s"].values()) / n * 1e3
            out[kind]["wal"] = w["wal"]
        if kind == "tether":
            out[kind]["sql_ms_per_turn"] = sum(best["sql_s"].values()) / n * 1e3
            out[kind]["sql_by_statement"] = {
                k: {"calls_per_turn": best["sql_calls"][k] / n, "ms_per_turn": v / n * 1e3}
                for k, v in sorted(best["sql_s"].items(), key=lambda kv: -kv[1])
            }
    return out


def cold_read(kind: str, folder: Path) -> dict[str, float]:
    """In this (fresh) process: open the saver of ``kind`` on the thread ``cold``
    wrote, compile the bench's graph on it, and time one ``get_tuple`` of the latest
    checkpoint, split (ms)."""
    sql, serde, parse = _Clock(), _Clock(), _Clock()
    saver = _saver(kind, folder, "cold", sql)
    saver.serde = _TimedSerde(saver.serde, serde)
    # As phase C: the graph compiled before the read (what that imports and builds is
    # not the read's; without it, SqliteSaver's first messages paid for it)
    graph = lg.build(saver)
    restore = contextlib.ExitStack()
    if kind == "tether":
        store = saver.store
        store._conn = _ClockConnection(store._conn, sql)
        store._cur = store._conn.cursor()  # the store's own statements
        saved = sqlite_store.orjson
        sqlite_store.orjson = _ClockJson(parse)  # type: ignore[assignment]
        restore.callback(setattr, sqlite_store, "orjson", saved)
    with restore:
        t = time.perf_counter()
        got = graph.checkpointer.get_tuple(lg.config("t0"))
        total = time.perf_counter() - t
    messages = len(got.checkpoint["channel_values"]["messages"]) if got else 0
    if kind == "tether":
        saver.close()
    else:
        saver.conn.close()
    return {
        "ms": total * 1e3,
        "serde_ms": serde.s * 1e3,
        "sql_ms": sql.s * 1e3,
        "json_ms": parse.s * 1e3,
        "messages": messages,
    }


def cold(turns: int, runs: int) -> dict[str, Any]:
    """A thread of ``turns`` turns of the bench's graph on each saver (SQLite, WAL,
    synchronous=NORMAL), then ``runs`` cold reads of each, alternating, each in a
    fresh process: the median of each figure."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for kind in ("tether", "sqlite"):
            saver = _saver(kind, folder, "cold")
            graph = lg.build(saver)
            for i in range(turns):
                user, assistant = turn_messages("cold", i)
                graph.invoke(lg.turn_input(user, assistant), lg.config("t0"), durability="sync")
            if kind == "tether":
                saver.close()
            else:
                saver.conn.close()
        reads: dict[str, list[dict[str, float]]] = {"tether": [], "sqlite": []}
        for _ in range(runs):
            for kind in reads:
                r = subprocess.run(
                    [sys.executable, __file__, "--cold-read", kind, str(folder)],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                reads[kind].append(json.loads(r.stdout.strip().splitlines()[-1]))
    out: dict[str, Any] = {"turns": turns, "runs": runs}
    for kind, rs in reads.items():
        out[kind] = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
    return out


def table(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| turns | threads | TetherSaver ms/turn | of which SQLite | SqliteSaver ms/turn | ratio |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        t, s = r["tether"], r["sqlite"]
        lines.append(
            f"| {r['turns']} | {r['threads']} | {t['ms_per_turn']:.2f} | "
            f"{t['sql_ms_per_turn']:.2f} | {s['ms_per_turn']:.2f} | "
            f"{t['ms_per_turn'] / s['ms_per_turn']:.2f}x |"
        )
    return lines


def wal_lines(results: list[dict[str, Any]], top: int = 5) -> list[str]:
    """Per saver, from a ``--wal`` run: time per turn without WAL checkpoints beside the
    best with them, and the pages (WAL frames) per commit by table and index."""
    lines: list[str] = []
    for r in results:
        for kind, label in (("tether", "TetherSaver"), ("sqlite", "SqliteSaver")):
            f = r[kind]
            if "wal" not in f:
                continue
            w = f["wal"]
            objs = ", ".join(f"{k} {v:.2f}" for k, v in list(w["by_object"].items())[:top])
            lines.append(
                f"{r['turns']} turns x {r['threads']} threads, {label}: "
                f"{f['no_checkpoint_ms_per_turn']:.2f} ms/turn without WAL checkpoints "
                f"(best with them {f['ms_per_turn']:.2f}); {w['frames_per_commit']:.2f} pages "
                f"per commit over {w['commits']} commits ({objs})"
            )
    return lines


def _cpu_replay(kind: str, calls: list[Call], folder: Path, n: int) -> float:
    """CPU seconds of one replay of ``calls`` on a fresh saver (arguments copied first)."""
    saver = _saver(kind, folder, f"cpu{n}")
    args = [(m, copy.deepcopy(a), copy.deepcopy(k)) for m, a, k in calls]
    gc.collect()
    t = time.process_time()
    for method, a, k in args:
        getattr(saver, method)(*a, **k)
    spent = time.process_time() - t
    if kind == "tether":
        saver.close()
    else:
        saver.conn.close()
    return spent


_FLOOR_BLOB = "x" * 1000  # a node's payload in the floor: about one checkpoint's header


async def _floor_commits(
    folder: Path, n: int, turns: int, threads: int, direct: bool
) -> tuple[float, int]:
    """CPU seconds of ``turns`` x ``threads`` turns of five one-node commits each, and
    the nodes the store then holds (read back after the clock stops)."""
    from tether.core.graph import make_node
    from tether.store import open_store
    from tether.store.base import ScopeWrite
    from tether.store.txn import Transaction, transact

    store = await open_store(f"sqlite:///{folder / f'floor{n}.db'}?durability=normal")
    tips: dict[str, tuple[int, int, tuple[str, ...]]] = {}
    gc.collect()
    t = time.process_time()
    for i in range(turns):
        for th in range(threads):
            scope = f"thread:t{th}"
            for c in range(5):
                payload = {"lg": "cp", "turn": i, "call": c, "b": _FLOOR_BLOB}
                if direct:
                    gen, seq, front = tips.get(scope, (0, 0, ()))
                    node = make_node(
                        "resource", payload, front, sequence=seq + 1, resource_key=f"lgc:{c}"
                    )
                    w = ScopeWrite(
                        scope=scope,
                        expected_generation=gen,
                        expected_sequence=seq,
                        nodes=(node,),
                        frontier=(node.id,),
                    )
                    await store.commit("floor", [w])
                    tips[scope] = (gen, seq + 1, (node.id,))
                else:

                    async def fn(
                        txn: Transaction,
                        s: str = scope,
                        p: dict[str, Any] = payload,
                        key: str = f"lgc:{c}",
                    ) -> None:
                        await txn.append(s, "resource", p, resource_key=key)

                    await transact(store, "floor", fn)
    spent = time.process_time() - t
    held = sum([(await store.head("floor", f"thread:t{th}")).sequence for th in range(threads)])
    await store.close()
    return spent, held


def floor(turns: int, threads: int, repeats: int) -> dict[str, Any]:
    """CPU ms per turn (the least of ``repeats``, alternating): both savers' replays and
    the two one-node-per-call floors (``--floor``)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        calls = record(turns, folder, threads)
        runs: dict[str, list[float]] = {"sqlite": [], "tether": [], "txn": [], "direct": []}
        held: dict[str, int] = {}
        for r in range(repeats):
            runs["sqlite"].append(_cpu_replay("sqlite", calls, folder, r))
            runs["tether"].append(_cpu_replay("tether", calls, folder, r))
            for kind in ("txn", "direct"):
                spent, held[kind] = asyncio.run(
                    _floor_commits(folder, r, turns, threads, direct=kind == "direct")
                )
                runs[kind].append(spent)
                (folder / f"floor{r}.db").unlink()
                for extra in ("-wal", "-shm"):
                    (folder / f"floor{r}.db{extra}").unlink(missing_ok=True)
    n = turns * threads
    return {
        "turns": turns,
        "threads": threads,
        "repeats": repeats,
        "cpu_ms_per_turn": {k: min(v) / n * 1e3 for k, v in runs.items()},
        "cpu_ms_per_turn_all": {k: [x / n * 1e3 for x in v] for k, v in runs.items()},
        "floor_nodes_per_turn": {k: v / n for k, v in held.items()},
    }


def floor_lines(f: dict[str, Any]) -> list[str]:
    c = f["cpu_ms_per_turn"]
    return [
        f"{f['turns']} turns on each of {f['threads']} threads, CPU ms a turn (least of "
        f"{f['repeats']}, synchronous=NORMAL): SqliteSaver {c['sqlite']:.3f}, TetherSaver "
        f"{c['tether']:.3f} ({c['tether'] / c['sqlite']:.2f}x); one node per call on this "
        f"store, without LangGraph's serializer: five transactions {c['txn']:.3f} "
        f"({c['txn'] / c['sqlite']:.2f}x SqliteSaver's whole turn), five direct commits "
        f"{c['direct']:.3f} ({c['direct'] / c['sqlite']:.2f}x)",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--turns", default="10,100", help="comma list of thread lengths [10,100]")
    p.add_argument("--repeats", type=int, default=5, help="replays per saver; the best counts")
    p.add_argument("--threads", type=int, default=1, help="threads, round-robin [1]")
    p.add_argument("--json", default="", help="write the figures to this file")
    p.add_argument(
        "--wal", action="store_true", help="also replay without WAL checkpoints; count pages"
    )
    p.add_argument("--cold", type=int, default=0, help="instead: cold reads of a thread of N turns")
    p.add_argument(
        "--floor",
        action="store_true",
        help="instead: CPU per turn of both replays and of one node per call on this store",
    )
    p.add_argument("--cold-runs", type=int, default=5, help="fresh processes per saver [5]")
    p.add_argument("--cold-read", nargs=2, metavar=("KIND", "FOLDER"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.cold_read:  # the fresh process of one cold read: its figures on stdout
        print(json.dumps(cold_read(a.cold_read[0], Path(a.cold_read[1]))))
        return 0
    if a.cold:
        c = cold(a.cold, a.cold_runs)
        for line in cold_bound(c):
            print(line)
        if a.json:
            Path(a.json).write_text(json.dumps(c, indent=2))
        return 0
    if a.floor:
        floors = [floor(int(t), a.threads, a.repeats) for t in a.turns.split(",") if t]
        for f in floors:
            for line in floor_lines(f):
                print(line)
        if a.json:
            Path(a.json).write_text(json.dumps(floors, indent=2))
        return 0
    results = [measure(int(t), a.repeats, a.threads, wal=a.wal) for t in a.turns.split(",") if t]
    print("\n".join(table(results)))
    for line in langgraph_bound(results):
        print(line)
    for line in wal_lines(results):
        print(line)
    for r in results:
        stmts = ", ".join(
            f"{k} {v['calls_per_turn']:g}/turn {v['ms_per_turn']:.3f} ms"
            for k, v in r["tether"]["sql_by_statement"].items()
        )
        print(f"{r['turns']} turns x {r['threads']} threads, TetherSaver's SQL: {stmts}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
