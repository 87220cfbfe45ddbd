"""The key table in a SQLite store's file, on a connection of its own.

Same file, separate tables (``tether_crypto_*``), so the keys travel with the
data they open (a backup of the file holds both, and neither opens without the
master key). Like the SQLite backend, calls run inline (each is one short
statement or transaction) and ``SQLITE_BUSY`` is retried with an async backoff.
``secure_delete`` is on for this connection, so an erased wrapped key is zeroed in
its page, and erasure checkpoints the WAL so the old page image does not linger
there either (best effort: a concurrent reader can delay the checkpoint).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final, TypeVar

from ..core.errors import StoreError
from ..core.graph import now_iso
from ._sqlite_busy import retry_busy
from .keys import KeyStore, WrappedKey

T = TypeVar("T")

# Append-only: never edit a shipped migration, add the next one.
MIGRATIONS: Final[tuple[tuple[int, tuple[str, ...]], ...]] = (
    (
        1,
        (
            "CREATE TABLE tether_crypto_checks (master_id TEXT PRIMARY KEY,"
            " value BLOB NOT NULL, created_at TEXT NOT NULL)",
            "CREATE TABLE tether_crypto_keys (key_id BLOB PRIMARY KEY, ns TEXT NOT NULL,"
            " owner TEXT NOT NULL, master_id TEXT NOT NULL, wrapped BLOB,"
            " created_at TEXT NOT NULL, erased_at TEXT)",
            "CREATE INDEX tether_crypto_keys_owner ON tether_crypto_keys (ns, owner)",
            "CREATE UNIQUE INDEX tether_crypto_keys_live ON tether_crypto_keys (ns, owner)"
            " WHERE wrapped IS NOT NULL",
            "CREATE TABLE tether_crypto_threads (ns TEXT NOT NULL, thread TEXT NOT NULL,"
            " user_id TEXT NOT NULL, PRIMARY KEY (ns, thread))",
            "CREATE INDEX tether_crypto_threads_user ON tether_crypto_threads (ns, user_id)",
        ),
    ),
)
LATEST: Final = MIGRATIONS[-1][0]
_COLS: Final = "ns, owner, key_id, master_id, wrapped, created_at, erased_at"


def _row(r: tuple[Any, ...]) -> WrappedKey:
    return WrappedKey(
        namespace=r[0],
        owner=r[1],
        key_id=bytes(r[2]),
        master_id=r[3],
        wrapped=None if r[4] is None else bytes(r[4]),
        created_at=r[5],
        erased_at=r[6],
    )


class SQLiteKeyStore(KeyStore):
    def __init__(self, path: str, *, busy_timeout: float = 30.0) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=0.0
        )
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA secure_delete=ON")
        self._ready = False

    @property
    def _c(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("this key store is closed; open the store again")
        return self._conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        async def attempt() -> T:
            # One call (one transaction) at a time on the connection, whatever thread
            # or event loop it comes from.
            with self._lock:
                c = self._c
                try:
                    return fn(c)
                except BaseException:
                    if c.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            c.execute("ROLLBACK")
                    raise

        return await retry_busy(
            attempt, path=self.path, busy_timeout=self.busy_timeout, what="SQLite key table"
        )

    @staticmethod
    def _tx(c: sqlite3.Connection, body: Callable[[sqlite3.Connection], T]) -> T:
        c.execute("BEGIN IMMEDIATE")
        out = body(c)
        c.execute("COMMIT")
        return out

    @staticmethod
    def _version(c: sqlite3.Connection) -> int:
        if not c.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tether_crypto_schema'"
        ).fetchone():
            return 0
        return int(
            c.execute("SELECT coalesce(max(version), 0) FROM tether_crypto_schema").fetchone()[0]
        )

    def _migrate(self, c: sqlite3.Connection) -> None:
        # Called inside a write transaction, so two processes never migrate at once.
        version = self._version(c)
        if version > LATEST:
            raise StoreError(
                f"the key table of {self.path!r} has schema version {version}, newer than this "
                "tether knows; upgrade tether",
                code="schema_too_new",
            )
        if version < LATEST:
            c.execute(
                "CREATE TABLE IF NOT EXISTS tether_crypto_schema (version INTEGER PRIMARY KEY,"
                " applied_at TEXT NOT NULL)"
            )
            for v, statements in MIGRATIONS:
                if v > version:
                    for stmt in statements:
                        c.execute(stmt)
                    c.execute(
                        "INSERT INTO tether_crypto_schema (version, applied_at) VALUES (?, ?)",
                        (v, now_iso()),
                    )
        self._ready = True

    async def _write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        def run(c: sqlite3.Connection) -> T:
            def inner(c: sqlite3.Connection) -> T:
                if not self._ready:
                    self._migrate(c)
                return body(c)

            return self._tx(c, inner)

        return await self._run(run)

    # -- the contract ----------------------------------------------------------------

    async def checks(self) -> dict[str, bytes]:
        def read(c: sqlite3.Connection) -> dict[str, bytes]:
            if self._version(c) == 0:
                return {}
            return {
                m: bytes(v)
                for m, v in c.execute("SELECT master_id, value FROM tether_crypto_checks")
            }

        return await self._run(read)

    async def add_check(self, master_id: str, value: bytes, *, only_if_empty: bool) -> bool:
        def body(c: sqlite3.Connection) -> bool:
            if only_if_empty:
                rows = [r[0] for r in c.execute("SELECT master_id FROM tether_crypto_checks")]
                if rows:
                    return master_id in rows
            c.execute(
                "INSERT INTO tether_crypto_checks (master_id, value, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (master_id) DO NOTHING",
                (master_id, value, now_iso()),
            )
            return True

        return await self._write(body)

    async def remove_checks(self, *, keep: str) -> list[str]:
        def body(c: sqlite3.Connection) -> list[str]:
            gone = [
                r[0]
                for r in c.execute(
                    "SELECT master_id FROM tether_crypto_checks WHERE master_id <> ?", (keep,)
                )
            ]
            c.execute("DELETE FROM tether_crypto_checks WHERE master_id <> ?", (keep,))
            return gone

        return await self._write(body)

    async def load(
        self, namespace: str, owner: str, *, thread: str | None = None
    ) -> tuple[str | None, list[WrappedKey]]:
        def read(c: sqlite3.Connection) -> tuple[str | None, list[WrappedKey]]:
            bound = None
            if thread is not None:
                r = c.execute(
                    "SELECT user_id FROM tether_crypto_threads WHERE ns = ? AND thread = ?",
                    (namespace, thread),
                ).fetchone()
                bound = None if r is None else str(r[0])
            owners = (owner,) if bound is None else (owner, "user:" + bound)
            rows = c.execute(
                f"SELECT {_COLS} FROM tether_crypto_keys WHERE ns = ? AND owner IN "
                f"({', '.join('?' * len(owners))})",
                (namespace, *owners),
            ).fetchall()
            return bound, [_row(r) for r in rows]

        return await self._run(read)

    async def by_ids(self, namespace: str, key_ids: Sequence[bytes]) -> list[WrappedKey]:
        ids = list(key_ids)[:500]

        def read(c: sqlite3.Connection) -> list[WrappedKey]:
            rows = c.execute(
                f"SELECT {_COLS} FROM tether_crypto_keys WHERE ns = ? AND key_id IN "
                f"({', '.join('?' * len(ids))})",
                (namespace, *ids),
            ).fetchall()
            return [_row(r) for r in rows]

        return await self._run(read) if ids else []

    async def insert(self, key: WrappedKey) -> WrappedKey:
        def body(c: sqlite3.Connection) -> WrappedKey:
            c.execute(
                f"INSERT INTO tether_crypto_keys ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (
                    key.namespace,
                    key.owner,
                    key.key_id,
                    key.master_id,
                    key.wrapped,
                    key.created_at,
                    key.erased_at,
                ),
            )
            r = c.execute(
                f"SELECT {_COLS} FROM tether_crypto_keys WHERE ns = ? AND owner = ?"
                " AND wrapped IS NOT NULL",
                (key.namespace, key.owner),
            ).fetchone()
            return _row(r)

        return await self._write(body)

    async def erase(self, namespace: str, owner: str, *, erased_at: str) -> list[bytes]:
        def body(c: sqlite3.Connection) -> list[bytes]:
            ids = [
                bytes(r[0])
                for r in c.execute(
                    "SELECT key_id FROM tether_crypto_keys WHERE ns = ? AND owner = ?"
                    " AND wrapped IS NOT NULL",
                    (namespace, owner),
                )
            ]
            c.execute(
                "UPDATE tether_crypto_keys SET wrapped = NULL, erased_at = ?"
                " WHERE ns = ? AND owner = ? AND wrapped IS NOT NULL",
                (erased_at, namespace, owner),
            )
            return ids

        ids = await self._write(body)
        if ids:
            # Best effort: copy the zeroed page into the file and empty the WAL.
            with contextlib.suppress(sqlite3.Error):
                self._c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return ids

    async def rewrap(self, key: WrappedKey, *, wrapped: bytes, master_id: str) -> bool:
        def body(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "UPDATE tether_crypto_keys SET wrapped = ?, master_id = ?"
                " WHERE key_id = ? AND master_id = ? AND wrapped IS NOT NULL",
                (wrapped, master_id, key.key_id, key.master_id),
            )
            return cur.rowcount == 1

        return await self._write(body)

    async def wrapped_elsewhere(self, master_id: str) -> AsyncIterator[WrappedKey]:
        after = b""
        while True:

            def page(c: sqlite3.Connection, after: bytes = after) -> list[WrappedKey]:
                rows = c.execute(
                    f"SELECT {_COLS} FROM tether_crypto_keys WHERE key_id > ?"
                    " AND wrapped IS NOT NULL AND master_id <> ? ORDER BY key_id LIMIT 256",
                    (after, master_id),
                ).fetchall()
                return [_row(r) for r in rows]

            rows = await self._run(page)
            if not rows:
                return
            for r in rows:
                yield r
            after = rows[-1].key_id

    async def bind(self, namespace: str, thread: str, user: str) -> str:
        def body(c: sqlite3.Connection) -> str:
            c.execute(
                "INSERT INTO tether_crypto_threads (ns, thread, user_id) VALUES (?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (namespace, thread, user),
            )
            r = c.execute(
                "SELECT user_id FROM tether_crypto_threads WHERE ns = ? AND thread = ?",
                (namespace, thread),
            ).fetchone()
            return str(r[0])

        return await self._write(body)

    async def count_threads(self, namespace: str, user: str) -> int:
        def read(c: sqlite3.Connection) -> int:
            r = c.execute(
                "SELECT count(*) FROM tether_crypto_threads WHERE ns = ? AND user_id = ?",
                (namespace, user),
            ).fetchone()
            return int(r[0])

        return await self._run(read)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with self._lock:  # never under another thread's call
                conn.close()
