"""tether on Redis (db 15 on 127.0.0.1:6379, own key prefix); how it is driven: _tether.py.

The benchmark keeps its keys under the prefix ``tether-bench:`` so it never touches
other data in the database; ``reset`` and ``cleanup`` delete that prefix with SCAN +
UNLINK (never KEYS or FLUSHDB). Redis keeps data in memory, so ``bytes_on_disk``
reports what the keys take in memory (``MEMORY USAGE`` summed over the prefix); the
AOF, when enabled, holds roughly the commands that wrote them.

Durability is the server's setting (``appendonly``/``appendfsync``, docs/redis.md):
the figures are for whatever the benchmarked server runs, reported in ``durability``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

# Imported at module level, as the worker expects, so that import time is reported
# apart from setup/load (open_store imports these, and the driver, lazily).
import redis.asyncio  # noqa: F401

import tether.crypto._store
import tether.store._redis_keys
import tether.store.redis  # noqa: F401

from ._tether import TetherBase
from .base import REDIS_URL, pkg_version

PREFIX = "tether-bench:"


class TetherRedis(TetherBase):
    name = "tether_redis"
    store_options: ClassVar[dict[str, Any]] = {"prefix": PREFIX}

    def url(self, workdir: Path) -> str:
        return REDIS_URL

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        await super().setup(workdir, fresh=False)
        self._server: dict[str, str] = await self.store.persistence()
        if fresh:
            await self.store.drop_prefix()

    async def bytes_on_disk(self) -> int:
        import redis.asyncio as aioredis

        r = aioredis.Redis.from_url(REDIS_URL)
        try:
            total = 0
            async for k in r.scan_iter(match=PREFIX + "*", count=1000):
                total += int(await r.memory_usage(k) or 0)
            return total
        finally:
            await r.aclose()

    async def cleanup(self, workdir: Path) -> None:
        await super().setup(workdir, fresh=False)
        await self.store.drop_prefix()
        await self.store.close()

    def durability(self) -> dict[str, Any]:
        d = super().durability()
        server = getattr(self, "_server", {})
        d.update(server)
        d["setting"] = (
            f"server appendonly={server.get('appendonly', '?')} "
            f"appendfsync={server.get('appendfsync', '?')}"
        )
        # Per-commit durability needs the AOF fsynced on every write (docs/redis.md).
        d["strongest"] = server.get("appendonly") == "yes" and server.get("appendfsync") == "always"
        d["note"] = (
            "Redis acknowledges from memory; commits survive a machine crash only with "
            "appendonly yes + appendfsync always (set on the server, not by tether)"
        )
        return d

    def versions(self) -> dict[str, str]:
        return {**super().versions(), "redis-py": pkg_version("redis")}

    def remarks(self) -> list[str]:
        return [
            "tether_redis: 'bytes' is memory used by the keys (MEMORY USAGE), not a file size",
            "tether_redis: one Lua script per commit (head check + writes, atomic)",
        ]


SYSTEM = TetherRedis
