"""OpenAI Agents SDK with tether's ``TetherSession`` on SQLite: the same driving as
``openai_sqlite`` (one session object per thread kept open, one
``add_items([user, assistant])`` per turn, ``get_items()`` for the load), with
``TetherSession.from_url("sqlite:///...?durability=full")`` in place of ``SQLiteSession``.

Runs in the peers venv beside ``openai_sqlite`` (same SDK, same interpreter), with
tether imported from this checkout's ``src/``, so the pair differs only in the session."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import tether.store.sqlite  # noqa: F401
from tether.adapters.openai_agents import TetherSession

from .base import System, pkg_version, reset_dir, sqlite_bytes, sqlite_objects, sqlite_pragmas


class OpenAITetherSqlite(System):
    name = "openai_tether_sqlite"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        self.workdir = workdir
        if fresh:
            reset_dir(workdir)
        self.url = f"sqlite:///{workdir / 'tether.db'}?durability=full"
        self.sessions: dict[str, TetherSession] = {}
        self._pragmas: dict[str, Any] = {}

    def _session(self, thread: str) -> TetherSession:
        s = self.sessions.get(thread)
        if s is None:
            s = self.sessions[thread] = TetherSession.from_url(thread, self.url)
            if not self._pragmas:
                conn = getattr(s.store, "_conn", None)
                if conn is not None:
                    self._pragmas = sqlite_pragmas(conn)
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
        return [str(it["content"]) for it in items]

    async def close(self) -> None:
        for s in self.sessions.values():
            s.close()

    async def bytes_on_disk(self) -> int:
        return sqlite_bytes(self.workdir)

    def bytes_by_object(self) -> dict[str, int]:
        return sqlite_objects(self.workdir)

    def durability(self) -> dict[str, Any]:
        p = self._pragmas
        return {
            "setting": f"WAL, synchronous={p.get('synchronous', '?')}, commit per add_items",
            "strongest": p.get("synchronous") == "FULL",
            "note": "TetherSession.from_url(sqlite, durability=full)",
            **p,
        }

    def versions(self) -> dict[str, str]:
        return {"openai-agents": pkg_version("openai-agents"), "sqlite": sqlite3.sqlite_version}

    def remarks(self) -> list[str]:
        return [
            "same driving as SQLiteSession: one TetherSession per thread kept open (each "
            "opens the store: from_url), add_items([user, assistant]) one transaction, "
            "get_items() for (C)",
        ]


SYSTEM = OpenAITetherSqlite
