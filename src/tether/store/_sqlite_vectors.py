"""The recall index's vectors in a SQLite store's file, on a connection of their own.

Same file, separate tables (``tether_recall_*``), so a restart (or ``tether recall``
from a shell) finds the index where it left it instead of embedding every memory
again. Only for plaintext stores: ``EncryptedStore`` keeps the index out of the file
(``Store.vector_table`` is None there).

Searching: a scope's vectors are loaded once (one read transaction, with the mark)
into a ``HeldVectors`` numpy matrix and scanned there; a write through this table
moves the held matrix in place (only the rows it changed), a write by another process
(the mark moved under it) makes the next search reload. Measured: about 1 ms a search
of 10^4 vectors of 256 dimensions, where sqlite-vec's ``vec_distance_cosine`` over the
same rows in SQLite took 28 ms (SQLite reads each row's blob and calls the function
per row, then sorts; numpy does one matrix-vector product) and loading the scope is
cheaper than one sqlite-vec search. sqlite-vec (the ``recall`` extra) is therefore
only for what the process does not hold: a scope whose vectors alone exceed
``hold_bytes`` (``TETHER_RECALL_HOLD_MB``, 512 by default; 0 sends every search to
sqlite-vec) is scanned in SQLite, nothing of it kept in memory; held parts beyond the
budget are evicted, least recently searched first. ``searched_by`` says how the last
search ran ("held scan" or "sqlite-vec").

sqlite-vec is loaded on the index's connection with ``enable_load_extension`` where
Python's ``sqlite3`` has it; where it does not (a Python built without loadable
extensions, like pyenv's default), it is registered with ``sqlite3_auto_extension``
in the SQLite library that ``sqlite3`` itself uses (one process-wide registration:
every later connection gets sqlite-vec's functions). Where neither works, or
``TETHER_RECALL_SQLITE_VEC=0``, every scope is held, whatever its size. ``engine``
says whether sqlite-vec is there ("sqlite-vec") or not ("scan"). Both paths only
pick candidates; ``vectors.rescore`` orders them by exact score, so both return the
same hits with the same scores.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

from ..core.errors import StoreError
from ._sqlite_busy import retry_busy
from .vectors import HeldVectors, Mark, VectorEntry, VectorHit, VectorTable, margin, rescore

T = TypeVar("T")

SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS tether_recall_marks (ns TEXT NOT NULL, scope TEXT NOT NULL,"
    " space TEXT NOT NULL, generation INTEGER NOT NULL, sequence INTEGER NOT NULL,"
    " PRIMARY KEY (ns, scope, space))",
    "CREATE TABLE IF NOT EXISTS tether_recall_vectors (ns TEXT NOT NULL, scope TEXT NOT NULL,"
    " space TEXT NOT NULL, key TEXT NOT NULL, node TEXT NOT NULL, vector BLOB NOT NULL,"
    " PRIMARY KEY (ns, scope, space, key))",
)


_AUTO_LOCK = threading.Lock()
_auto: list[str] = []  # "" once sqlite-vec is registered with sqlite3_auto_extension, else why not


def _register_auto_extension() -> str:
    """Register sqlite-vec with ``sqlite3_auto_extension`` in the SQLite library Python's
    ``sqlite3`` is linked with; "" on success, else the reason."""
    with _AUTO_LOCK:
        if not _auto:
            try:
                import _sqlite3
                import ctypes

                import sqlite_vec

                lib = ctypes.CDLL(_sqlite3.__file__)
                base = sqlite_vec.loadable_path()  # without the suffix, as load_extension takes it
                path = next(
                    (base + x for x in ("", ".so", ".dylib", ".dll") if os.path.isfile(base + x)),
                    base,
                )
                ext = ctypes.CDLL(path)
                lib.sqlite3_auto_extension.argtypes = [ctypes.c_void_p]
                lib.sqlite3_auto_extension.restype = ctypes.c_int
                rc = lib.sqlite3_auto_extension(ctypes.cast(ext.sqlite3_vec_init, ctypes.c_void_p))
                _auto.append("" if rc == 0 else f"sqlite3_auto_extension returned {rc}")
            except Exception as e:  # no sqlite-vec, no symbol, no ctypes: the scan
                _auto.append(f"{type(e).__name__}: {e}")
        return _auto[0]


def _load_sqlite_vec(c: sqlite3.Connection) -> str:
    """Make sqlite-vec's functions available on ``c``; "" on success, else the reason."""
    try:
        import sqlite_vec
    except ImportError as e:
        return f"sqlite-vec is not installed ({e})"
    if hasattr(c, "enable_load_extension"):
        try:
            c.enable_load_extension(True)
            try:
                sqlite_vec.load(c)
            finally:
                c.enable_load_extension(False)
        except sqlite3.Error as e:
            return f"sqlite-vec did not load: {e}"
    try:
        c.execute("SELECT vec_version()").fetchone()
        return ""
    except sqlite3.Error as e:
        return f"sqlite-vec is not available on this connection: {e}"


class SQLiteVectorTable(VectorTable):
    """``use_sqlite_vec``: None (default) uses sqlite-vec when it loads, unless
    ``TETHER_RECALL_SQLITE_VEC=0``; False always scans in numpy; True refuses to open
    without it (``StoreError``)."""

    def __init__(
        self,
        path: str,
        *,
        busy_timeout: float = 30.0,
        use_sqlite_vec: bool | None = None,
        hold_bytes: int | None = None,
    ) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._require_vec = use_sqlite_vec is True
        if use_sqlite_vec is None:
            use_sqlite_vec = os.environ.get("TETHER_RECALL_SQLITE_VEC", "1") != "0"
        self._want_vec = use_sqlite_vec
        self.engine = "scan"  # "sqlite-vec" once the connection has it
        self.why_scan = "" if use_sqlite_vec else "sqlite-vec turned off"
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        if hold_bytes is None:
            hold_bytes = int(float(os.environ.get("TETHER_RECALL_HOLD_MB", "512")) * 2**20)
        self.hold_bytes = hold_bytes
        self.searched_by = ""  # how the last search ran: "held scan" or "sqlite-vec"
        # (ns, scope, space) -> its vectors at a mark, least recently searched first
        self._held: OrderedDict[tuple[str, str, str], HeldVectors] = OrderedDict()

    def _c(self) -> sqlite3.Connection:
        if self._conn is None:
            if self._want_vec and not hasattr(sqlite3.Connection, "enable_load_extension"):
                self.why_scan = _register_auto_extension()
            c = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=0.0
            )
            if self._want_vec:
                self.why_scan = self.why_scan or _load_sqlite_vec(c)
                self.engine = "scan" if self.why_scan else "sqlite-vec"
                if self._require_vec and self.why_scan:
                    c.close()
                    raise StoreError(
                        f"sqlite-vec was required for the recall index: {self.why_scan}",
                        code="recall_engine_unavailable",
                    )
            c.execute("PRAGMA synchronous=NORMAL")  # a projection: losing it costs a rebuild
            for stmt in SCHEMA:
                c.execute(stmt)
            self._conn = c
        return self._conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        async def attempt() -> T:
            # One call (one transaction) at a time on the connection, whatever thread
            # or event loop it comes from.
            with self._lock:
                c = self._c()
                try:
                    return fn(c)
                except BaseException:
                    if c.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            c.execute("ROLLBACK")
                    raise

        return await retry_busy(
            attempt, path=self.path, busy_timeout=self.busy_timeout, what="SQLite recall index"
        )

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        self._held.clear()
        if conn is not None:
            with self._lock:  # never under another thread's call
                conn.close()

    async def mark(self, namespace: str, scope: str, space: str) -> Mark | None:
        row = await self._run(
            lambda c: c.execute(
                "SELECT generation, sequence FROM tether_recall_marks"
                " WHERE ns = ? AND scope = ? AND space = ?",
                (namespace, scope, space),
            ).fetchone()
        )
        return None if row is None else Mark(generation=row[0], sequence=row[1])

    async def apply(
        self,
        namespace: str,
        scope: str,
        space: str,
        *,
        upserts: Sequence[VectorEntry],
        deletes: Sequence[str],
        mark: Mark,
        replace: bool = False,
    ) -> None:
        where = (namespace, scope, space)

        def tx(c: sqlite3.Connection) -> Mark | None:
            c.execute("BEGIN IMMEDIATE")
            before = c.execute(
                "SELECT generation, sequence FROM tether_recall_marks"
                " WHERE ns = ? AND scope = ? AND space = ?",
                where,
            ).fetchone()
            if replace:
                c.execute(
                    "DELETE FROM tether_recall_vectors WHERE ns = ? AND scope = ? AND space = ?",
                    where,
                )
            c.executemany(
                "DELETE FROM tether_recall_vectors"
                " WHERE ns = ? AND scope = ? AND space = ? AND key = ?",
                [(*where, k) for k in deletes],
            )
            c.executemany(
                "INSERT OR REPLACE INTO tether_recall_vectors VALUES (?, ?, ?, ?, ?, ?)",
                [(*where, e.key, e.node, e.vector) for e in upserts],
            )
            c.execute(
                "INSERT OR REPLACE INTO tether_recall_marks VALUES (?, ?, ?, ?, ?)",
                (*where, mark.generation, mark.sequence),
            )
            c.execute("COMMIT")
            return None if before is None else Mark(generation=before[0], sequence=before[1])

        before = await self._run(tx)
        held = self._held.get(where)
        if replace:
            self._held.pop(where, None)
        elif held is not None and held.mark == before:
            # what this write changed, and only that: no reload of the part
            held.apply(upserts, deletes, mark)
            if held.nbytes > self.hold_bytes and self.engine == "sqlite-vec":
                del self._held[where]
        else:
            self._held.pop(where, None)  # another process wrote in between: reload

    async def _rows(self, namespace: str, scope: str, space: str) -> list[tuple[str, str, bytes]]:
        return await self._run(
            lambda c: [
                (r[0], r[1], bytes(r[2]))
                for r in c.execute(
                    "SELECT key, node, vector FROM tether_recall_vectors"
                    " WHERE ns = ? AND scope = ? AND space = ? ORDER BY key",
                    (namespace, scope, space),
                )
            ]
        )

    async def search(
        self,
        namespace: str,
        scope: str,
        space: str,
        query: bytes,
        *,
        k: int,
        where: Callable[[str], bool] | None = None,
    ) -> list[VectorHit]:
        key = (namespace, scope, space)
        if k < 1:
            return []
        mark = await self.mark(namespace, scope, space)
        if mark is None:
            return []
        cached = self._held.get(key)
        held: HeldVectors | str
        if cached is not None and cached.mark == mark:
            held = cached
        else:
            self._held.pop(key, None)
            held = await self._hold(key)
        if held == "gone":  # dropped since the mark was read
            return []
        if not isinstance(held, HeldVectors):  # too big to hold: sqlite-vec scans it in SQLite
            self.searched_by = "sqlite-vec"
            return await self._run(lambda c: self._vec_search(c, key, query, k, where))
        self._held.move_to_end(key)
        self.searched_by = "held scan"
        return held.search(query, k=k, where=where)

    async def _hold(self, part: tuple[str, str, str]) -> HeldVectors | str:
        """Load the part's vectors and mark (one read transaction) to hold, evicting the
        least recently searched parts beyond ``hold_bytes``; "big" (nothing loaded) when
        sqlite-vec is there and the part alone is bigger than that, "gone" without a mark."""

        def read(c: sqlite3.Connection) -> HeldVectors | str:
            c.execute("BEGIN")
            try:
                if self.engine == "sqlite-vec":
                    size = c.execute(
                        "SELECT IFNULL(sum(length(vector)), 0) FROM tether_recall_vectors"
                        " WHERE ns = ? AND scope = ? AND space = ?",
                        part,
                    ).fetchone()[0]
                    if size > self.hold_bytes:
                        return "big"
                m = c.execute(
                    "SELECT generation, sequence FROM tether_recall_marks"
                    " WHERE ns = ? AND scope = ? AND space = ?",
                    part,
                ).fetchone()
                rows = [
                    (r[0], r[1], bytes(r[2]))
                    for r in c.execute(
                        "SELECT key, node, vector FROM tether_recall_vectors"
                        " WHERE ns = ? AND scope = ? AND space = ?",
                        part,
                    )
                ]
            finally:
                c.execute("COMMIT")
            if m is None:
                return "gone"
            return HeldVectors(Mark(generation=m[0], sequence=m[1]), rows)

        held = await self._run(read)
        if not isinstance(held, HeldVectors):
            return held
        self._held[part] = held
        total = sum(h.nbytes for h in self._held.values())
        while total > self.hold_bytes and len(self._held) > 1:
            _, gone = self._held.popitem(last=False)
            total -= gone.nbytes
        return held

    def _vec_search(
        self,
        c: sqlite3.Connection,
        part: tuple[str, str, str],
        query: bytes,
        k: int,
        where: Callable[[str], bool] | None,
    ) -> list[VectorHit]:
        """sqlite-vec scores every row of the part in SQLite (float32 cosine); the rows
        within ``2 * margin`` of the ``k``-th best are the candidates ``rescore`` orders."""
        clause = ""
        if where is not None:
            c.create_function("tether_recall_where", 1, where, deterministic=True)
            clause = " AND tether_recall_where(key)"
        sql = (
            "SELECT key, node, 1.0 - IFNULL(vec_distance_cosine(vector, ?), 1.0) AS s"
            " FROM tether_recall_vectors WHERE ns = ? AND scope = ? AND space = ?"
            f"{clause} ORDER BY s DESC LIMIT ?"
        )
        slack = 2 * margin(len(query) // 4)
        limit = k + 16
        while True:
            rows = c.execute(sql, (query, *part, limit)).fetchall()
            if len(rows) <= k:
                break
            floor = float(rows[k - 1][2]) - slack
            if len(rows) < limit or float(rows[-1][2]) < floor:
                rows = [r for r in rows if float(r[2]) >= floor]
                break
            limit *= 4  # near-ties past the limit: look further
        vectors: dict[str, bytes] = {}
        keys = [r[0] for r in rows]
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            vectors.update(
                (r[0], bytes(r[1]))
                for r in c.execute(
                    "SELECT key, vector FROM tether_recall_vectors"
                    " WHERE ns = ? AND scope = ? AND space = ?"
                    f" AND key IN ({', '.join('?' * len(chunk))})",
                    (*part, *chunk),
                )
            )
        return rescore([(r[0], r[1], vectors[r[0]]) for r in rows], query, k=k)

    async def entries(self, namespace: str, scope: str, space: str) -> dict[str, VectorEntry]:
        return {
            k: VectorEntry(key=k, node=n, vector=v)
            for k, n, v in await self._rows(namespace, scope, space)
        }

    async def drop(self, namespace: str, scope: str | None = None) -> int:
        def tx(c: sqlite3.Connection) -> int:
            c.execute("BEGIN IMMEDIATE")
            if scope is None:
                n = c.execute("DELETE FROM tether_recall_vectors WHERE ns = ?", (namespace,))
                c.execute("DELETE FROM tether_recall_marks WHERE ns = ?", (namespace,))
            else:
                n = c.execute(
                    "DELETE FROM tether_recall_vectors WHERE ns = ? AND scope = ?",
                    (namespace, scope),
                )
                c.execute(
                    "DELETE FROM tether_recall_marks WHERE ns = ? AND scope = ?",
                    (namespace, scope),
                )
            c.execute("COMMIT")
            return int(n.rowcount)

        removed = await self._run(tx)
        for k in [k for k in self._held if k[0] == namespace and scope in (None, k[1])]:
            del self._held[k]
        return removed

    async def indexed(self, namespace: str) -> list[tuple[str, str]]:
        rows = await self._run(
            lambda c: c.execute(
                "SELECT scope, space FROM tether_recall_marks WHERE ns = ? ORDER BY scope, space",
                (namespace,),
            ).fetchall()
        )
        return [(r[0], r[1]) for r in rows]
