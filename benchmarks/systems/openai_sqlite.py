"""OpenAI Agents SDK: ``SQLiteSession`` on a file; one ``add_items([user, assistant])``
per turn (one transaction), one session object per thread kept open."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from agents.memory.sqlite_session import SQLiteSession

from .base import System, pkg_version, reset_dir, sqlite_bytes, sqlite_objects, sqlite_pragmas


class _FullSyncSession(SQLiteSession):
    """SQLiteSession turns WAL on for each connection it opens and leaves synchronous
    at SQLite's default; this subclass also sets synchronous=FULL explicitly there (the
    SDK has no option for it; the hook is its own per-connection configure step)."""

    @staticmethod
    def _configure_connection(conn: sqlite3.Connection) -> None:
        SQLiteSession._configure_connection(conn)
        conn.execute("PRAGMA synchronous=FULL")


class OpenAISqlite(System):
    name = "openai_sqlite"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        self.workdir = workdir
        if fresh:
            reset_dir(workdir)
        self.path = workdir / "agents.db"
        self.sessions: dict[str, SQLiteSession] = {}

    def _session(self, thread: str) -> SQLiteSession:
        s = self.sessions.get(thread)
        if s is None:
            s = self.sessions[thread] = _FullSyncSession(thread, self.path)
        return s

    async def write_turn(self, thread: str, turn: int, user_msg: str, assistant_msg: str) -> None:
        await self._session(thread).add_items(
            [
                {"role": "user", "content": user_msg},
                {"role": "assistant", "content": assistant_msg},
            ]
        )

    async def load(self, thread: str) -> list[str]:
        items = await self._session(thread).get_items()
        return [str(it["content"]) for it in items]  # type: ignore[index]

    async def close(self) -> None:
        if self.sessions:
            # what the live connections are set to, read before they go
            s = next(iter(self.sessions.values()))
            self._pragmas = sqlite_pragmas(s._get_connection())
        for s in self.sessions.values():
            s.close()

    async def bytes_on_disk(self) -> int:
        return sqlite_bytes(self.workdir)

    def bytes_by_object(self) -> dict[str, int]:
        return sqlite_objects(self.workdir)

    def durability(self) -> dict[str, Any]:
        p = getattr(self, "_pragmas", None)
        if p is None and self.sessions:
            p = sqlite_pragmas(next(iter(self.sessions.values()))._get_connection())
        p = p or {}
        return {
            "setting": f"WAL, synchronous={p.get('synchronous', '?')}, commit per add_items",
            "strongest": p.get("synchronous") == "FULL",
            "note": "SDK sets WAL itself; synchronous=FULL via a subclass of its "
            "per-connection _configure_connection (no public option)",
            **p,
        }

    def versions(self) -> dict[str, str]:
        return {"openai-agents": pkg_version("openai-agents"), "sqlite": sqlite3.sqlite_version}

    def remarks(self) -> list[str]:
        return [
            "one SQLiteSession per thread kept open; add_items([user, assistant]) is one "
            "transaction; get_items() for (C)",
        ]


SYSTEM = OpenAISqlite
