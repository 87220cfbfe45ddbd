"""The PostgreSQL backend (``postgresql://user@host/db``, extra ``postgres``).

Many processes and machines on one database. Design, and why:

* **asyncpg with a pool** (``min_size``/``max_size`` options, default 1..10). At
  exhaustion a call waits up to ``pool_timeout`` seconds (default 30) for a free
  connection, then raises ``StoreError(code="pool_timeout")`` having sent nothing.
  The pool belongs to the event loop that opened the store: a call from another
  loop (another thread's) raises ``StoreError(code="wrong_event_loop")`` at once;
  open one store per thread there (``tether.store._pools``).
* **One round trip per commit**: ``tether_commit`` (PL/pgSQL, see
  ``_postgres_schema``) checks and moves every scope head with a conditional
  ``UPDATE`` (the row lock serialises writers of a scope; a stale head updates
  nothing and raises SQLSTATE TT409, turned into ``Conflict``), then inserts all
  node rows and resource heads from arrays. It runs as one statement, so it is
  atomic; a duplicate node id trips a unique index and nothing is written.
* **Isolated schemas**: ``?schema=name`` in the URL (or ``schema=``) puts the
  tables in their own PostgreSQL schema (default ``public``); migrations run under
  an advisory lock, so processes opening at once are safe.
* **Durability**: the server's; ``durability="normal"`` sets
  ``synchronous_commit=off`` on this store's connections (a server crash may lose
  the last commits, never corrupt).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from ..core.errors import Conflict, InvalidRequest, StoreError
from ..core.graph import CausalNode, new_node
from ._pools import (
    DEFAULT_POOL_TIMEOUT,
    parse_timeout,
    pg_broken,
    pg_connection,
    pg_unavailable,
)
from ._postgres_schema import LATEST, MIGRATIONS
from ._sql import (
    KIND_CODE,
    KIND_CODES,
    CreatedAtTexts,
    across_sql,
    created_at_value,
    pack_ids,
    prefix_upper,
    unpack_ids,
)
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
    conflict,
)
from .keys import KeyStore
from .vectors import VectorTable

T = TypeVar("T")

_SCHEMA_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_OPTIONS: Final = frozenset(
    {"schema", "min_size", "max_size", "durability", "command_timeout", "pool_timeout"}
)
_NO_UPPER: Final = 2**62
_NODE_COLS: Final = (
    "n.seq, n.id, n.kind, n.parents, n.created_ms, n.created_text, n.rkey, n.payload"
)
# Nodes by id, as one index probe per id. ``n.sid = ... AND n.id = ANY($3)`` leaves
# the choice to the planner, and while a table's statistics are stale (a new or fast
# growing table: autovacuum analyzes it later) its generic plan, which asyncpg's
# prepared statements end up with, scanned every node of the scope on (sid) and
# filtered the ids: a look-up that grew with the thread (4 ms at 8,000 nodes). A
# LATERAL subquery with LIMIT is never flattened into a join, so each id is an
# equality on the whole unique index, whatever the statistics.
_BY_IDS: Final = (
    f"SELECT {_NODE_COLS} FROM unnest($3::bytea[]) AS want(id) CROSS JOIN LATERAL"
    " (SELECT * FROM {nodes} x WHERE x.sid = {sid} AND x.id = want.id LIMIT 1) n"
)
_RETRY_SQLSTATES: Final = frozenset({"40001", "40P01"})  # serialization failure, deadlock
# Seconds a read goes on retrying a lost connection (a restart, a terminated backend),
# and a commit whose connection failed goes on looking for its outcome.
READ_RETRY: Final = 5.0


def parse_url(url: str) -> tuple[str, dict[str, str]]:
    """Split tether's options (``schema``, pool sizes...) off a PostgreSQL URL."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("postgresql", "postgres"):
        raise InvalidRequest(f"not a PostgreSQL URL: {url!r}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in _OPTIONS}
    rest = [(k, v) for k, v in query if k not in _OPTIONS]
    dsn = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(rest), parts.fragment))
    return dsn, ours


def _lock_key(schema: str) -> int:
    # A stable signed 64-bit advisory lock key per schema.
    return int.from_bytes(
        hashlib.sha256(f"tether:{schema}".encode()).digest()[:8], "big", signed=True
    )


class PostgresStore(Store):
    """Open with ``await tether.open_store("postgresql://user@host/db?schema=tether")``."""

    def __init__(
        self,
        url: str,
        pool: Any,
        *,
        schema: str,
        codec: PayloadCodec | None,
        durability: str = "full",
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
    ) -> None:
        super().__init__(codec=codec)
        self.url = url
        self.schema = schema
        self.durability = durability
        self.pool_timeout = pool_timeout
        self._pool: Any = pool
        self._vectors: VectorTable | None = None  # the recall index, made on first use
        s = f'"{schema}"'
        sid = f"(SELECT sid FROM {s}.tether_scopes WHERE ns = $1 AND scope = $2)"
        self._q = {
            "commit": f"SELECT {s}.tether_commit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,"
            " $13, $14, $15, $16)",
            "reset": f"SELECT {s}.tether_reset($1, $2)",
            "delete_ns": f"SELECT {s}.tether_delete_namespace($1)",
            "head": f"SELECT generation, sequence, frontier FROM {s}.tether_scopes"
            " WHERE ns = $1 AND scope = $2",
            "sid": sid,
            "nodes": f"{s}.tether_nodes",
            "heads": f"{s}.tether_resource_heads",
            "scopes": f"{s}.tether_scopes",
            # The nodes of a scope ($1, $2) whose ids are in $3, one probe of the unique
            # (sid, id) index per id (``_BY_IDS``).
            "by_ids": _BY_IDS.format(nodes=f"{s}.tether_nodes", sid=sid),
        }

    # -- opening -----------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        codec: PayloadCodec | None = None,
        schema: str | None = None,
        min_size: int | None = None,
        max_size: int | None = None,
        durability: str | None = None,
        command_timeout: float | None = None,
        pool_timeout: float | None = None,
        **connect_options: Any,
    ) -> PostgresStore:
        """Connect a pool and bring the schema up to date.

        ``schema``: the PostgreSQL schema holding tether's tables (default ``public``).
        ``min_size``/``max_size``: the pool's bounds (default 1 and 10).
        ``pool_timeout``: seconds a call waits for a free connection when all
        ``max_size`` are busy (default 30), then ``StoreError(code="pool_timeout")``.
        ``durability``: ``"full"`` (the server's setting) or ``"normal"``
        (``synchronous_commit=off``). Other keyword options go to ``asyncpg.create_pool``.
        """
        try:
            import asyncpg
        except ImportError as e:  # pragma: no cover - the extra is installed in dev
            raise StoreError(
                "PostgreSQL needs asyncpg: pip install 'tether[postgres]'",
                code="store_unavailable",
            ) from e
        dsn, query = parse_url(url)
        schema = schema or query.get("schema") or "public"
        if not _SCHEMA_NAME.fullmatch(schema):
            raise InvalidRequest(
                f"schema must be a plain identifier (letters, digits, _), got {schema!r}",
                field="schema",
            )
        durability = durability or query.get("durability", "full")
        if durability not in ("full", "normal"):
            raise InvalidRequest(
                f"durability must be 'full' or 'normal', got {durability!r}", field="durability"
            )
        try:
            lo = int(min_size if min_size is not None else query.get("min_size", 1))
            hi = int(max_size if max_size is not None else query.get("max_size", 10))
            timeout = command_timeout or (
                float(query["command_timeout"]) if "command_timeout" in query else None
            )
        except ValueError:
            raise InvalidRequest("min_size, max_size and command_timeout are numbers") from None
        wait = parse_timeout(
            pool_timeout
            if pool_timeout is not None
            else query.get("pool_timeout", DEFAULT_POOL_TIMEOUT)
        )
        settings = dict(connect_options.pop("server_settings", None) or {})
        if durability == "normal":
            settings["synchronous_commit"] = "off"
        # asyncpg resets a connection on every release with a server round trip
        # (RESET ALL, UNLISTEN *, advisory unlock...), which doubled the cost of a
        # commit. This store leaves no session state behind (no SET, LISTEN, cursors
        # or session locks; its advisory lock is transaction-scoped), so the reset is
        # a no-op; asyncpg still rolls back a transaction left open.
        connect_options.setdefault("reset", _keep_session)
        # Likewise, closing idle connections re-arms a timer on every release (~30 us a
        # call here); a store's pool is small (max_size), so idle ones are kept.
        connect_options.setdefault("max_inactive_connection_lifetime", 0)
        try:
            pool = await asyncpg.create_pool(
                dsn,
                min_size=min(lo, hi),
                max_size=hi,
                command_timeout=timeout,
                server_settings=settings or None,
                **connect_options,
            )
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as e:
            raise StoreError(
                f"cannot connect to PostgreSQL at {_redact(dsn)}: {e}", code="store_unavailable"
            ) from e
        store = cls(url, pool, schema=schema, codec=codec, durability=durability, pool_timeout=wait)
        try:
            await store._migrate()
        except BaseException:
            await store.close()
            raise
        return store

    async def _migrate(self) -> None:
        if await self._schema_version() == LATEST:
            return
        s = f'"{self.schema}"'

        async def run(conn: Any) -> None:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(self.schema))
                exists = await conn.fetchval(
                    "SELECT 1 FROM pg_namespace WHERE nspname = $1", self.schema
                )
                if not exists:
                    await conn.execute(f"CREATE SCHEMA {s}")
                table = await conn.fetchval("SELECT to_regclass($1)", f"{s}.tether_schema")
                if table is None:
                    await conn.execute(
                        f"CREATE TABLE {s}.tether_schema (version int PRIMARY KEY,"
                        " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
                    )
                version = await conn.fetchval(
                    f"SELECT coalesce(max(version), 0) FROM {s}.tether_schema"
                )
                if version > LATEST:
                    raise StoreError(
                        f"schema {self.schema!r} is at version {version}, newer than this "
                        f"tether knows ({LATEST}); upgrade tether",
                        code="schema_too_new",
                    )
                for m in MIGRATIONS:
                    if m.version > version:
                        for stmt in m.statements:
                            await conn.execute(stmt.format(s=s))
                        await conn.execute(
                            f"INSERT INTO {s}.tether_schema (version, name) VALUES ($1, $2)",
                            m.version,
                            m.name,
                        )

        await self._with_conn(run)

    async def _schema_version(self) -> int:
        async def read(conn: Any) -> int:
            table = await conn.fetchval("SELECT to_regclass($1)", f'"{self.schema}".tether_schema')
            if table is None:
                return 0
            v = await conn.fetchval(
                f'SELECT coalesce(max(version), 0) FROM "{self.schema}".tether_schema'
            )
            return int(v)

        return await self._with_conn(read, read=True)

    async def schema_version(self) -> int:
        """The newest migration applied to this schema."""
        return await self._schema_version()

    # -- plumbing ----------------------------------------------------------------

    @property
    def _p(self) -> Any:
        if self._pool is None:
            raise StoreError("this store is closed; open a new one with tether.open_store")
        return self._pool

    async def _with_conn(
        self, fn: Callable[[Any], Awaitable[T]], *, read: bool = False, commit: bool = False
    ) -> T:
        """Run ``fn(connection)``; retry deadlocks and serialization failures; map errors.

        Every failure becomes a tether error with its code (``_pg_error``). ``read``:
        ``fn`` only reads, so a lost connection is retried for up to ``READ_RETRY``
        seconds (a restart, a terminated backend) before ``store_unavailable``.
        ``commit``: a failure after the statement was sent is ``commit_unknown``.
        """
        import asyncpg

        deadline = time.monotonic() + READ_RETRY
        attempt = 0
        while True:
            attempt += 1
            try:
                async with pg_connection(self._p, self.pool_timeout) as conn:
                    return await fn(conn)
            except StoreError as e:
                # Not reached: nothing sent (pg_connection). A read may try again.
                if read and e.code == "store_unavailable" and time.monotonic() < deadline:
                    await asyncio.sleep(min(0.5, 0.02 * 2**attempt))
                    continue
                raise
            except (Conflict, InvalidRequest):
                raise
            except asyncpg.PostgresError as e:
                if getattr(e, "sqlstate", None) in _RETRY_SQLSTATES and attempt < 5:
                    await asyncio.sleep(0.001 * 2**attempt)
                    continue
                if read and pg_unavailable(e) and time.monotonic() < deadline:
                    await asyncio.sleep(min(0.5, 0.02 * 2**attempt))
                    continue
                raise self._pg_error(e, commit=commit) from e
            except Exception as e:
                if read and pg_unavailable(e) and time.monotonic() < deadline:
                    await asyncio.sleep(min(0.5, 0.02 * 2**attempt))
                    continue
                raise self._pg_error(e, commit=commit) from e

    def _pg_error(self, e: Exception, *, commit: bool = False) -> Exception:
        """The tether error a failed call becomes (never a raw asyncpg exception)."""
        if isinstance(e, TimeoutError):  # command_timeout (a TimeoutError is also an OSError)
            if commit:
                return _unknown(e, "the commit did not answer within command_timeout")
            return StoreError(
                "PostgreSQL did not answer within command_timeout; raise it, or look "
                "for a lock held by another session",
                code="timeout",
            )
        if pg_unavailable(e) or pg_broken(e):
            if commit:
                return _unknown(e, "the connection failed after the commit was sent")
            return StoreError(
                f"PostgreSQL connection failed ({type(e).__name__}: {e}); retry later",
                code="store_unavailable",
            )
        return self._error(e)

    def _error(self, e: Exception) -> Exception:
        if isinstance(e, Conflict | StoreError | InvalidRequest):
            return e
        return StoreError(f"PostgreSQL failed: {e}")

    def _node(self, namespace: str, scope: str, row: Any) -> CausalNode:
        return self._decode(namespace, scope, (row,))[0]

    def _decode(self, namespace: str, scope: str, rows: Iterable[Any]) -> list[CausalNode]:
        # The hot loop of long reads: locals, new_node (fields from rows this store
        # wrote), orjson directly for the default codec.
        codec = self.codec
        if type(codec) is JsonCodec:
            decode: Callable[[bytes], Any] = orjson.loads
        else:

            def decode(data: bytes) -> Any:
                return codec.decode(namespace, scope, data)

        kinds, unpack, node = KIND_CODES, unpack_ids, new_node
        text = CreatedAtTexts()
        return [
            node(
                "cw_" + id_.hex(),
                kinds[kind],
                unpack(parents),
                decode(payload),
                text[cms if ctext is None else ctext],
                seq,
                rkey,
            )
            for seq, id_, kind, parents, cms, ctext, rkey, payload in rows
        ]

    # -- writing -----------------------------------------------------------------

    async def _do_commit(self, namespace: str, writes: Sequence[ScopeWrite]) -> None:
        if not writes:
            return
        # Lock heads in one global order (scope name), as delete_namespace does, so
        # two multi-scope commits never wait on each other in a cycle.
        ordered = sorted(writes, key=lambda w: w.scope)
        args = self._commit_args(namespace, ordered)
        n_rkey = args[12]

        import asyncpg

        backend: list[int] = []  # the server process that ran the commit

        async def run(conn: Any) -> None:
            backend.append(conn.get_server_pid())
            try:
                await conn.execute(
                    self._q["commit"], namespace, *args, any(k is not None for k in n_rkey)
                )
            except asyncpg.UniqueViolationError as e:
                if getattr(e, "constraint_name", None) == "tether_nodes_id":
                    raise await self._duplicates(conn, namespace, ordered) from None
                raise Conflict(
                    f"a concurrent commit took the same sequences: reload and retry ({e})",
                    namespace=namespace,
                ) from None
            except asyncpg.PostgresError as e:
                if getattr(e, "sqlstate", None) != "TT409":
                    raise
                d = json.loads(e.detail or "{}")
                w = next(x for x in ordered if x.scope == d["scope"])
                raise conflict(
                    namespace,
                    w.scope,
                    (w.expected_generation, w.expected_sequence),
                    (int(d["generation"]), int(d["sequence"])),
                ) from None

        try:
            await self._with_conn(run, commit=True)
        except StoreError as e:
            if e.code != "commit_unknown" or not backend:
                raise
            # After a timeout asyncpg cancelled the statement and waited for its end
            # before the connection went back to the pool: no process to wait for.
            pid = None if isinstance(e.__cause__, TimeoutError) else backend[-1]
            landed = await self._settle(namespace, ordered, pid)
            if landed is None:
                raise
            if not landed:
                raise StoreError(
                    "PostgreSQL dropped the connection during the commit, and the commit "
                    "was not applied (its server process is gone, its nodes are not "
                    f"stored); nothing was written, retry ({e.message})",
                    code="store_unavailable",
                    committed=False,
                ) from e
            # Applied: the server process ended after writing every node.

    async def _settle(
        self, namespace: str, writes: Sequence[ScopeWrite], pid: int | None
    ) -> bool | None:
        """Whether a commit whose connection failed was applied: True, False, or None
        when that cannot be proven within ``READ_RETRY`` seconds.

        The proof: the server process that ran it is gone from ``pg_stat_activity``
        (it ended its transaction, committed or rolled back, before leaving), and
        then every node of the commit is stored (applied: commits are atomic) or not
        all are (not applied). While that process lives, its commit may still land.
        A pid reused by a new process after a restart only makes the answer None.
        """
        ids = [(w.scope, [bytes.fromhex(n.id[3:]) for n in w.nodes]) for w in writes if w.nodes]

        async def probe(conn: Any) -> bool | None:
            if pid is not None and await conn.fetchval(
                "SELECT 1 FROM pg_stat_activity WHERE pid = $1", pid
            ):
                return None
            for scope, want in ids:
                rows = await conn.fetch(self._q["by_ids"], namespace, scope, want)
                if len(rows) != len(want):
                    return False
            return True

        deadline = time.monotonic() + READ_RETRY
        while True:
            try:
                got = await self._with_conn(probe, read=True)
            except StoreError:
                got = None
            if got is not None or time.monotonic() > deadline:
                return got
            await asyncio.sleep(0.05)

    async def _do_prune(
        self, namespace: str, scope: str, expected: Head, cut: tuple[int, ...], write: ScopeWrite
    ) -> Head:
        args = self._commit_args(namespace, [write])
        s = self._q

        async def run(conn: Any) -> None:
            async with conn.transaction():
                row = await conn.fetchrow(
                    f"SELECT sid, generation, sequence FROM {s['scopes']}"
                    " WHERE ns = $1 AND scope = $2 FOR UPDATE",
                    namespace,
                    scope,
                )
                stand = (0, 0) if row is None else (row["generation"], row["sequence"])
                if row is None or stand != (expected.generation, expected.sequence):
                    raise conflict(
                        namespace, scope, (expected.generation, expected.sequence), stand
                    )
                await conn.execute(
                    f"DELETE FROM {s['nodes']} WHERE sid = $1 AND seq = ANY($2::bigint[])",
                    row["sid"],
                    list(cut),
                )
                # A key whose head was cut: its newest version left is its head (none
                # left: the key is gone).
                gone = await conn.fetch(
                    f"DELETE FROM {s['heads']} WHERE sid = $1 AND seq = ANY($2::bigint[])"
                    " RETURNING key",
                    row["sid"],
                    list(cut),
                )
                if gone:
                    await conn.execute(
                        f"INSERT INTO {s['heads']} (sid, key, seq)"
                        f" SELECT $1, rkey, max(seq) FROM {s['nodes']}"
                        " WHERE sid = $1 AND rkey = ANY($2::text[]) GROUP BY rkey",
                        row["sid"],
                        [r["key"] for r in gone],
                    )
                await conn.execute(
                    f"UPDATE {s['scopes']} SET generation = generation + 1 WHERE sid = $1",
                    row["sid"],
                )
                # The record, computed against the bumped generation (the lock is ours).
                await conn.execute(s["commit"], namespace, *args, True)

        await self._with_conn(run)
        return Head(
            generation=expected.generation + 1,
            sequence=expected.sequence + 1,
            frontier=write.frontier,
        )

    def _commit_args(self, namespace: str, ordered: Sequence[ScopeWrite]) -> list[list[Any]]:
        """``tether_commit``'s array arguments for ``ordered`` (sorted by scope)."""
        args: list[list[Any]] = [[] for _ in range(14)]
        (scopes, gens, seqs, counts, frontiers) = args[:5]
        (n_scope, n_seq, n_id, n_kind, n_parents, n_cms, n_ctext, n_rkey, n_payload) = args[5:]
        for i, w in enumerate(ordered, start=1):
            scopes.append(w.scope)
            gens.append(w.expected_generation)
            seqs.append(w.expected_sequence)
            # How far the sequence moves (the number of nodes, unless a sparse write's
            # holes are among them).
            counts.append(w.nodes[-1].sequence - w.expected_sequence if w.nodes else 0)
            frontiers.append(pack_ids(w.frontier))
            for n in w.nodes:
                n_scope.append(i)
                n_seq.append(n.sequence)
                n_id.append(bytes.fromhex(n.id[3:]))
                n_kind.append(KIND_CODE[n.kind])
                n_parents.append(pack_ids(n.parents))
                c = created_at_value(n.created_at)
                n_cms.append(c if isinstance(c, int) else None)
                n_ctext.append(c if isinstance(c, str) else None)
                n_rkey.append(n.resource_key)
                n_payload.append(self.codec.encode(namespace, w.scope, n.payload))
        return args

    async def _duplicates(
        self, conn: Any, namespace: str, writes: Sequence[ScopeWrite]
    ) -> Conflict:
        for w in writes:
            if not w.nodes:
                continue
            rows = await conn.fetch(
                self._q["by_ids"],
                namespace,
                w.scope,
                [bytes.fromhex(n.id[3:]) for n in w.nodes],
            )
            if rows:
                ids = ["cw_" + r["id"].hex() for r in rows]
                order = {n.id: i for i, n in enumerate(w.nodes)}
                ids.sort(key=lambda i: order.get(i, 0))
                return DuplicateNodes(
                    f"scope {w.scope!r} already holds {len(ids)} of these nodes",
                    namespace=namespace,
                    scope=w.scope,
                    ids=ids,
                )
        # The duplicates vanished meanwhile (a reset): the caller reloads and retries.
        return Conflict("a scope changed during the commit; reload and retry", namespace=namespace)

    async def _do_reset_scope(self, namespace: str, scope: str) -> Head:

        async def run(conn: Any) -> int:
            return int(await conn.fetchval(self._q["reset"], namespace, scope))

        return Head(generation=await self._with_conn(run))

    async def _do_reset_if(self, namespace: str, scope: str, expected: Head) -> Head:
        s = self._q

        async def run(conn: Any) -> int:
            async with conn.transaction():
                row = await conn.fetchrow(
                    f"SELECT generation, sequence FROM {s['scopes']}"
                    " WHERE ns = $1 AND scope = $2 FOR UPDATE",
                    namespace,
                    scope,
                )
                stand = (0, 0) if row is None else (row["generation"], row["sequence"])
                if stand != (expected.generation, expected.sequence):
                    raise conflict(
                        namespace, scope, (expected.generation, expected.sequence), stand
                    )
                return int(await conn.fetchval(s["reset"], namespace, scope))

        return Head(generation=await self._with_conn(run))

    async def _do_delete_namespace(self, namespace: str) -> int:

        async def run(conn: Any) -> int:
            return int(await conn.fetchval(self._q["delete_ns"], namespace))

        return await self._with_conn(run)

    # -- reading -----------------------------------------------------------------

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        async def run(conn: Any) -> list[Any]:
            return list(await conn.fetch(sql, *args))

        return await self._with_conn(run, read=True)

    async def head(self, namespace: str, scope: str) -> Head:
        rows = await self._fetch(self._q["head"], namespace, scope)
        if not rows:
            return Head()
        generation, sequence, frontier = rows[0]
        return Head(generation=generation, sequence=sequence, frontier=unpack_ids(frontier))

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
        if limit <= 0:
            return []
        order = "DESC" if descending else "ASC"
        rows = await self._fetch(
            f"SELECT {_NODE_COLS} FROM {self._q['nodes']} n WHERE n.sid = {self._q['sid']}"
            f" AND n.seq > $3 AND n.seq < $4 ORDER BY n.seq {order} LIMIT $5",
            namespace,
            scope,
            max(after, 0),
            _NO_UPPER if before is None else min(before, _NO_UPPER),
            limit,
        )
        return self._decode(namespace, scope, rows)

    async def get_nodes(
        self, namespace: str, scope: str, ids: Sequence[str]
    ) -> dict[str, CausalNode]:
        raw: list[bytes] = []
        for i in dict.fromkeys(ids):
            try:
                if isinstance(i, str) and len(i) == 27 and i.startswith("cw_"):
                    raw.append(bytes.fromhex(i[3:]))
            except ValueError:
                continue  # not an id: it cannot be stored, so it is simply missing
        if not raw:
            return {}
        rows = await self._fetch(
            self._q["by_ids"],
            namespace,
            scope,
            raw,
        )
        found = {(n := self._node(namespace, scope, r)).id: n for r in rows}
        return {i: found[i] for i in ids if i in found}

    async def resource_head(self, namespace: str, scope: str, key: str) -> CausalNode | None:
        rows = await self._fetch(
            f"SELECT {_NODE_COLS} FROM {self._q['heads']} r"
            f" JOIN {self._q['nodes']} n ON n.sid = r.sid AND n.seq = r.seq"
            f" WHERE r.sid = {self._q['sid']} AND r.key = $3",
            namespace,
            scope,
            key,
        )
        return self._node(namespace, scope, rows[0]) if rows else None

    async def resource_heads(
        self, namespace: str, scope: str, prefix: str = ""
    ) -> dict[str, CausalNode]:
        upper = prefix_upper(prefix)
        sql = (
            f"SELECT r.key, {_NODE_COLS} FROM {self._q['heads']} r"
            f" JOIN {self._q['nodes']} n ON n.sid = r.sid AND n.seq = r.seq"
            f" WHERE r.sid = {self._q['sid']} AND r.key >= $3"
        )
        args: list[Any] = [namespace, scope, prefix]
        if upper is not None:
            sql += " AND r.key < $4"
            args.append(upper)
        rows = await self._fetch(sql + " ORDER BY r.key", *args)
        return {r[0]: self._node(namespace, scope, tuple(r)[1:]) for r in rows}

    async def _raw_heads_across(
        self, namespace: str, key_prefix: str, scope_prefix: str, after: Any, limit: int
    ) -> list[RawHead]:
        # The namespace's scopes in order (the (ns, scope) unique index), each one's heads
        # by key (the (sid, key) primary key): one probe per scope, nothing else scanned.
        sql, args = across_sql(
            f"SELECT s.scope, r.key, {_NODE_COLS} FROM {self._q['scopes']} s"
            f" JOIN {self._q['heads']} r ON r.sid = s.sid"
            f" JOIN {self._q['nodes']} n ON n.sid = r.sid AND n.seq = r.seq"
            " WHERE s.ns = $1 AND s.sequence > 0",
            "$",
            namespace,
            key_prefix,
            scope_prefix,
            after,
        )
        rows = await self._fetch(
            sql + f" ORDER BY s.scope, r.key LIMIT ${len(args) + 1}", *args, limit
        )
        kinds, unpack = KIND_CODES, unpack_ids
        text = CreatedAtTexts()
        return [
            (
                sc,
                key,
                "cw_" + i.hex(),
                kinds[k],
                unpack(ps),
                text[cms if ct is None else ct],
                q,
                rk,
                p,
            )
            for sc, key, q, i, k, ps, cms, ct, rk, p in rows
        ]

    async def versions(
        self, namespace: str, scope: str, key: str, *, limit: int = 1000
    ) -> list[CausalNode]:
        if limit <= 0:
            return []
        rows = await self._fetch(
            f"SELECT {_NODE_COLS} FROM {self._q['nodes']} n WHERE n.sid = {self._q['sid']}"
            " AND n.rkey = $3 ORDER BY n.seq LIMIT $4",
            namespace,
            scope,
            key,
            limit,
        )
        return [self._node(namespace, scope, r) for r in rows]

    async def list_namespaces(self, *, after: str | None = None, limit: int = 100) -> list[str]:
        if limit <= 0:
            return []
        t = self._q["scopes"]
        # A skip scan over the (ns, scope) index: one probe per namespace returned.
        rows = await self._fetch(
            "WITH RECURSIVE ns(name) AS ("
            f" SELECT (SELECT min(ns) FROM {t} WHERE ns > $1 AND sequence > 0)"
            " UNION ALL"
            f" SELECT (SELECT min(s.ns) FROM {t} s WHERE s.ns > ns.name AND s.sequence > 0)"
            " FROM ns WHERE ns.name IS NOT NULL"
            ") SELECT name FROM ns WHERE name IS NOT NULL LIMIT $2",
            "" if after is None else after,
            limit,
        )
        return [r[0] for r in rows]

    async def list_scopes(
        self, namespace: str, *, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[ScopeInfo]:
        if limit <= 0:
            return []
        lower, op = (prefix, ">=") if after is None or after < prefix else (after, ">")
        sql = (
            f"SELECT scope, generation, sequence FROM {self._q['scopes']}"
            f" WHERE ns = $1 AND scope {op} $2 AND sequence > 0"
        )
        args: list[Any] = [namespace, lower]
        upper = prefix_upper(prefix)
        if upper is not None:
            sql += " AND scope < $3"
            args.append(upper)
        rows = await self._fetch(sql + f" ORDER BY scope LIMIT ${len(args) + 1}", *args, limit)
        return [ScopeInfo(scope=r[0], generation=r[1], sequence=r[2]) for r in rows]

    async def stats(self, namespace: str, scope: str) -> ScopeStats:
        rows = await self._fetch(
            f"SELECT n.kind, count(*), sum(length(n.payload)) FROM {self._q['nodes']} n"
            f" WHERE n.sid = {self._q['sid']} GROUP BY n.kind",
            namespace,
            scope,
        )
        return ScopeStats(
            nodes=sum(int(r[1]) for r in rows),
            payload_bytes=sum(int(r[2] or 0) for r in rows),
            kinds={KIND_CODES[r[0]]: int(r[1]) for r in rows},
        )

    # -- closing -----------------------------------------------------------------

    async def keystore(self) -> KeyStore:
        from ._postgres_keys import PostgresKeyStore

        return PostgresKeyStore(
            self._pool, schema=self.schema, owned=False, pool_timeout=self.pool_timeout
        )

    def vector_table(self) -> VectorTable | None:
        if self._vectors is None and self._pool is not None:
            from ._postgres_vectors import PostgresVectorTable

            # Tables tether_recall_* in the store's schema, on the store's pool.
            self._vectors = PostgresVectorTable(
                self._pool, schema=self.schema, pool_timeout=self.pool_timeout
            )
        return self._vectors

    async def holds_keys(self) -> bool:
        from ._postgres_keys import PostgresKeyStore

        return await PostgresKeyStore(
            self._pool, schema=self.schema, owned=False, pool_timeout=self.pool_timeout
        ).has_checks()

    async def close(self) -> None:
        vectors, self._vectors = self._vectors, None
        if vectors is not None:
            await vectors.close()
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


async def _keep_session(conn: Any) -> None:
    """The pool's reset hook: nothing to undo (see ``PostgresStore.open``)."""


def _unknown(e: BaseException, why: str) -> StoreError:
    return StoreError(
        f"PostgreSQL commit outcome unknown: {why} ({type(e).__name__}: {e}). It may or "
        "may not have been applied: read the scope before committing again (its nodes "
        "are there, or none is)",
        code="commit_unknown",
        committed=None,
    )


def _redact(dsn: str) -> str:
    parts = urlsplit(dsn)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return dsn
