"""The SQLite backend (``sqlite:///path/to/file.db``): tether's embedded default.

One file, any number of processes. Design, and why:

* **One connection per store** for reads and writes. The common commit (one known
  scope that holds nodes, a few rows) is one INSERT in autocommit mode that checks
  the head in its own WHERE (``_commit_alone``); any other is ``BEGIN IMMEDIATE``
  ... ``COMMIT``, which takes SQLite's write lock before reading the heads it
  checks. Either way the check and the writes see one state, and writers of every
  process on the file are serialised by SQLite itself.
* **WAL journal, durable by default**: ``synchronous=FULL`` fsyncs the WAL at
  every commit, so a commit that returned survives power loss.
  ``durability="normal"`` (``synchronous=NORMAL``) keeps the database consistent
  but may lose the last commits on power loss (not on a process crash).
* **Busy never reaches the caller**: SQLite's own busy handler is off, so a
  locked database never blocks the event loop inside a C call; ``SQLITE_BUSY``
  is retried with a jittered async backoff for up to ``busy_timeout`` seconds
  (default 30), and only then becomes ``StoreError(code="busy")``.
* **Inline by default**: each call runs on the event loop thread. A durable
  commit is one fsync (~0.2 ms here); a hop to a worker thread costs ~0.03 ms on
  every call, 15-20% of a turn, so it is opt-in (``offload=True``) for slow disks
  or huge reads. Inline calls never await in the middle of a transaction, so no
  two calls of one store interleave on one event loop.
* **Safe to share across threads**: a store used from several OS threads, each
  running its own event loop, serialises its calls with a ``threading.Lock`` held
  for the whole of each call (a transaction runs inside one call), so transactions
  of different threads never interleave on the connection. Uncontended, the lock
  costs ~0.1 us a call (benchmarks/storage.py measures the write path).
* **Append-only**: a commit reads the scope rows it checks (one indexed seek
  each) and inserts its node rows; history is never loaded or rewritten. See
  ``_sqlite_schema`` and docs/storage.md for the layout.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl, unquote

import orjson

from ..core.errors import InvalidRequest, StoreError
from ..core.graph import CausalNode, new_node
from ._sql import (
    KIND_CODE,
    KIND_CODES,
    CreatedAtTexts,
    created_at_value,
    pack_ids,
    prefix_upper,
    unpack_ids,
)
from ._sqlite_busy import failed as _failed
from ._sqlite_busy import is_busy as _is_busy
from ._sqlite_busy import retry_busy
from ._sqlite_schema import INCREMENTAL_VACUUM, LATEST, MIGRATIONS
from .base import (
    DuplicateNodes,
    Head,
    JsonCodec,
    PayloadCodec,
    RawHead,
    ScopeInfo,
    ScopeStats,
    ScopeWrite,
    Store,
    check_writes,
    conflict,
)
from .keys import KeyStore, MemoryKeyStore
from .vectors import VectorTable

T = TypeVar("T")

_LOW: Final = 0xFFFFFFFF  # the sequence part of a node's row key
_MIN_SQLITE: Final = (3, 24, 0)  # upsert (ON CONFLICT): migration 2, the key tables
_SYNC: Final = {"full": "FULL", "normal": "NORMAL"}
# WAL pages after which a commit checkpoints: SQLite's default, what SQLiteSession,
# SqliteSaver and ADK's services run with, at both durabilities. A checkpoint costs
# the commit that runs it an fsync of the WAL and one of the database file, and copies
# back every page the commits since the last one touched; at 100 pages (this store's
# setting before) a thread's store paid about ten times the checkpoints its peers do
# (over 200 threads x 20 turns: 206 database-file fsyncs against SQLiteSession's 21,
# 4,817 fsyncs in all against 4,353; now 23 and 4,268). The price is the WAL's growth
# once per process (SQLite deletes the WAL when its last connection closes): until the
# first checkpoint lets it wrap, each commit extends the file and its fsync writes the
# new size, as for every peer (docs/storage.md, "The WAL"). A checkpoint never changes
# what a commit made durable.
_WAL_AUTOCHECKPOINT: Final = 1000
# The sequence is the low 32 bits of k: SQLite masks it, one Python int fewer per row.
_NODE_COLS: Final = f"k & {_LOW}, id, kind, parents, created_at, rkey, payload"
_NODE_COLS_N: Final = f"n.k & {_LOW}, n.id, n.kind, n.parents, n.created_at, n.rkey, n.payload"
_SID_CACHE_MAX: Final = 65_536
_IN_CHUNK: Final = 500  # ids per IN (...) list, well under SQLite's variable limit
# Node rows per INSERT statement: 8 parameters a row, well under SQLite's variable limit
# (999 before 3.32), and a few dozen distinct statements for its statement cache.
_ONE_STATEMENT_ROWS: Final = 32
_INSERT_NODES: Final = (
    "INSERT INTO tether_nodes (k, id, kind, parents, created_at, rkey, frontier, payload)"
)
_ROW: Final = "(?, ?, ?, ?, ?, ?, ?, ?)"


def _row_params(base: int, rows: list[tuple[Any, ...]]) -> list[Any]:
    """The parameters of an INSERT of ``rows`` into the scope whose row keys start at
    ``base`` (``_prepare`` checked that every sequence fits in the key)."""
    return [v for r in rows for v in (base | r[0], *r[1:])]


@functools.cache
def _insert(n: int) -> str:
    """INSERT of ``n`` node rows in one statement."""
    return f"{_INSERT_NODES} VALUES {', '.join([_ROW] * n)}"


@functools.cache
def _checked_insert(n: int) -> str:
    """INSERT of ``n`` node rows that inserts them only if the scope's head is the one
    the commit was computed against: its generation and its largest row key (the
    last five parameters: sid, generation, the scope's key range, the expected key).
    The check's subqueries are constant, so SQLite runs them once, before the first
    row is written (it reads the table it inserts into, so the rows are gathered
    first)."""
    return (
        f"{_INSERT_NODES} SELECT * FROM (VALUES {', '.join([_ROW] * n)})"
        " WHERE (SELECT generation FROM tether_scopes WHERE sid = ?) = ?"
        " AND (SELECT k FROM tether_nodes WHERE k BETWEEN ? AND ? ORDER BY k DESC LIMIT 1) = ?"
    )


# A resource key's head is the last entry of the key in the rkey index
# ``(k >> 32, rkey) WHERE rkey IS NOT NULL``, whose entries end with the row key: one
# seek (``_HEAD``). A scope's keys are walked one seek at a time (a skip scan: the
# smallest key past the last one), so listing heads costs a seek per key, however
# many versions each key has. (``+`` strips a sid's INTEGER affinity, which would
# otherwise apply to ``k >> 32`` and keep the planner off the index: a scan.)
_HEAD: Final = "(SELECT max(k) FROM tether_nodes WHERE k >> 32 = +{sid} AND rkey = {key})"


def _key_range(prefix: str, params: list[Any]) -> str:
    """The upper bound of a key prefix as SQL (``AND rkey < ?``), or nothing."""
    upper = prefix_upper(prefix)
    if upper is None:
        return ""
    params.append(upper)
    return f" AND rkey < ?{len(params)}"


def _heads_sql(sid: int, prefix: str) -> tuple[str, list[Any]]:
    """The heads of one scope's keys that start with ``prefix``: ``(key, node
    columns)`` rows, in key order as the walk yields them (a co-routine, no sort)."""
    params: list[Any] = [sid, prefix]
    below = _key_range(prefix, params)
    sql = (
        "WITH RECURSIVE w(key) AS ("
        f" SELECT (SELECT min(rkey) FROM tether_nodes WHERE k >> 32 = ?1 AND rkey >= ?2{below})"
        " UNION ALL"
        f" SELECT (SELECT min(rkey) FROM tether_nodes WHERE k >> 32 = ?1 AND rkey > w.key{below})"
        " FROM w WHERE w.key IS NOT NULL"
        f") SELECT w.key, {_NODE_COLS_N} FROM w JOIN tether_nodes n"
        f" ON n.k = {_HEAD.format(sid='?1', key='w.key')} WHERE w.key IS NOT NULL"
    )
    return sql, params


def _across_sql(
    ns: str, key_prefix: str, scope_prefix: str, after: tuple[str, str] | None, limit: int
) -> tuple[str | None, list[Any]]:
    """``resource_heads_across`` as one walk over (scope, key) in order: the live scopes
    of ``ns`` by the partial index, each one's keys by the rkey index, one seek a step,
    stopped by the LIMIT (SQLite runs the walk as a co-routine). None: nothing to read.

    A row of the walk is (scope, sid, key, f, o): with ``key`` set, a head to return
    (``o`` = 0 for the cursor's own row); with ``f`` = 1, a scope just reached whose
    first key comes next; with neither, a scope done, the next live one comes next."""
    params: list[Any] = [ns, key_prefix, limit]
    key_below = _key_range(key_prefix, params)
    scope_upper = prefix_upper(scope_prefix)
    scope_below = ""
    if scope_upper is not None:
        params.append(scope_upper)
        scope_below = f" AND scope < ?{len(params)}"
    live = f"FROM tether_scopes WHERE ns = ?1 AND live = 1{scope_below}"
    keys_of = "SELECT min(rkey) FROM tether_nodes WHERE k >> 32 = +w.sid"
    next_scope = f"(SELECT min(scope) {live} AND scope > w.scope)"

    def sid_of(scope: str) -> str:
        return f"(SELECT sid FROM tether_scopes WHERE ns = ?1 AND scope = {scope})"

    if after is not None and after[0] >= scope_prefix:
        if scope_upper is not None and after[0] >= scope_upper:
            return None, []
        params.append(after[0])
        a = len(params)
        sid = sid_of(f"?{a}")  # a cursor scope reset since has no keys: the walk goes on
        if after[1] >= key_prefix:
            # the cursor's own row (not returned); the walk goes on from its key
            params.append(after[1])
            seed = f"SELECT ?{a}, {sid}, ?{len(params)}, 0, 0"
        else:
            seed = f"SELECT ?{a}, {sid}, NULL, 1, 0"
    else:
        params.append(scope_prefix)
        start = f"(SELECT min(scope) {live} AND scope >= ?{len(params)})"
        seed = f"SELECT {start}, {sid_of(start)}, NULL, 1, 0"
    step = (
        "SELECT"
        f" CASE WHEN w.f = 0 AND w.key IS NULL THEN {next_scope} ELSE w.scope END,"
        f" CASE WHEN w.f = 0 AND w.key IS NULL THEN {sid_of(next_scope)} ELSE w.sid END,"
        f" CASE WHEN w.f = 1 THEN ({keys_of} AND rkey >= ?2{key_below})"
        f" WHEN w.key IS NOT NULL THEN ({keys_of} AND rkey > w.key{key_below}) END,"
        " CASE WHEN w.f = 0 AND w.key IS NULL THEN 1 ELSE 0 END,"
        " 1"
        " FROM w WHERE w.scope IS NOT NULL"
    )
    sql = (
        f"WITH RECURSIVE w(scope, sid, key, f, o) AS ({seed} UNION ALL {step}),"
        f" h(scope, key, hk) AS (SELECT scope, key, {_HEAD.format(sid='w.sid', key='w.key')}"
        " FROM w WHERE w.key IS NOT NULL AND w.o = 1 LIMIT ?3)"
        " SELECT h.scope, h.key, n.k & 4294967295, n.id, n.kind, n.parents, n.created_at,"
        " n.rkey, n.payload FROM h JOIN tether_nodes n ON n.k = h.hk"
    )
    return sql, params


def parse_url(url: str) -> tuple[str, dict[str, str]]:
    """``sqlite:///rel.db`` (relative), ``sqlite:////abs/x.db`` (absolute), a bare path.

    As in SQLAlchemy: three slashes then the path, so an absolute path has four.
    Options may follow as a query string: ``?durability=normal&busy_timeout=5``.
    """
    rest = url
    if "://" in url:
        scheme, rest = url.split("://", 1)
        if scheme.lower() != "sqlite":
            raise InvalidRequest(f"not a SQLite URL: {url!r}")
        if rest.startswith("/"):
            rest = rest[1:]
    path, _, query = rest.partition("?")
    path = unquote(path)
    if not path:
        raise InvalidRequest(
            f"SQLite URL {url!r} names no file: use sqlite:///relative.db or sqlite:////abs/path.db"
        )
    return path, dict(parse_qsl(query, keep_blank_values=True))


class SQLiteStore(Store):
    """The embedded store. Open with ``await tether.open_store("sqlite:///agent.db")``."""

    def __init__(
        self,
        url: str,
        conn: sqlite3.Connection,
        *,
        path: str,
        codec: PayloadCodec | None,
        durability: str,
        busy_timeout: float,
        offload: bool,
    ) -> None:
        super().__init__(codec=codec)
        self.url = url
        self.path = path
        self.durability = durability
        self.busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = conn
        # One cursor for the statements of the write path and of point reads (each read
        # to its end before the next): Connection.execute makes a cursor per call, and
        # the connection keeps a weak reference to each of its last 200, which with
        # many connections open (a session per thread) is most of what the garbage
        # collector walks. Reads that step while decoding get their own cursor.
        self._cur: sqlite3.Cursor = conn.cursor()
        self._executor = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="tether-sqlite")
            if offload
            else None
        )
        self._memory_keys: MemoryKeyStore | None = None  # the key table of :memory:
        self._vectors: VectorTable | None = None  # the recall index, opened on first use
        self._sids: dict[tuple[str, str], int] = {}
        # Heads this connection read or left, valid while no other connection has
        # committed: SQLite's data_version (``_fresh_heads``) says when one has.
        self._heads: dict[tuple[str, str], Head] = {}
        self._data_version: int | None = None
        # One call (one transaction) at a time on the connection, whatever thread or
        # event loop it comes from.
        self._lock = threading.Lock()

    # -- opening -----------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        codec: PayloadCodec | None = None,
        durability: str | None = None,
        busy_timeout: float | None = None,
        offload: bool | None = None,
    ) -> SQLiteStore:
        """Open (creating if needed) the file and bring its schema up to date.

        ``durability``: ``"full"`` (default; every commit fsynced) or ``"normal"``.
        ``busy_timeout``: seconds a locked database is retried before StoreError.
        ``offload``: run SQLite calls on a dedicated thread instead of inline.
        """
        if sqlite3.sqlite_version_info < _MIN_SQLITE:
            raise StoreError(
                f"tether needs SQLite >= {'.'.join(map(str, _MIN_SQLITE))} (upsert); this "
                f"Python links {sqlite3.sqlite_version}",
                code="store_unavailable",
            )
        path, query = parse_url(url)
        unknown = set(query) - {"durability", "busy_timeout", "offload"}
        if unknown:
            raise InvalidRequest(
                f"unknown SQLite URL option(s) {sorted(unknown)}: "
                "use durability, busy_timeout or offload"
            )
        if durability is None:
            durability = query.get("durability", "full")
        if durability not in _SYNC:
            raise InvalidRequest(
                f"durability must be 'full' or 'normal', got {durability!r}", field="durability"
            )
        if busy_timeout is None:
            try:
                busy_timeout = float(query.get("busy_timeout", "30"))
            except ValueError:
                raise InvalidRequest("busy_timeout must be a number of seconds") from None
        if offload is None:
            offload = query.get("offload", "").lower() in ("1", "true", "yes")
        if path != ":memory:" and not Path(path).parent.is_dir():
            raise StoreError(
                f"cannot open {path!r}: directory {str(Path(path).parent)!r} does not exist",
                code="store_unavailable",
            )
        try:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=0.0)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open SQLite file {path!r}: {e}") from e
        store = cls(
            url,
            conn,
            path=path,
            codec=codec,
            durability=durability,
            busy_timeout=busy_timeout,
            offload=offload,
        )
        try:
            await store._call(store._setup)
        except BaseException:
            await store.close()
            raise
        return store

    def _setup(self) -> None:
        c = self._c
        # A new file frees the pages a prune empties (PRAGMA incremental_vacuum, in
        # _prune): auto_vacuum can only be chosen before the first table. An older
        # file is switched once its schema reaches INCREMENTAL_VACUUM (_vacuum_mode).
        if c.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is None:
            # Only on a file with nothing in it yet: setting it on another rewrites the
            # header (opening a file must not write to it).
            c.execute("PRAGMA auto_vacuum=INCREMENTAL")
        mode = c.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal" and self.path != ":memory:":
            raise StoreError(f"could not switch {self.path!r} to WAL (journal_mode={mode})")
        c.execute(f"PRAGMA synchronous={_SYNC[self.durability]}")
        c.execute(f"PRAGMA wal_autocheckpoint={_WAL_AUTOCHECKPOINT}")
        if self.durability == "full":
            # macOS's fsync does not flush the drive's cache; F_FULLFSYNC does. A no-op
            # elsewhere.
            c.execute("PRAGMA fullfsync=ON")
        version = self._schema_version()
        if version == LATEST:
            self._vacuum_mode()
            return
        if version > LATEST:
            raise StoreError(
                f"{self.path!r} has schema version {version}, newer than this tether knows "
                f"({LATEST}); upgrade tether to open it",
                code="schema_too_new",
            )
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute(
                "CREATE TABLE IF NOT EXISTS tether_schema ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            version = self._schema_version()  # another process may have migrated meanwhile
            now = datetime.now(UTC).isoformat(timespec="seconds")
            for m in MIGRATIONS:
                if m.version > version:
                    for stmt in m.statements:
                        c.execute(stmt)
                    c.execute(
                        "INSERT INTO tether_schema (version, name, applied_at) VALUES (?, ?, ?)",
                        (m.version, m.name, now),
                    )
            c.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        self._vacuum_mode()

    def _vacuum_mode(self) -> None:
        """Migration INCREMENTAL_VACUUM's second half: auto_vacuum takes effect on a file
        that has tables only through a VACUUM, which no transaction may hold, so it runs
        here, after the migrations committed (and again at the next open if a crash came
        between). Once per file: the whole file is rewritten, under SQLite's locks."""
        c = self._c
        if self.path == ":memory:" or self._schema_version() < INCREMENTAL_VACUUM:
            return
        if c.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:  # INCREMENTAL
            return
        c.execute("PRAGMA auto_vacuum=INCREMENTAL")
        c.execute("VACUUM")  # busy: _setup runs again (_call retries it whole)

    def _schema_version(self) -> int:
        c = self._c
        exists = c.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tether_schema'"
        ).fetchone()
        if not exists:
            return 0
        return int(c.execute("SELECT coalesce(max(version), 0) FROM tether_schema").fetchone()[0])

    async def schema_version(self) -> int:
        """The newest migration applied to this file."""
        return await self._call(self._schema_version)

    # -- plumbing ----------------------------------------------------------------

    @property
    def _c(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("this store is closed; open a new one with tether.open_store")
        return self._conn

    @property
    def _q(self) -> sqlite3.Cursor:
        """The store's own cursor (see ``__init__``): for statements read to their end."""
        if self._conn is None:
            raise StoreError("this store is closed; open a new one with tether.open_store")
        return self._cur

    def _rollback(self) -> None:
        c = self._conn
        if c is not None and c.in_transaction:
            # The transaction is gone either way; the original error is what matters.
            with contextlib.suppress(sqlite3.Error):
                c.execute("ROLLBACK")

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` (inline or on the store's thread), retrying SQLITE_BUSY."""
        if self._executor is None:
            # Inline, the first attempt is a plain call (the retry loop's coroutines
            # cost more than most calls' SQL); a busy file goes to the retry loop.
            try:
                return self._guarded(fn, *args)
            except sqlite3.Error as e:
                if not _is_busy(e):
                    raise _failed(e, self.path) from e

        async def attempt() -> T:
            if self._executor is None:
                return self._guarded(fn, *args)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, self._guarded, fn, *args)

        return await retry_busy(attempt, path=self.path, busy_timeout=self.busy_timeout)

    def _guarded(self, fn: Callable[..., T], *args: Any) -> T:
        # Runs on the thread that owns the connection: a failed call never leaves a
        # transaction open behind it. The lock keeps calls of other threads (each with
        # its own event loop) out of this call's transaction.
        with self._lock:
            try:
                return fn(*args)
            except BaseException:
                self._rollback()
                raise

    def _sid(self, namespace: str, scope: str) -> int | None:
        # A scope's sid never changes once assigned (rows are reset, never deleted),
        # so it is safe to cache across processes.
        sid = self._sids.get((namespace, scope))
        if sid is None:
            row = self._q.execute(
                "SELECT sid FROM tether_scopes WHERE ns = ? AND scope = ?", (namespace, scope)
            ).fetchone()
            if row is None:
                return None
            if len(self._sids) >= _SID_CACHE_MAX:
                self._sids.clear()
            sid = self._sids[(namespace, scope)] = int(row[0])
        return sid

    def _sequence(self, sid: int) -> int:
        row = self._q.execute(
            "SELECT k FROM tether_nodes WHERE k BETWEEN ? AND ? ORDER BY k DESC LIMIT 1",
            (sid << 32, (sid << 32) | _LOW),
        ).fetchone()
        return 0 if row is None else int(row[0]) & _LOW

    def _stand(self, sid: int) -> tuple[int, int]:
        """(generation, sequence) in one statement, so one snapshot: a commit's check."""
        row = self._q.execute(
            "SELECT generation, (SELECT k FROM tether_nodes WHERE k BETWEEN ? AND ?"
            " ORDER BY k DESC LIMIT 1) FROM tether_scopes WHERE sid = ?",
            (sid << 32, (sid << 32) | _LOW, sid),
        ).fetchone()
        return row[0], 0 if row[1] is None else row[1] & _LOW

    def _node(self, namespace: str, scope: str, row: tuple[Any, ...]) -> CausalNode:
        return self._decode(namespace, scope, (row,))[0]

    def _decode(
        self, namespace: str, scope: str, rows: Iterable[tuple[Any, ...]]
    ) -> list[CausalNode]:
        # The hot loop of every long read (a cold load of a long thread is mostly
        # this): names bound to locals, nodes built by new_node (the fields come from
        # rows this store wrote), and orjson called directly for the default codec.
        codec = self.codec
        if type(codec) is JsonCodec:
            decode: Callable[[bytes], Any] = orjson.loads
        else:

            def decode(data: bytes) -> Any:
                return codec.decode(namespace, scope, data)

        kinds, unpack, node = KIND_CODES, unpack_ids, new_node
        text = CreatedAtTexts()
        return [
            node("cw_" + id_.hex(), kinds[kind], unpack(ps), decode(p), text[c], seq, rk)
            for seq, id_, kind, ps, c, rk, p in rows
        ]

    # -- writing -----------------------------------------------------------------

    async def _do_commit(self, namespace: str, writes: Sequence[ScopeWrite]) -> None:
        prepared = [self._prepare(namespace, w) for w in writes]
        await self._call(self._commit, namespace, prepared)

    async def commit_stream(
        self,
        namespace: str,
        scope: str,
        *,
        expected_generation: int,
        batches: Callable[[], Iterable[Sequence[CausalNode]]],
        frontier: tuple[str, ...],
        sparse: bool = False,
    ) -> None:
        # One transaction, written a batch at a time on the store's thread: the
        # caller's batches are read there too, so only one batch is held.
        await self._call(
            self._commit_stream, namespace, scope, expected_generation, batches, frontier, sparse
        )

    def _commit_stream(
        self,
        namespace: str,
        scope: str,
        generation: int,
        batches: Callable[[], Iterable[Sequence[CausalNode]]],
        frontier: tuple[str, ...],
        sparse: bool = False,
    ) -> None:
        c = self._c
        self._heads.pop((namespace, scope), None)
        c.execute("BEGIN IMMEDIATE")
        try:
            seq = 0
            pending: tuple[CausalNode, ...] = ()
            for batch in batches():
                if pending:
                    # Not the last batch: its frontier is never seen (the transaction
                    # commits whole), so the compact one-head form stands in.
                    seq = self._stream_one(namespace, scope, generation, seq, pending, None, sparse)
                pending = tuple(batch)
            if pending:
                self._stream_one(namespace, scope, generation, seq, pending, frontier, sparse)
            c.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def _stream_one(
        self,
        namespace: str,
        scope: str,
        generation: int,
        seq: int,
        nodes: tuple[CausalNode, ...],
        frontier: tuple[str, ...] | None,
        sparse: bool = False,
    ) -> int:
        w = ScopeWrite(
            scope=scope,
            expected_generation=generation,
            expected_sequence=seq,
            nodes=nodes,
            frontier=(nodes[-1].id,) if frontier is None else frontier,
            sparse=sparse,
        )
        check_writes(namespace, [w])
        self._commit_one(namespace, self._prepare(namespace, w))
        return nodes[-1].sequence

    def _prepare(self, namespace: str, w: ScopeWrite) -> _Prepared:
        # Everything that needs no lock is done before the commit's statement: the row
        # of each node (the frontier rides on the last one, below), names bound to
        # locals and orjson called directly for the default codec, as in ``_decode``.
        codec = self.codec
        if type(codec) is JsonCodec:
            encode: Callable[[Any], bytes] = orjson.dumps
        else:
            scope = w.scope

            def encode(payload: Any) -> bytes:
                return codec.encode(namespace, scope, payload)

        kind, at, pack, fromhex = KIND_CODE, created_at_value, pack_ids, bytes.fromhex
        rows: list[tuple[Any, ...]] = [
            (
                n.sequence,
                fromhex(n.id[3:]),
                kind[n.kind],
                pack(n.parents),
                at(n.created_at),
                n.resource_key,
                None,
                encode(n.payload),
            )
            for n in w.nodes
        ]
        if rows:
            if rows[-1][0] > _LOW:
                raise StoreError(f"scope {w.scope!r} is full: 2**32 - 1 nodes is the most it holds")
            front = w.frontier
            if len(front) == 1 and front[0] == w.nodes[-1].id:
                frontier = b""  # the common case: the last node is the only head
            elif not front:
                frontier = b"\x00"  # an empty frontier (not a multiple of 12 bytes)
            else:
                frontier = pack(front)
            r = rows[-1]
            rows[-1] = (*r[:6], frontier, r[7])
        return _Prepared(
            w.scope, w.expected_generation, w.expected_sequence, rows, tuple(w.frontier)
        )

    def _commit(self, namespace: str, prepared: list[_Prepared]) -> None:
        heads = self._heads
        try:
            if len(prepared) != 1 or not self._commit_alone(namespace, prepared[0]):
                q = self._q
                q.execute("BEGIN IMMEDIATE")
                try:
                    for p in prepared:
                        self._commit_one(namespace, p)
                    q.execute("COMMIT")
                except BaseException:
                    self._rollback()
                    raise
        except BaseException:
            for p in prepared:  # a conflict: what was known of these scopes is stale
                heads.pop((namespace, p.scope), None)
            raise
        for p in prepared:
            if p.rows:
                self._keep_head(
                    namespace,
                    p.scope,
                    Head(
                        generation=p.generation,
                        sequence=p.rows[-1][0],  # the last node's (a sparse write has holes)
                        frontier=p.frontier,
                    ),
                )

    def _commit_alone(self, namespace: str, p: _Prepared) -> bool:
        """The common commit (one scope this store has seen, that holds nodes, a few
        rows) as one statement in SQLite's autocommit mode: the INSERT carries the
        head check in its WHERE, so it inserts every row or none, and SQLite commits
        it (or nothing) when it ends. No BEGIN, no separate check, no COMMIT: one
        statement instead of four. False: not such a commit (nothing was done), for
        the explicit transaction. Another connection's write between this one's read
        snapshot and its write lock is SQLITE_BUSY(_SNAPSHOT), retried whole."""
        rows = p.rows
        if not rows or p.sequence == 0 or len(rows) > _ONE_STATEMENT_ROWS:
            return False
        sid = self._sids.get((namespace, p.scope))
        if sid is None:
            return False
        base = sid << 32
        params = _row_params(base, rows)
        params += (sid, p.generation, base, base | _LOW, base | p.sequence)
        try:
            cur = self._q.execute(_checked_insert(len(rows)), params)
        except sqlite3.IntegrityError:
            raise self._duplicates(namespace, p, sid, p.sequence) from None
        if cur.rowcount != len(rows):
            # The head check failed, so nothing was inserted: report where it stands.
            generation, seq = self._stand(sid)
            raise conflict(namespace, p.scope, (p.generation, p.sequence), (generation, seq))
        return True

    def _commit_one(self, namespace: str, p: _Prepared) -> None:
        c = self._c
        sid = self._sid(namespace, p.scope)
        if sid is None:
            if (p.generation, p.sequence) != (0, 0):
                raise conflict(namespace, p.scope, (p.generation, p.sequence), (0, 0))
            if not p.rows:
                return
            cur = c.execute(
                "INSERT INTO tether_scopes (ns, scope, generation, live) VALUES (?, ?, 0, 1)",
                (namespace, p.scope),
            )
            sid = cur.lastrowid
            assert sid is not None
            if sid > 0x7FFFFFFF:
                raise StoreError("this file holds 2**31 scopes, the most its layout allows")
            seq = 0
        else:
            generation, seq = self._stand(sid)
            if (generation, seq) != (p.generation, p.sequence):
                raise conflict(namespace, p.scope, (p.generation, p.sequence), (generation, seq))
            if not p.rows:
                return
            if seq == 0:
                c.execute("UPDATE tether_scopes SET live = 1 WHERE sid = ?", (sid,))
        base, rows = sid << 32, p.rows
        # A resource key's head is its newest row in the rkey index (``_sqlite_schema``).
        try:
            for i in range(0, len(rows), _ONE_STATEMENT_ROWS):
                chunk = rows[i : i + _ONE_STATEMENT_ROWS]
                self._q.execute(_insert(len(chunk)), _row_params(base, chunk))
        except sqlite3.IntegrityError:
            raise self._duplicates(namespace, p, sid, seq) from None

    def _duplicates(self, namespace: str, p: _Prepared, sid: int, seq: int) -> DuplicateNodes:
        # Rows of this write inserted before the failing one are still visible (the
        # transaction is rolled back by the caller), so look only at older rows.
        ids = [r[1] for r in p.rows]
        found: list[str] = []
        for i in range(0, len(ids), _IN_CHUNK):
            chunk = ids[i : i + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            found.extend(
                "cw_" + row[0].hex()
                for row in self._c.execute(
                    f"SELECT id FROM tether_nodes WHERE k >> 32 = ? AND id IN ({marks}) AND k <= ?",
                    (sid, *chunk, (sid << 32) | seq),
                )
            )
        return DuplicateNodes(
            f"scope {p.scope!r} already holds {len(found)} of these nodes",
            namespace=namespace,
            scope=p.scope,
            ids=found,
        )

    async def _do_reset_scope(self, namespace: str, scope: str) -> Head:
        gen = await self._call(self._reset, namespace, scope)
        return Head(generation=gen)

    async def _do_reset_if(self, namespace: str, scope: str, expected: Head) -> Head:
        gen = await self._call(self._reset, namespace, scope, expected)
        return Head(generation=gen)

    def _reset(self, namespace: str, scope: str, expected: Head | None = None) -> int:
        c = self._c
        self._heads.pop((namespace, scope), None)
        c.execute("BEGIN IMMEDIATE")
        try:
            sid = self._sid(namespace, scope)
            if expected is not None:
                stand = (0, 0) if sid is None else self._stand(sid)
                if stand != (expected.generation, expected.sequence):
                    raise conflict(
                        namespace, scope, (expected.generation, expected.sequence), stand
                    )
            if sid is None:
                c.execute(
                    "INSERT INTO tether_scopes (ns, scope, generation, live) VALUES (?, ?, 1, 0)",
                    (namespace, scope),
                )
                gen = 1
            else:
                # No RETURNING: it needs SQLite 3.35, and distributions ship older ones.
                c.execute(
                    "UPDATE tether_scopes SET generation = generation + 1, live = 0 WHERE sid = ?",
                    (sid,),
                )
                gen = c.execute(
                    "SELECT generation FROM tether_scopes WHERE sid = ?", (sid,)
                ).fetchone()[0]
                self._delete_nodes(sid)
            c.execute("COMMIT")
            return int(gen)
        except BaseException:
            self._rollback()
            raise

    async def _do_prune(
        self, namespace: str, scope: str, expected: Head, cut: tuple[int, ...], write: ScopeWrite
    ) -> Head:
        prepared = self._prepare(namespace, write)
        return await self._call(self._prune, namespace, scope, expected, cut, prepared)

    def _prune(
        self, namespace: str, scope: str, expected: Head, cut: tuple[int, ...], p: _Prepared
    ) -> Head:
        c = self._c
        self._heads.pop((namespace, scope), None)  # what was known of it is stale after
        # The freed pages are zeroed (an encrypted store's pruned ciphertext is gone from
        # the file, not only unlinked), for this transaction.
        secure = c.execute("PRAGMA secure_delete").fetchone()[0]
        c.execute("PRAGMA secure_delete=ON")
        c.execute("BEGIN IMMEDIATE")
        try:
            sid = self._sid(namespace, scope)
            stand = (0, 0) if sid is None else self._stand(sid)
            if sid is None or stand != (expected.generation, expected.sequence):
                raise conflict(namespace, scope, (expected.generation, expected.sequence), stand)
            base = sid << 32
            c.execute("UPDATE tether_scopes SET generation = generation + 1 WHERE sid = ?", (sid,))
            self._commit_one(namespace, p)  # checks (generation + 1, sequence): this one's
            # Then the cut: the scope's sequence is its largest row key, which the record
            # now holds, whether or not the newest node before it goes.
            for i in range(0, len(cut), _IN_CHUNK):
                chunk = cut[i : i + _IN_CHUNK]
                c.execute(
                    f"DELETE FROM tether_nodes WHERE k IN ({','.join('?' * len(chunk))})",
                    [base | s for s in chunk],
                )
            c.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        finally:
            c.execute(f"PRAGMA secure_delete={int(secure)}")
        # The freed pages go back to the file system (auto_vacuum=INCREMENTAL): the file
        # shrinks once the WAL is checkpointed.
        # executescript steps it to its end (one execute() frees a single page).
        c.executescript("PRAGMA incremental_vacuum;")
        (record,) = p.rows
        return Head(
            generation=expected.generation + 1,
            sequence=expected.sequence + 1,
            frontier=("cw_" + record[1].hex(),),
        )

    def _delete_nodes(self, sid: int) -> None:
        c = self._c
        c.execute(
            "DELETE FROM tether_nodes WHERE k BETWEEN ? AND ?", (sid << 32, (sid << 32) | _LOW)
        )

    async def _do_delete_namespace(self, namespace: str) -> int:
        return await self._call(self._delete_namespace, namespace)

    def _delete_namespace(self, namespace: str) -> int:
        c = self._c
        self._heads.clear()
        c.execute("BEGIN IMMEDIATE")
        try:
            rows = c.execute(
                "SELECT sid, live FROM tether_scopes WHERE ns = ?", (namespace,)
            ).fetchall()
            c.execute(
                "UPDATE tether_scopes SET generation = generation + 1, live = 0 WHERE ns = ?",
                (namespace,),
            )
            for sid, live in rows:
                if live:
                    self._delete_nodes(sid)
            c.execute("COMMIT")
            return sum(1 for _, live in rows if live)
        except BaseException:
            self._rollback()
            raise

    # -- reading -----------------------------------------------------------------

    async def head(self, namespace: str, scope: str) -> Head:
        return await self._call(self._head, namespace, scope)

    def _fresh_heads(self) -> dict[tuple[str, str], Head]:
        """The heads this store knows, emptied if another connection has committed since
        they were known. ``PRAGMA data_version`` changes when any other connection (of
        any process) commits to the file, never for this connection's own commits, and
        each of those updates or drops the heads it touches (``_commit``, ``_reset``,
        ...). So a head kept here is the one a read would return: a turn's head read is
        one PRAGMA instead of a SELECT, and the commit still checks it in its WHERE."""
        dv = self._q.execute("PRAGMA data_version").fetchone()[0]
        if dv != self._data_version:
            self._heads.clear()
            self._data_version = dv
        return self._heads

    def _keep_head(self, namespace: str, scope: str, head: Head) -> None:
        heads = self._heads
        if len(heads) >= _SID_CACHE_MAX:
            heads.clear()
        heads[(namespace, scope)] = head

    def _head(self, namespace: str, scope: str) -> Head:
        known = self._fresh_heads().get((namespace, scope))
        if known is not None:
            return known
        head = self._read_head(namespace, scope)
        self._keep_head(namespace, scope, head)
        return head

    def _read_head(self, namespace: str, scope: str) -> Head:
        sid = self._sid(namespace, scope)
        if sid is None:
            return Head()
        # The newest node and the generation in one statement (one snapshot)...
        q = self._q
        row = q.execute(
            "SELECT k, id, frontier, (SELECT generation FROM tether_scopes WHERE sid = ?)"
            " FROM tether_nodes WHERE k BETWEEN ? AND ? ORDER BY k DESC LIMIT 1",
            (sid, sid << 32, (sid << 32) | _LOW),
        ).fetchone()
        if row is None:
            # ... or an empty scope: its generation now is one it had while empty (a
            # reset empties it), so the pair is a state the scope really was in.
            gen = q.execute(
                "SELECT generation FROM tether_scopes WHERE sid = ?", (sid,)
            ).fetchone()[0]
            return Head(generation=gen)
        k, id_, frontier, gen = row
        if frontier == b"":
            fr: tuple[str, ...] = ("cw_" + id_.hex(),)
        elif frontier == b"\x00":
            fr = ()
        else:
            fr = unpack_ids(frontier)
        return Head(generation=gen, sequence=k & _LOW, frontier=fr)

    async def nodes(
        self,
        namespace: str,
        scope: str,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 1000,
        descending: bool = False,
    ) -> list[CausalNode]:
        return await self._call(self._nodes, namespace, scope, after, before, limit, descending)

    async def payloads(
        self,
        namespace: str,
        scope: str,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 1000,
        descending: bool = False,
    ) -> list[tuple[int, str, Any]]:
        return await self._call(self._payloads, namespace, scope, after, before, limit, descending)

    def _payloads(
        self,
        namespace: str,
        scope: str,
        after: int,
        before: int | None,
        limit: int,
        descending: bool,
    ) -> list[tuple[int, str, Any]]:
        # nodes() less ids, parents, timestamps and resource keys: three columns read
        # and one decode per row (a session's full read is mostly this loop).
        bounds = self._key_range(namespace, scope, after, before, limit)
        if bounds is None:
            return []
        lo, hi = bounds
        order = "DESC" if descending else "ASC"
        cur = self._c.execute(
            f"SELECT k & {_LOW}, kind, payload FROM tether_nodes WHERE k > ? AND k <= ?"
            f" ORDER BY k {order} LIMIT ?",
            (lo, hi, limit),
        )
        codec = self.codec
        if type(codec) is JsonCodec:
            decode: Callable[[bytes], Any] = orjson.loads
        else:

            def decode(data: bytes) -> Any:
                return codec.decode(namespace, scope, data)

        kinds = KIND_CODES
        try:
            return [(seq, kinds[kind], decode(p)) for seq, kind, p in cur]
        finally:
            cur.close()

    def _key_range(
        self, namespace: str, scope: str, after: int, before: int | None, limit: int
    ) -> tuple[int, int] | None:
        """The row keys (lo, hi] of ``scope``'s sequences after..before, or None: nothing
        to read (an unknown scope, an empty range, a limit of 0)."""
        sid = self._sid(namespace, scope)
        if sid is None or limit <= 0:
            return None
        base = sid << 32
        lo = base | min(max(after, 0), _LOW)
        hi = base | _LOW if before is None else base | min(max(before - 1, 0), _LOW)
        return (lo, hi) if hi > lo else None

    def _nodes(
        self,
        namespace: str,
        scope: str,
        after: int,
        before: int | None,
        limit: int,
        descending: bool,
    ) -> list[CausalNode]:
        bounds = self._key_range(namespace, scope, after, before, limit)
        if bounds is None:
            return []
        lo, hi = bounds
        order = "DESC" if descending else "ASC"
        cur = self._c.execute(
            f"SELECT {_NODE_COLS} FROM tether_nodes WHERE k > ? AND k <= ? ORDER BY k {order} LIMIT ?",
            (lo, hi, limit),
        )
        # Decoded while SQLite steps, not after fetchall(): each row's raw values are
        # freed before the next row is read, so a page of 1,000 nodes reuses memory
        # instead of touching ~0.5 MB of fresh pages (1 ms of a cold 2,000-node load).
        try:
            return self._decode(namespace, scope, cur)
        finally:
            cur.close()

    async def get_nodes(
        self, namespace: str, scope: str, ids: Sequence[str]
    ) -> dict[str, CausalNode]:
        return await self._call(self._get_nodes, namespace, scope, list(ids))

    def _get_nodes(self, namespace: str, scope: str, ids: list[str]) -> dict[str, CausalNode]:
        sid = self._sid(namespace, scope)
        if sid is None:
            return {}
        raw: list[bytes] = []
        for i in dict.fromkeys(ids):
            try:
                if len(i) == 27 and i.startswith("cw_"):
                    raw.append(bytes.fromhex(i[3:]))
            except (TypeError, ValueError):
                continue  # not an id: it cannot be stored, so it is simply missing
        out: dict[str, CausalNode] = {}
        for j in range(0, len(raw), _IN_CHUNK):
            chunk = raw[j : j + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._c.execute(
                f"SELECT {_NODE_COLS} FROM tether_nodes WHERE k >> 32 = ? AND id IN ({marks})",
                (sid, *chunk),
            ).fetchall()
            for node in self._decode(namespace, scope, rows):
                out[node.id] = node
        return {i: out[i] for i in ids if i in out}

    async def resource_head(self, namespace: str, scope: str, key: str) -> CausalNode | None:
        return await self._call(self._resource_head, namespace, scope, key)

    def _resource_head(self, namespace: str, scope: str, key: str) -> CausalNode | None:
        sid = self._sid(namespace, scope)
        if sid is None:
            return None
        row = self._c.execute(
            f"SELECT {_NODE_COLS} FROM tether_nodes WHERE k = {_HEAD.format(sid='?', key='?')}",
            (sid, key),
        ).fetchone()
        return None if row is None else self._node(namespace, scope, row)

    async def resource_heads(
        self, namespace: str, scope: str, prefix: str = ""
    ) -> dict[str, CausalNode]:
        return await self._call(self._resource_heads, namespace, scope, prefix)

    def _resource_heads(self, namespace: str, scope: str, prefix: str) -> dict[str, CausalNode]:
        sid = self._sid(namespace, scope)
        if sid is None:
            return {}
        sql, params = _heads_sql(sid, prefix)
        # the walk yields keys in order; sorted all the same, as the contract says
        rows = sorted(self._c.execute(sql, params).fetchall(), key=lambda r: r[0])
        nodes = self._decode(namespace, scope, [r[1:] for r in rows])
        return {r[0]: n for r, n in zip(rows, nodes, strict=True)}

    async def _raw_heads_across(
        self, namespace: str, key_prefix: str, scope_prefix: str, after: Any, limit: int
    ) -> list[RawHead]:
        return await self._call(self._across, namespace, key_prefix, scope_prefix, after, limit)

    def _across(
        self, ns: str, key_prefix: str, scope_prefix: str, after: Any, limit: int
    ) -> list[RawHead]:
        sql, params = _across_sql(ns, key_prefix, scope_prefix, after, limit)
        if sql is None:
            return []
        rows = self._c.execute(sql, params).fetchall()
        kinds, unpack = KIND_CODES, unpack_ids
        text = CreatedAtTexts()
        out: list[RawHead] = [
            (sc, key, "cw_" + i.hex(), kinds[k], unpack(ps), text[c], q, rk, p)
            for sc, key, q, i, k, ps, c, rk, p in rows
        ]
        # The page is the walk's first rows, so its order is the walk's: were it ever
        # out of (scope, key) order, a page would not be the next one. Say so.
        if any((a[0], a[1]) >= (b[0], b[1]) for a, b in itertools.pairwise(out)):
            raise StoreError("resource_heads_across: the walk left (scope, key) order")
        return out

    async def versions(
        self, namespace: str, scope: str, key: str, *, limit: int = 1000
    ) -> list[CausalNode]:
        return await self._call(self._versions, namespace, scope, key, limit)

    def _versions(self, namespace: str, scope: str, key: str, limit: int) -> list[CausalNode]:
        sid = self._sid(namespace, scope)
        if sid is None or limit <= 0:
            return []
        rows = self._c.execute(
            f"SELECT {_NODE_COLS} FROM tether_nodes WHERE k >> 32 = ? AND rkey = ?"
            " ORDER BY k LIMIT ?",
            (sid, key, limit),
        ).fetchall()
        return self._decode(namespace, scope, rows)

    async def list_namespaces(self, *, after: str | None = None, limit: int = 100) -> list[str]:
        return await self._call(self._list_namespaces, after, limit)

    def _list_namespaces(self, after: str | None, limit: int) -> list[str]:
        if limit <= 0:
            return []
        # A skip scan over the partial index of live scopes: one seek per namespace
        # returned, however many scopes each holds.
        rows = self._c.execute(
            "WITH RECURSIVE ns(name) AS ("
            " SELECT (SELECT min(ns) FROM tether_scopes WHERE live = 1 AND ns > ?)"
            " UNION ALL"
            " SELECT (SELECT min(ns) FROM tether_scopes WHERE live = 1 AND ns > ns.name)"
            " FROM ns WHERE ns.name IS NOT NULL"
            ") SELECT name FROM ns WHERE name IS NOT NULL LIMIT ?",
            ("" if after is None else after, limit),
        ).fetchall()  # ``ns > ''`` when no ``after``: names are never empty
        return [r[0] for r in rows]

    async def list_scopes(
        self, namespace: str, *, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[ScopeInfo]:
        return await self._call(self._list_scopes, namespace, prefix, after, limit)

    def _list_scopes(
        self, namespace: str, prefix: str, after: str | None, limit: int
    ) -> list[ScopeInfo]:
        if limit <= 0:
            return []
        c = self._c
        lower = prefix if after is None or after < prefix else after
        op = ">=" if after is None or after < prefix else ">"
        sql = (
            "SELECT sid, scope, generation FROM tether_scopes"
            f" WHERE ns = ? AND live = 1 AND scope {op} ?"
        )
        params: tuple[Any, ...] = (namespace, lower)
        upper = prefix_upper(prefix)
        if upper is not None:
            sql += " AND scope < ?"
            params += (upper,)
        c.execute("BEGIN")
        try:
            rows = c.execute(sql + " ORDER BY scope LIMIT ?", (*params, limit)).fetchall()
            out = []
            for sid, scope, generation in rows:
                out.append(
                    ScopeInfo(scope=scope, generation=generation, sequence=self._sequence(sid))
                )
        finally:
            c.execute("COMMIT")
        return out

    async def stats(self, namespace: str, scope: str) -> ScopeStats:
        return await self._call(self._stats, namespace, scope)

    def _stats(self, namespace: str, scope: str) -> ScopeStats:
        sid = self._sid(namespace, scope)
        if sid is None:
            return ScopeStats(nodes=0, payload_bytes=0, kinds={})
        rows = self._c.execute(
            "SELECT kind, count(*), sum(length(payload)) FROM tether_nodes"
            " WHERE k BETWEEN ? AND ? GROUP BY kind",
            (sid << 32, (sid << 32) | _LOW),
        ).fetchall()
        return ScopeStats(
            nodes=sum(r[1] for r in rows),
            payload_bytes=sum(r[2] or 0 for r in rows),
            kinds={KIND_CODES[r[0]]: r[1] for r in rows},
        )

    # -- closing -----------------------------------------------------------------

    async def keystore(self) -> KeyStore:
        if self.path == ":memory:":  # the keys live as long as this connection's data
            if self._memory_keys is None:
                self._memory_keys = MemoryKeyStore()
            return self._memory_keys
        from ._sqlite_keys import SQLiteKeyStore

        # A connection of its own (secure_delete, synchronous=FULL), same file.
        return SQLiteKeyStore(self.path, busy_timeout=self.busy_timeout)

    async def holds_keys(self) -> bool:
        if self.path == ":memory:":
            return self._memory_keys is not None and bool(await self._memory_keys.checks())
        return await self._call(self._holds_checks)

    def _holds_checks(self) -> bool:
        # Here, not in _sqlite_keys: every open of a plaintext file asks, and importing
        # the key table's module for two statements was most of an open's cost.
        q = self._q
        if not q.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tether_crypto_checks'"
        ).fetchone():
            return False
        return q.execute("SELECT 1 FROM tether_crypto_checks LIMIT 1").fetchone() is not None

    def vector_table(self) -> VectorTable | None:
        if self.path == ":memory:":
            return None
        if self._vectors is None:
            from ._sqlite_vectors import SQLiteVectorTable

            # A connection of its own, same file, tables tether_recall_*.
            self._vectors = SQLiteVectorTable(self.path, busy_timeout=self.busy_timeout)
        return self._vectors

    async def close(self) -> None:
        vectors, self._vectors = self._vectors, None
        if vectors is not None:
            await vectors.close()
        conn, self._conn = self._conn, None
        executor, self._executor = self._executor, None
        if conn is not None:
            if executor is not None:
                # The connection is used on the executor's thread: close it there, after
                # whatever is still queued.
                await asyncio.get_running_loop().run_in_executor(executor, self._close, conn)
            else:
                self._close(conn)
        if executor is not None:
            executor.shutdown(wait=True)

    def _close(self, conn: sqlite3.Connection) -> None:
        with self._lock:  # never under another thread's call
            conn.close()


class _Prepared:
    __slots__ = ("frontier", "generation", "rows", "scope", "sequence")

    def __init__(
        self,
        scope: str,
        generation: int,
        sequence: int,
        rows: list[tuple[Any, ...]],
        frontier: tuple[str, ...],
    ) -> None:
        self.scope = scope
        self.generation = generation
        self.sequence = sequence
        self.rows = rows
        self.frontier = frontier
