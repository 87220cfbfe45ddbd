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
# apart from setup/load: open_store imports the backend, the crypto hook and, to
# refuse an encrypted store opened without a key, the key-table check lazily; the
# driver (asyncpg) too, as the LangGraph adapter imports psycopg.
import asyncpg

import tether.crypto._store
import tether.store._postgres_keys
import tether.store.postgres  # noqa: F401

from ._tether import TetherBase
from .base import POSTGRES_URL, pkg_version

SCHEMA = "bench_tether"


async def _admin(sql: str) -> Any:
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

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        await super().setup(workdir, fresh=fresh)
        if fresh:  # (A) and (B) report them; (C) is timed, so it does not ask
            self._server = {
                k: str((await _admin(f"SHOW {k}"))[0][0])
                for k in ("synchronous_commit", "fsync", "server_version")
            }

    async def bytes_on_disk(self) -> int:
        rows = await _admin(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            f" WHERE n.nspname = '{SCHEMA}' AND c.relkind = 'r'"
        )
        return int(rows[0][0])

    def versions(self) -> dict[str, str]:
        server = getattr(self, "_server", None) or {}
        return {
            **super().versions(),
            "asyncpg": pkg_version("asyncpg"),
            "postgres": server.get("server_version", "?"),
        }

    async def cleanup(self, workdir: Path) -> None:
        await self.reset(workdir)

    def durability(self) -> dict[str, Any]:
        d = super().durability()
        server = getattr(self, "_server", None)
        if server:
            d.update({k: v for k, v in server.items() if k != "server_version"})
            d["strongest"] = d["strongest"] and server["synchronous_commit"] in (
                "on",
                "remote_apply",
            )
            d["setting"] = (
                f"synchronous_commit={server['synchronous_commit']}, fsync={server['fsync']}, "
                f"{d['setting']}, commit per turn"
            )
        d["note"] = "server settings synchronous_commit/fsync; " + d["note"]
        return d


SYSTEM = TetherPostgres
