"""OpenAI Agents SDK: ``SQLAlchemySession`` on PostgreSQL (its documented server
session, ``postgresql+asyncpg``), all sessions on one shared ``AsyncEngine`` (the
SDK's "pass an existing AsyncEngine"), tables in the private schema
``bench_oa_sqla`` of the benchmark database (dropped before each fresh run and after
the last phase); one ``add_items([user, assistant])`` per turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg  # noqa: F401  (SQLAlchemy's driver here: imported before the clock)
from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from sqlalchemy.ext.asyncio import create_async_engine

from . import _pg
from ._openai_sessions import SessionDriver
from .base import POSTGRES_URL, SkipSystem, System, pkg_version

SCHEMA = "bench_oa_sqla"


class OpenAISqlalchemyPostgres(SessionDriver, System):
    name = "openai_sqlalchemy_postgres"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        try:
            if fresh:
                _pg.reset_schema(SCHEMA)
            with _pg.connect(SCHEMA, autocommit=True) as c:
                self._server = _pg.server_durability(c)
        except Exception as e:  # no server here
            raise SkipSystem(f"PostgreSQL at {POSTGRES_URL} unreachable: {e}") from e
        url = POSTGRES_URL.replace("postgresql://", "postgresql+asyncpg://", 1)
        self.engine = create_async_engine(
            url, connect_args={"server_settings": {"search_path": SCHEMA}}
        )
        self.sessions: dict[str, SQLAlchemySession] = {}
        self._create = fresh

    def make(self, thread: str) -> SQLAlchemySession:
        create, self._create = self._create, False  # the first session creates the tables
        return SQLAlchemySession(thread, engine=self.engine, create_tables=create)

    async def close(self) -> None:
        await self.engine.dispose()

    async def bytes_on_disk(self) -> int:
        return _pg.schema_bytes(SCHEMA)

    async def cleanup(self, workdir: Path) -> None:
        _pg.drop_schema(SCHEMA)

    def durability(self) -> dict[str, Any]:
        return _pg.session_durability(self._server, "SQLAlchemySession on one AsyncEngine")

    def versions(self) -> dict[str, str]:
        return {
            "openai-agents": pkg_version("openai-agents"),
            "sqlalchemy": pkg_version("sqlalchemy"),
            "asyncpg": pkg_version("asyncpg"),
            "postgres": str(self._server.get("server_version", "")),
        }

    def remarks(self) -> list[str]:
        return [
            "one SQLAlchemySession per thread on one shared AsyncEngine (asyncpg); "
            "add_items([user, assistant]) is one transaction; get_items() for (C)",
        ]


SYSTEM = OpenAISqlalchemyPostgres
