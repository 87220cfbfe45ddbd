"""OpenAI Agents SDK: ``RedisSession`` (its Redis session), all sessions on one shared
``redis.asyncio`` client, keys under the prefix ``oa-bench:`` of db 15 (deleted with
SCAN + UNLINK before each fresh run and after the last phase, never FLUSHDB); one
``add_items([user, assistant])`` per turn. Durability is the server's setting
(``appendonly``/``appendfsync``), reported as read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from agents.extensions.memory.redis_session import RedisSession

from ._openai_sessions import SessionDriver
from .base import REDIS_URL, SkipSystem, System, pkg_version

PREFIX = "oa-bench"


async def drop_prefix(r: Any, prefix: str) -> None:
    async for k in r.scan_iter(match=prefix + "*", count=1000):
        await r.unlink(k)


async def prefix_bytes(prefix: str) -> int:
    r = aioredis.Redis.from_url(REDIS_URL)
    try:
        total = 0
        async for k in r.scan_iter(match=prefix + "*", count=1000):
            total += int(await r.memory_usage(k) or 0)
        return total
    finally:
        await r.aclose()


async def persistence(r: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for k in ("appendonly", "appendfsync"):
        v = await r.config_get(k)
        out[k] = str(v.get(k, "?"))
    return out


def redis_durability(server: dict[str, str], how: str) -> dict[str, Any]:
    return {
        "setting": f"server appendonly={server.get('appendonly', '?')} "
        f"appendfsync={server.get('appendfsync', '?')}",
        "strongest": server.get("appendonly") == "yes" and server.get("appendfsync") == "always",
        "note": f"the server's settings, not the session's; {how}",
        **server,
    }


class OpenAIRedis(SessionDriver, System):
    name = "openai_redis"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        self.client = aioredis.Redis.from_url(REDIS_URL)
        try:
            self._server = await persistence(self.client)
            if fresh:
                await drop_prefix(self.client, PREFIX)
        except Exception as e:  # no server here
            raise SkipSystem(f"Redis at {REDIS_URL} unreachable: {e}") from e
        self.sessions: dict[str, RedisSession] = {}

    def make(self, thread: str) -> RedisSession:
        return RedisSession(thread, redis_client=self.client, key_prefix=PREFIX)

    async def close(self) -> None:
        await self.client.aclose()

    async def bytes_on_disk(self) -> int:
        return await prefix_bytes(PREFIX)

    async def cleanup(self, workdir: Path) -> None:
        r = aioredis.Redis.from_url(REDIS_URL)
        try:
            await drop_prefix(r, PREFIX)
        finally:
            await r.aclose()

    def durability(self) -> dict[str, Any]:
        return redis_durability(self._server, "RedisSession on one client")

    def versions(self) -> dict[str, str]:
        return {"openai-agents": pkg_version("openai-agents"), "redis-py": pkg_version("redis")}

    def remarks(self) -> list[str]:
        return [
            "one RedisSession per thread on one shared client; 'bytes' is the keys' memory "
            "(MEMORY USAGE); get_items() for (C)",
        ]


SYSTEM = OpenAIRedis
