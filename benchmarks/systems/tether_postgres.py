"""tether on PostgreSQL (database ``test`` on 127.0.0.1:5432). Provisional: see _tether.py.

TODO(tether): tether's PostgreSQL schema/table names are not fixed yet. ``reset`` drops
the benchmark namespace through the store API (``delete_namespace``), and
``bytes_on_disk`` sums every table of the schema named by TETHER_PG_SCHEMA (default
``public``) whose name starts with ``tether`` — adjust both once the schema is known
(a ``search_path``/schema option would let the benchmark use a private schema, as
langgraph_postgres does).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from ._tether import NAMESPACE, TetherBase
from .base import POSTGRES_URL

PG_SCHEMA = os.environ.get("TETHER_PG_SCHEMA", "public")


class TetherPostgres(TetherBase):
    name = "tether_postgres"
    store_options: ClassVar[
        dict[str, Any]
    ] = {}  # server-side: synchronous_commit=on is the default

    def url(self, workdir: Path) -> str:
        return POSTGRES_URL

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        await super().setup(workdir, fresh=False)
        if fresh:
            await self.store.delete_namespace(NAMESPACE)

    async def bytes_on_disk(self) -> int:
        try:
            import asyncpg
        except ImportError:
            return 0
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            v = await conn.fetchval(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname LIKE 'tether%'",
                PG_SCHEMA,
            )
            self._server = {
                k: await conn.fetchval(f"SHOW {k}") for k in ("synchronous_commit", "fsync")
            }
            return int(v)
        finally:
            await conn.close()

    async def cleanup(self, workdir: Path) -> None:
        await super().setup(workdir, fresh=False)
        await self.store.delete_namespace(NAMESPACE)
        await self.store.close()

    def durability(self) -> dict[str, Any]:
        d = super().durability()
        d["note"] = "server settings synchronous_commit/fsync; " + d["note"]
        return d


SYSTEM = TetherPostgres
