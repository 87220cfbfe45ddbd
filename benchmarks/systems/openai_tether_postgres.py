"""OpenAI Agents SDK with tether's ``TetherSession`` on PostgreSQL: the pair of
``openai_sqlalchemy_postgres``, the same driving, with one tether store
(``open_store("postgresql://...?schema=bench_oa_tether&durability=full")``) shared by
every thread's ``TetherSession`` in place of the shared AsyncEngine, on the same
server and database.

Runs in the peers venv beside ``openai_sqlalchemy_postgres`` (same SDK, same
interpreter), with tether imported from this checkout's ``src/``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import asyncpg  # noqa: F401  (tether's driver: imported before the clock)

import tether.crypto._store
import tether.store._postgres_keys
import tether.store.postgres  # noqa: F401
from tether.adapters.openai_agents import TetherSession
from tether.store import open_store

from . import _pg
from ._openai_sessions import SessionDriver
from .base import System, pkg_version

SCHEMA = "bench_oa_tether"


class OpenAITetherPostgres(SessionDriver, System):
    name = "openai_tether_postgres"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        url, self._server = _pg.tether_schema(SCHEMA, fresh=fresh)
        self.store = await open_store(url)
        self.sessions: dict[str, TetherSession] = {}

    def make(self, thread: str) -> TetherSession:
        return TetherSession(thread, self.store)

    async def close(self) -> None:
        await self.store.close()

    async def bytes_on_disk(self) -> int:
        return _pg.schema_bytes(SCHEMA)

    async def cleanup(self, workdir: Path) -> None:
        _pg.drop_schema(SCHEMA)

    def durability(self) -> dict[str, Any]:
        return _pg.session_durability(self._server, "TetherSession on one store (durability=full)")

    def versions(self) -> dict[str, str]:
        return {
            "openai-agents": pkg_version("openai-agents"),
            "asyncpg": pkg_version("asyncpg"),
            "postgres": str(self._server.get("server_version", "")),
        }

    def remarks(self) -> list[str]:
        return [
            "same driving as SQLAlchemySession: one TetherSession per thread on one shared "
            "store, add_items([user, assistant]) one transaction, get_items() for (C)",
        ]


SYSTEM = OpenAITetherPostgres
