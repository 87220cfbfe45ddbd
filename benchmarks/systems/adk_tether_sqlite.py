"""Google ADK with tether's ``TetherSessionService`` on SQLite: the same driving as
``adk_sqlite`` (``create_session`` at a thread's first turn, its ``Session`` kept, one
``append_event`` per message, ``get_session`` for the load), with
``TetherSessionService`` on ``sqlite:///...?durability=full`` in place of
``DatabaseSessionService``.

Runs in the peers venv beside ``adk_sqlite`` (same ADK, same interpreter), with tether
imported from this checkout's ``src/``, so the pair differs only in the service."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from google.adk.events.event import Event
from google.adk.sessions.session import Session
from google.genai import types

import tether.store.sqlite  # noqa: F401
from tether.adapters.adk import TetherSessionService
from tether.store import open_store

from .base import System, pkg_version, reset_dir, sqlite_bytes, sqlite_objects, sqlite_pragmas

APP = "bench"
USER = "user-1"


class AdkTetherSqlite(System):
    name = "adk_tether_sqlite"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        self.workdir = workdir
        if fresh:
            reset_dir(workdir)
        self.store = await open_store(f"sqlite:///{workdir / 'tether.db'}?durability=full")
        self.svc = TetherSessionService(self.store)
        self.sessions: dict[str, Session] = {}
        conn = getattr(self.store, "_conn", None)
        self._pragmas: dict[str, Any] = sqlite_pragmas(conn) if conn is not None else {}

    async def write_turn(self, thread: str, turn: int, user_msg: str, assistant_msg: str) -> None:
        s = self.sessions.get(thread)
        if s is None:
            s = self.sessions[thread] = await self.svc.create_session(
                app_name=APP, user_id=USER, session_id=thread
            )
        inv = f"{thread}-{turn}"
        for author, role, text in (("user", "user", user_msg), ("assistant", "model", assistant_msg)):
            await self.svc.append_event(
                s,
                Event(
                    invocation_id=inv,
                    author=author,
                    content=types.Content(role=role, parts=[types.Part(text=text)]),
                ),
            )

    async def load(self, thread: str) -> list[str]:
        s = await self.svc.get_session(app_name=APP, user_id=USER, session_id=thread)
        if s is None:
            return []
        return [
            "".join(p.text or "" for p in ev.content.parts)
            for ev in s.events
            if ev.content and ev.content.parts
        ]

    async def close(self) -> None:
        await self.store.close()

    async def bytes_on_disk(self) -> int:
        return sqlite_bytes(self.workdir)

    def bytes_by_object(self) -> dict[str, int]:
        return sqlite_objects(self.workdir)

    def durability(self) -> dict[str, Any]:
        p = self._pragmas
        return {
            "setting": f"WAL, synchronous={p.get('synchronous', '?')}, commit per append_event",
            "strongest": p.get("synchronous") == "FULL",
            "note": "open_store(sqlite, durability=full)",
            **p,
        }

    def versions(self) -> dict[str, str]:
        return {"google-adk": pkg_version("google-adk"), "sqlite": sqlite3.sqlite_version}

    def remarks(self) -> list[str]:
        return [
            "same driving as DatabaseSessionService: two append_event calls per turn (one "
            "commit each), create_session at a thread's first turn; each append checks the "
            "stored session for staleness and the event id for a duplicate",
        ]


SYSTEM = AdkTetherSqlite
