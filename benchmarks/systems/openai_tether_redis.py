"""OpenAI Agents SDK with tether's ``TetherSession`` on Redis: the pair of
``openai_redis``, the same driving, with one tether store (``open_store(redis://...,
prefix="oa-tether-bench:")``, db 15) shared by every thread's session, on the same
server. Runs in the peers venv beside ``openai_redis``, tether from this checkout's
``src/``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import redis.asyncio  # noqa: F401  (tether's driver: imported before the clock)

import tether.crypto._store
import tether.store._redis_keys
import tether.store.redis  # noqa: F401
from tether.adapters.openai_agents import TetherSession
from tether.store import open_store

from ._openai_sessions import SessionDriver
from .base import REDIS_URL, SkipSystem, System, pkg_version
from .openai_redis import prefix_bytes, redis_durability

PREFIX = "oa-tether-bench:"


class OpenAITetherRedis(SessionDriver, System):
    name = "openai_tether_redis"

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        try:
            self.store = await open_store(REDIS_URL, prefix=PREFIX)
        except Exception as e:  # no server here
            raise SkipSystem(f"Redis at {REDIS_URL} unreachable: {e}") from e
        self._server: dict[str, str] = await self.store.persistence()  # type: ignore[attr-defined]
        if fresh:
            await self.store.drop_prefix()  # type: ignore[attr-defined]
        self.sessions: dict[str, TetherSession] = {}

    def make(self, thread: str) -> TetherSession:
        return TetherSession(thread, self.store)

    async def close(self) -> None:
        await self.store.close()

    async def bytes_on_disk(self) -> int:
        return await prefix_bytes(PREFIX)

    async def cleanup(self, workdir: Path) -> None:
        store = await open_store(REDIS_URL, prefix=PREFIX)
        try:
            await store.drop_prefix()  # type: ignore[attr-defined]
        finally:
            await store.close()

    def durability(self) -> dict[str, Any]:
        return redis_durability(self._server, "TetherSession on one store")

    def versions(self) -> dict[str, str]:
        return {"openai-agents": pkg_version("openai-agents"), "redis-py": pkg_version("redis")}

    def remarks(self) -> list[str]:
        return [
            "same driving as RedisSession: one TetherSession per thread on one shared "
            "store; one Lua script per add_items; 'bytes' is the keys' memory",
        ]


SYSTEM = OpenAITetherRedis
