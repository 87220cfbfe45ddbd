"""Google ADK: ``DatabaseSessionService`` on ``sqlite+aiosqlite``; one ``append_event`` per
message (so two transactions per turn), the session created at the thread's first turn
and its ``Session`` object kept, as a Runner would."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.session import Session
from google.genai import types
from sqlalchemy import event

from .base import System, pkg_version, reset_dir, sqlite_bytes, sqlite_objects

APP = "bench"
USER = "user-1"


def _durable_sqlite(dbapi_connection: Any, _record: object) -> None:
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.close()


class AdkSqlite(System):
    name = "adk_sqlite"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        self.workdir = workdir
        if fresh:
            reset_dir(workdir)
        self.svc = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{workdir / 'adk.db'}")
        # ADK has no durability option; its own "connect" listener only turns foreign
        # keys on (journal stays DELETE). Ours, on the engine ADK created, runs for
        # every new pooled connection before first use.
        event.listen(self.svc.db_engine.sync_engine, "connect", _durable_sqlite)
        self.sessions: dict[str, Session] = {}
        self._pragmas: dict[str, Any] = {}

    async def write_turn(self, thread: str, turn: int, user_msg: str, assistant_msg: str) -> None:
        s = self.sessions.get(thread)
        if s is None:
            s = self.sessions[thread] = await self.svc.create_session(
                app_name=APP, user_id=USER, session_id=thread
            )
            if not self._pragmas:
                await self._read_pragmas()
        inv = f"{thread}-{turn}"
        await self.svc.append_event(
            s,
            Event(
                invocation_id=inv,
                author="user",
                content=types.Content(role="user", parts=[types.Part(text=user_msg)]),
            ),
        )
        await self.svc.append_event(
            s,
            Event(
                invocation_id=inv,
                author="assistant",
                content=types.Content(role="model", parts=[types.Part(text=assistant_msg)]),
            ),
        )

    async def _read_pragmas(self) -> None:
        async with self.svc.db_engine.connect() as c:
            j = (await c.exec_driver_sql("PRAGMA journal_mode")).scalar()
            sy = (await c.exec_driver_sql("PRAGMA synchronous")).scalar()
        names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
        self._pragmas = {"journal_mode": str(j).upper(), "synchronous": names.get(sy, str(sy))}

    async def load(self, thread: str) -> list[str]:
        s = await self.svc.get_session(app_name=APP, user_id=USER, session_id=thread)
        if s is None:
            return []
        out: list[str] = []
        for ev in s.events:
            if ev.content and ev.content.parts:
                out.append("".join(p.text or "" for p in ev.content.parts))
        return out

    async def close(self) -> None:
        await self.svc.close()

    async def bytes_on_disk(self) -> int:
        return sqlite_bytes(self.workdir)

    def bytes_by_object(self) -> dict[str, int]:
        return sqlite_objects(self.workdir)

    def durability(self) -> dict[str, Any]:
        p = self._pragmas
        return {
            "setting": f"{p.get('journal_mode', '?')}, synchronous={p.get('synchronous', '?')},"
            " commit per append_event",
            "strongest": p.get("synchronous") == "FULL",
            "note": "no ADK option: WAL + synchronous=FULL set by a SQLAlchemy 'connect' "
            "listener on the engine ADK builds (ADK's default journal is DELETE)",
            **p,
        }

    def versions(self) -> dict[str, str]:
        return {
            "google-adk": pkg_version("google-adk"),
            "sqlalchemy": pkg_version("sqlalchemy"),
            "aiosqlite": pkg_version("aiosqlite"),
            "sqlite": sqlite3.sqlite_version,
        }

    def remarks(self) -> list[str]:
        return [
            "two append_event calls per turn (one commit each); create_session at a thread's "
            "first turn is counted in that turn; each append re-reads the session row and "
            "state rows to detect stale writers",
        ]


SYSTEM = AdkSqlite
