"""tether on PostgreSQL (database ``test`` on 127.0.0.1:5432), in its own schema.

The store's ``?schema=`` option keeps tether's tables (``tether_scopes``,
``tether_nodes``, ``tether_resource_heads``, ``tether_schema``, see docs/storage.md)
in the private schema ``bench_tether``, dropped before each fresh run, as
langgraph_postgres does with ``bench_langgraph``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

# Imported at module level, as the worker expects, so that import time is reported
# apart from setup/load: open_store would import the backend (and the crypto hook) lazily.
import tether.crypto._store
import tether.store.postgres  # noqa: F401

from ._tether import TetherBase
from .base import POSTGRES_URL

SCHEMA = "bench_tether"


async def _admin(sql: str) -> Any:
    import asyncpg

    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


class TetherPostgres(TetherBase):
    name = "tether_postgres"
    # Server-side durability: synchronous_commit=on is the default ("full" keeps it).
    store_options: ClassVar[dict[str, Any]] = {"durability": "full"}

    def url(self, workdir: Path) -> str:
        return f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}schema={SCHEMA}"

    async def reset(self, workdir: Path) -> None:
        await _admin(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')  # open_store recreates it

    async def bytes_on_disk(self) -> int:
        rows = await _admin(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            f" WHERE n.nspname = '{SCHEMA}' AND c.relkind = 'r'"
        )
        self._server = {
            k: (await _admin(f"SHOW {k}"))[0][0] for k in ("synchronous_commit", "fsync")
        }
        return int(rows[0][0])

    async def cleanup(self, workdir: Path) -> None:
        await self.reset(workdir)

    def durability(self) -> dict[str, Any]:
        d = super().durability()
        server = getattr(self, "_server", None)
        if server:
            d.update(server)
            d["strongest"] = d["strongest"] and server["synchronous_commit"] in (
                "on",
                "remote_apply",
            )
        d["note"] = "server settings synchronous_commit/fsync; " + d["note"]
        return d


SYSTEM = TetherPostgres
