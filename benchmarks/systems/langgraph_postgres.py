"""LangGraph: the same compiled StateGraph as langgraph_sqlite, checkpointed by
PostgresSaver on the local server (schema ``bench_langgraph`` of database ``test``,
dropped and recreated before each fresh run), ``durability="sync"``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import dict_row

from . import _langgraph as lg
from . import _pg
from .base import POSTGRES_URL, SkipSystem, System, pkg_version

SCHEMA = "bench_langgraph"


class LangGraphPostgres(System):
    name = "langgraph_postgres"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        try:
            if fresh:
                _pg.reset_schema(SCHEMA)
            # The connection settings PostgresSaver.from_conn_string uses.
            self.conn = _pg.connect(
                SCHEMA, autocommit=True, prepare_threshold=0, row_factory=dict_row
            )
        except Exception as e:  # no server here
            raise SkipSystem(f"PostgreSQL at {POSTGRES_URL} unreachable: {e}") from e
        self.saver = PostgresSaver(self.conn)
        if fresh:
            self.saver.setup()
        self.graph = lg.build(self.saver)
        self._server = _pg.server_durability(self.conn)

    async def write_turn(self, thread: str, turn: int, user_msg: str, assistant_msg: str) -> None:
        self.graph.invoke(
            lg.turn_input(user_msg, assistant_msg), lg.config(thread), durability="sync"
        )

    async def load(self, thread: str) -> list[str]:
        return lg.texts(self.graph, thread)

    async def close(self) -> None:
        self.conn.close()

    async def bytes_on_disk(self) -> int:
        return _pg.schema_bytes(SCHEMA)

    async def cleanup(self, workdir: Path) -> None:
        _pg.drop_schema(SCHEMA)

    def durability(self) -> dict[str, Any]:
        return _pg.durability_report(self._server, "durability='sync'", "invoke(durability='sync')")

    def versions(self) -> dict[str, str]:
        return {
            "langgraph": pkg_version("langgraph"),
            "langgraph-checkpoint-postgres": pkg_version("langgraph-checkpoint-postgres"),
            "psycopg": pkg_version("psycopg"),
            "postgres": str(self._server.get("server_version", "")),
        }

    def remarks(self) -> list[str]:
        return [
            "PostgresSaver keeps each new version of the messages channel as a blob "
            "(the whole list, compressed by TOAST), so bytes and latency grow with the history",
        ]


SYSTEM = LangGraphPostgres
