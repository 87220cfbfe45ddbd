"""The floor: plain sqlite3, WAL, synchronous=FULL, one INSERT per message, one commit
per turn. Nothing can store a turn durably on SQLite much faster than this.

It checkpoints its WAL every 1,000 pages (SQLite's default), as tether's SQLite store
does (``tether.store.sqlite._WAL_AUTOCHECKPOINT``), set explicitly so that a setting
never counts as either system's work."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .base import System, reset_dir, sqlite_bytes, sqlite_objects, sqlite_pragmas


class SqliteFloor(System):
    name = "sqlite_floor"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        self.workdir = workdir
        if fresh:
            reset_dir(workdir)
        self.conn = sqlite3.connect(workdir / "floor.db", isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA wal_autocheckpoint=1000")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS messages ("
            " thread TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL,"
            " content TEXT NOT NULL, PRIMARY KEY (thread, seq))"
        )
        self._pragmas = sqlite_pragmas(self.conn)

    async def write_turn(self, thread: str, turn: int, user_msg: str, assistant_msg: str) -> None:
        c = self.conn
        c.execute("BEGIN")
        c.execute("INSERT INTO messages VALUES (?, ?, 'user', ?)", (thread, 2 * turn, user_msg))
        c.execute(
            "INSERT INTO messages VALUES (?, ?, 'assistant', ?)",
            (thread, 2 * turn + 1, assistant_msg),
        )
        c.execute("COMMIT")

    async def load(self, thread: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT content FROM messages WHERE thread = ? ORDER BY seq", (thread,)
        ).fetchall()
        return [r[0] for r in rows]

    async def close(self) -> None:
        self.conn.close()

    async def bytes_on_disk(self) -> int:
        return sqlite_bytes(self.workdir)

    def bytes_by_object(self) -> dict[str, int]:
        return sqlite_objects(self.workdir)

    def durability(self) -> dict[str, Any]:
        return {
            "setting": (
                f"WAL, synchronous={self._pragmas['synchronous']}, "
                f"wal_autocheckpoint={self._pragmas['wal_autocheckpoint']}, commit per turn"
            ),
            "strongest": True,
            "note": "set directly on the connection",
            **self._pragmas,
        }

    def versions(self) -> dict[str, str]:
        return {"sqlite": sqlite3.sqlite_version}

    def remarks(self) -> list[str]:
        return [
            "table (thread, seq, role, content), primary key (thread, seq); "
            "two INSERTs and one COMMIT per turn",
        ]


SYSTEM = SqliteFloor
