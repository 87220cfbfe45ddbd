"""LangGraph with tether's ``TetherSaver`` on PostgreSQL: the pair of
``langgraph_postgres`` (PostgresSaver), the same compiled StateGraph
(``_langgraph.py``) and ``invoke(durability="sync")``, with
``TetherSaver.from_url("postgresql://...?schema=bench_lg_tether&durability=full")``
in place of PostgresSaver, on the same server and database.

Runs in the peers venv beside ``langgraph_postgres`` (same LangGraph, same
interpreter), with tether imported from this checkout's ``src/`` (asyncpg, its
PostgreSQL driver, is in peers/requirements.txt), so the pair differs only in the
checkpointer. tether's tables live in the private schema ``bench_lg_tether``, dropped
before each fresh run and after the last phase, as PostgresSaver's ``bench_langgraph``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import asyncpg  # noqa: F401  (tether's driver: imported before the clock, as the store's)

import tether.crypto._store
import tether.store._postgres_keys
import tether.store.postgres  # noqa: F401
from tether.adapters.langgraph import TetherSaver

from . import _langgraph as lg
from . import _pg
from .base import System, pkg_version

SCHEMA = "bench_lg_tether"


class LangGraphTetherPostgres(System):
    name = "langgraph_tether_postgres"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        url, self._server = _pg.tether_schema(SCHEMA, fresh=fresh)
        self.saver = TetherSaver.from_url(url)
        self.graph = lg.build(self.saver)

    async def write_turn(self, thread: str, turn: int, user_msg: str, assistant_msg: str) -> None:
        self.graph.invoke(
            lg.turn_input(user_msg, assistant_msg), lg.config(thread), durability="sync"
        )

    async def load(self, thread: str) -> list[str]:
        return lg.texts(self.graph, thread)

    async def close(self) -> None:
        self.saver.close()

    async def bytes_on_disk(self) -> int:
        return _pg.schema_bytes(SCHEMA)

    async def cleanup(self, workdir: Path) -> None:
        _pg.drop_schema(SCHEMA)

    def durability(self) -> dict[str, Any]:
        return _pg.durability_report(
            self._server,
            "durability='sync'",
            "TetherSaver.from_url(postgresql, durability=full); invoke(durability='sync')",
        )

    def versions(self) -> dict[str, str]:
        return {
            "langgraph": pkg_version("langgraph"),
            "asyncpg": pkg_version("asyncpg"),
            "postgres": str(self._server.get("server_version", "")),
        }

    def remarks(self) -> list[str]:
        return [
            "same graph and invoke as LangGraph PostgresSaver, same server and database; "
            "a put stores only the new messages (content-addressed list elements under a "
            "Merkle tree), so bytes per turn stay flat",
        ]


SYSTEM = LangGraphTetherPostgres
